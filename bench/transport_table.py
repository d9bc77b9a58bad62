#!/usr/bin/env python3
"""Pairs server_bench's gRPC push-and-reply rows with the raw TCP rows of the
same run (same MiB, as many channels as connections) and prints a table:
time, GB/s in all and per channel, and gRPC's share of raw TCP. Then, at
16 MiB on one channel, where the push's time goes: gRPC echoing the same bytes
with no copy out of its buffers and with the decode's two copies, and the push
with gRPC's defaults and the two alternative TCP settings, each against raw TCP.

    bench/transport_table.py SERVER_BENCH_JSON OUT_PREFIX

SERVER_BENCH_JSON is the file of `server_bench --benchmark_out=F
--benchmark_out_format=json`; writes OUT_PREFIX.csv, OUT_PREFIX.json and,
with gnuplot, OUT_PREFIX.png.
"""
import csv
import json
import re
import shutil
import subprocess
import sys


def parse_args(name):
    """'BM_X/MiB:16/channels:1/tuned:1/real_time' -> {'MiB': 16, ...}."""
    return {k: int(v) for k, v in re.findall(r"/(\w+):(\d+)", name)}


def pair(benchmarks):
    grpc, tcp = {}, {}
    for b in benchmarks:
        if b.get("run_type") == "aggregate" or "error_occurred" in b and b["error_occurred"]:
            continue
        a = parse_args(b["name"])
        ms = b["real_time"] if b.get("time_unit") == "ms" else None
        if ms is None:
            raise ValueError(f"{b['name']}: expected times in ms, got {b.get('time_unit')}")
        if b["name"].startswith("BM_GrpcPushReply/") and a.get("tuned") == 1:
            grpc[(a["MiB"], a["channels"])] = (ms, b["bytes_per_second"])
        elif b["name"].startswith("BM_RawTcpRoundTrip/"):
            tcp[(a["MiB"], a["connections"])] = (ms, b["bytes_per_second"])
    rows = []
    for (mib, channels), (ms, bps) in sorted(grpc.items()):
        if (mib, channels) not in tcp:
            continue
        tcp_ms, tcp_bps = tcp[(mib, channels)]
        rows.append({"MiB": mib, "channels": channels, "grpc_ms": ms, "grpc_gbps": bps / 1e9,
                     "grpc_gbps_per_channel": bps / 1e9 / channels, "tcp_ms": tcp_ms, "tcp_gbps": tcp_bps / 1e9,
                     "share_of_tcp": bps / tcp_bps})
    return rows


def breakdown(benchmarks, mib=16):
    """The 16 MiB one-channel rows that explain the push's share of raw TCP."""
    names = {
        f"BM_RawTcpRoundTrip/MiB:{mib}/connections:1/real_time": "raw TCP round trip",
        f"BM_GrpcEcho/MiB:{mib}/copies:0/real_time": "gRPC echo, values left in gRPC's buffers",
        f"BM_GrpcEcho/MiB:{mib}/copies:2/real_time": "gRPC echo, one copy out at each end",
        f"BM_GrpcPushReply/MiB:{mib}/channels:1/tuned:1/real_time": "push and reply (the daemons' settings)",
        f"BM_GrpcPushReply/MiB:{mib}/channels:1/tuned:0/real_time": "push and reply, gRPC's defaults",
        f"BM_GrpcPushReply/MiB:{mib}/channels:1/tuned:2/real_time": "push and reply, + 1 MiB TCP reads",
        f"BM_GrpcPushReply/MiB:{mib}/channels:1/tuned:3/real_time": "push and reply, + zero-copy sends",
    }
    ms = {}
    for b in benchmarks:
        if b.get("run_type") != "aggregate" and not b.get("error_occurred") and b["name"] in names:
            ms[b["name"]] = b["real_time"]
    tcp = ms.get(f"BM_RawTcpRoundTrip/MiB:{mib}/connections:1/real_time")
    if tcp is None:
        return []
    return [{"MiB": mib, "what": label, "ms": ms[name], "share_of_tcp": tcp / ms[name]}
            for name, label in names.items() if name in ms]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, prefix = sys.argv[1], sys.argv[2]
    try:
        with open(path) as f:
            data = json.load(f)
        rows = pair(data["benchmarks"])
    except OSError as e:
        sys.exit(f"transport_table: cannot read {path}: {e.strerror}")
    except (json.JSONDecodeError, KeyError, ValueError) as e:
        sys.exit(f"transport_table: {path} is not server_bench JSON output: {e}")
    if not rows:
        sys.exit(f"transport_table: {path} holds no pair of gRPC (tuned) and raw TCP rows")
    print(f"{'MiB':>4} {'ch':>3} {'gRPC ms':>9} {'GB/s':>7} {'GB/s/ch':>8} {'TCP ms':>8} {'TCP GB/s':>9} {'share':>6}")
    for r in rows:
        print(f"{r['MiB']:>4} {r['channels']:>3} {r['grpc_ms']:>9.2f} {r['grpc_gbps']:>7.2f} "
              f"{r['grpc_gbps_per_channel']:>8.2f} {r['tcp_ms']:>8.2f} {r['tcp_gbps']:>9.2f} "
              f"{100 * r['share_of_tcp']:>5.0f}%")
    with open(prefix + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    parts = breakdown(data["benchmarks"])
    if parts:
        print(f"where the time goes at {parts[0]['MiB']} MiB, one channel:")
        for r in parts:
            print(f"  {r['what']:<45} {r['ms']:>8.2f} ms  {100 * r['share_of_tcp']:>4.0f}% of raw TCP")
    json.dump({"context": data.get("context", {}), "rows": rows, "breakdown": parts}, open(prefix + ".json", "w"),
              indent=2)
    print(f"written: {prefix}.csv, {prefix}.json")
    if shutil.which("gnuplot"):
        cmds = []
        for ch in sorted({r["channels"] for r in rows}):
            dat = f"{prefix}_{ch}.dat"
            with open(dat, "w") as f:
                for r in rows:
                    if r["channels"] == ch:
                        f.write(f"{r['MiB']} {r['grpc_gbps']:.4f} {r['tcp_gbps']:.4f}\n")
            cmds.append(f"'{dat}' using 1:2 with linespoints title 'gRPC, {ch} channel(s)'")
            cmds.append(f"'{dat}' using 1:3 with lines dashtype 2 title 'raw TCP, {ch} connection(s)'")
        subprocess.run(["gnuplot", "-e", f"set terminal png size 900,500; set output '{prefix}.png'; "
                        "set termoption noenhanced; set logscale x 2; set xlabel 'payload each way (MiB)'; "
                        "set ylabel 'GB/s (both ways, all channels)'; set key outside; "
                        f"set title 'push and reply on loopback'; plot {', '.join(cmds)}"], check=False)
        print(f"plot: {prefix}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
