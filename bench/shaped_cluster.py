#!/usr/bin/env python3
"""End-to-end step time of every scheme on shaped links.

Each run starts real processes in a network fabric of its own
(scripts/netfabric.py: one namespace per host, a bridge, every port shaped with
tc tbf): the aggregation server shards, each on a host of its own (shard 0
also serves the coordinator; a decentralized scheme has only that one, for the
rendezvous), and W workers, one per host, on a synthetic model profile
(worker/training/synthetic_runner.h). The workers' JSON summaries give the steady-state
median step and its phases (backward, compress, communicate, decode).

Before the runs it measures the link itself: raw TCP messages of 64 KiB to
64 MiB between two hosts of the fabric, fitted to t = alpha + beta * bytes.

    bench/shaped_cluster.py --out DIR [--quick] [--rate 1gbit] ...

Writes DIR/results.csv (the rows a kept study keeps, bench/results/throughput_suite),
DIR/runs.csv and DIR/runs.json (read by bench/scale_projection.py) and
DIR/link.json; each run's logs, job
config and summaries are kept in DIR/runs/<name>/. Exit status: 0 when every
run finished, 1 when one failed (it is named, with its log), 2 for bad flags,
3 when the fabric cannot be made here (says why).
"""
import argparse
import csv
import json
import os
import re
import secrets
import socket
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from netfabric import Fabric, FabricError, missing_tools  # noqa: E402
import scale_model  # noqa: E402
from scale_model import fit_line  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The daemons (--server and --worker set them).
SERVER = os.path.join(ROOT, "bazel-bin/server/sketchfuse_server")
WORKER = os.path.join(ROOT, "bazel-bin/worker/sketchfuse_worker")

SCHEMES, PS_SCHEMES = scale_model.SCHEMES, scale_model.PS_SCHEMES
PROFILES = ["resnet50", "vgg16", "bert_base", "gpt2_small"]
FUSIONS = ["optimal", "omgs", "mergecomp", "per_layer", "single", "4"]

# The link probe: a raw TCP receiver that reads a length-prefixed message and
# answers one byte once all of it has arrived.
RECEIVER = r"""
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(1 << 22)
while True:
    head = c.recv(8, socket.MSG_WAITALL)
    if len(head) < 8: break
    (n,) = struct.unpack("!Q", head)
    while n > 0:
        got = c.recv_into(buf, min(n, len(buf)))
        if got == 0: sys.exit(1)
        n -= got
    c.sendall(b"k")
"""

SENDER = r"""
import socket, struct, sys, time, json
host, port, sizes, reps = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
for _ in range(100):
    try:
        s = socket.create_connection((host, port)); break
    except OSError:
        time.sleep(0.05)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
payload = bytes(max(sizes))
view = memoryview(payload)
out = []
for n in sizes:
    for r in range(reps + 1):
        t = time.perf_counter()
        s.sendall(struct.pack("!Q", n)); s.sendall(view[:n])
        if s.recv(1) != b"k": sys.exit(1)
        if r > 0: out.append([n, time.perf_counter() - t])
print(json.dumps(out))
"""


def measure_link(fabric, quick):
    """Raw TCP message times host 0 -> host 1 across the switch, and their fit."""
    sizes = [1 << 16, 1 << 20, 1 << 22, 1 << 24] if quick else [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24,
                                                                 1 << 26]
    reps = 2 if quick else 3
    port = "5301"
    receiver = fabric.popen(1, [sys.executable, "-c", RECEIVER, fabric.address(1), port])
    try:
        done = subprocess.run(fabric.exec_prefix(0) + [sys.executable, "-c", SENDER, fabric.address(1), port,
                                                       json.dumps(sizes), str(reps)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise FabricError(f"link probe failed: {done.stderr.strip()}")
        samples = json.loads(done.stdout)
    finally:
        receiver.kill()
        receiver.wait()
    alpha, beta, r2 = fit_line([s[0] for s in samples], [s[1] for s in samples])
    return {"rate": fabric.rate, "samples": [{"bytes": n, "seconds": t} for n, t in samples],
            "alpha_s": alpha, "beta_s_per_byte": beta, "gbps": 8e-9 / beta if beta > 0 else 0, "r2": r2}


class RunFailed(RuntimeError):
    pass


def wait_for_file(path, procs, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return open(path).read().strip()
        for name, p, log in procs:
            if p.poll() is not None:
                raise RunFailed(f"{name} exited ({p.returncode}) before it served; its log: {log}")
        time.sleep(0.05)
    raise RunFailed(f"nothing wrote {path} in {timeout} s")


def route_of(scheme):
    done = subprocess.run([WORKER, f"--scheme={scheme}", "--print_route"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RunFailed(done.stderr.strip())
    return done.stdout.strip()


def run_cluster(fabric, out_dir, scheme, workers, shards, profile, fusion, steps, timeout, extra):
    """One run on `fabric` (hosts 0..shards-1 servers, then the workers); returns its row."""
    route = route_of(scheme)
    if route == "decentralized":
        shards = 1
    name = f"{profile}-{scheme}-w{workers}-s{shards}-{fusion}"
    run_dir = os.path.join(out_dir, "runs", name)
    os.makedirs(run_dir, exist_ok=True)
    for f in os.listdir(run_dir):
        os.remove(os.path.join(run_dir, f))
    token = os.path.join(run_dir, "token")
    with open(token, "w") as f:
        f.write(secrets.token_hex(16))
    os.chmod(token, 0o600)
    run_flags = [f"--job=bench-{name}", f"--world_size={workers}", f"--workload={profile}", f"--scheme={scheme}",
                 f"--fusion={fusion}", "--epochs=1", f"--synthetic_steps={steps}"] + extra
    job = os.path.join(run_dir, "job.json")
    plan = subprocess.run([WORKER, f"--write_job_config={job}"] + run_flags, capture_output=True, text=True)
    if plan.returncode != 0:
        raise RunFailed(f"planning {name}: {plan.stderr.strip()}")
    group_dims = [int(g["dim"]) for g in json.load(open(job)).get("groups", [])]
    groups, parameters = len(group_dims), sum(group_dims)
    procs = []

    def start(name_, host, argv):
        log = os.path.join(run_dir, f"{name_}.log")
        p = fabric.popen(host, argv, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        procs.append((name_, p, log))
        return p

    try:
        start("server0", 0, [SERVER, f"--job_config={job}", "--shard_index=0", f"--num_shards={shards}",
                             "--coordinator", f"--host={fabric.address(0)}", f"--port_file={run_dir}/port0",
                             f"--token_file={token}"])
        coordinator = f"{fabric.address(0)}:{wait_for_file(f'{run_dir}/port0', procs, 60)}"
        for s in range(1, shards):
            start(f"server{s}", s, [SERVER, f"--job_config={job}", f"--shard_index={s}", f"--num_shards={shards}",
                                    f"--coordinator_address={coordinator}", f"--host={fabric.address(s)}",
                                    f"--port_file={run_dir}/port{s}", f"--token_file={token}"])
        worker_procs = []
        for w in range(workers):
            host = shards + w
            worker_procs.append(start(f"worker{w}", host, [
                WORKER, f"--coordinator={coordinator}", f"--worker_id=worker-{w}", f"--token_file={token}",
                f"--collective_host={fabric.address(host)}", f"--summary_json={run_dir}/summary{w}.json",
                "--report_every=0", f"--push_timeout_s={timeout}", f"--collective_timeout_s={timeout}"] + run_flags))
        end = time.time() + timeout
        while any(p.poll() is None for p in worker_procs):
            for name_, p, log in procs:
                if p.poll() not in (None, 0):
                    raise RunFailed(f"{name_} failed (exit {p.returncode}); its log: {log}")
            if time.time() > end:
                raise RunFailed(f"{name} did not finish in {timeout} s; logs in {run_dir}")
            time.sleep(0.2)
        for name_, p, log in procs:
            if name_.startswith("worker") and p.returncode != 0:
                raise RunFailed(f"{name_} failed (exit {p.returncode}); its log: {log}")
    finally:
        for _, p, _ in procs:
            if p.poll() is None:
                p.terminate()
        for _, p, _ in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    summaries = [json.load(open(f"{run_dir}/summary{w}.json")) for w in range(workers)]
    # The step is as slow as the slowest worker; phases are the workers' means.
    median_step = max(s["median_step_s"] for s in summaries)
    phase = {k: statistics.mean(s["phases_s"][k] for s in summaries)
             for k in ("backward", "compress", "communicate", "decode")}
    return {"name": name, "profile": profile, "scheme": scheme, "route": route, "workers": workers, "shards": shards,
            "fusion": fusion, "groups": groups, "steady_steps": summaries[0]["steady_steps"],
            "step_s": median_step, "backward_s": phase["backward"], "compress_s": phase["compress"],
            "communicate_s": phase["communicate"], "decode_s": phase["decode"],
            "bytes_sent_per_step": statistics.mean(s["bytes_sent_per_step"] for s in summaries),
            "compression_ratio": summaries[0]["compression_ratio"], "compressor": summaries[0]["compressor"],
            "parameters": parameters}


# The measured rows of a kept study (bench/results/throughput_suite/results.csv):
# times in ms, the link nominal in Gbit/s; the model's columns stay empty
# until bench/scale_projection.py fits them.
RESULT_FIELDS = ["measurement", "profile", "link_gbps", "workers", "shards", "scheme", "fusion", "groups",
                 "compressor", "steady_steps", "step_ms", "backward_ms", "compress_ms", "communicate_ms",
                 "decode_ms", "sent_bytes_per_step", "compression_ratio", "scaling_efficiency_pct"]


def nominal_gbps(rate):
    """'1gbit' -> 1.0, '200mbit' -> 0.2: a tc rate as Gbit/s."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)bit", rate.strip().lower())
    if not match:
        raise ValueError(f"rate '{rate}' is not a number of kbit, mbit or gbit")
    return float(match.group(1)) * {"k": 1e-6, "m": 1e-3, "g": 1.0}[match.group(2)]


def tc_rate(value):
    """--rate: a tc rate this script can also state in Gbit/s."""
    try:
        nominal_gbps(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))
    return value


def write_results_csv(path, rows, rate):
    """Writes the runs as a study's results.csv (RESULT_FIELDS)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
        writer.writeheader()
        for r in rows:
            writer.writerow({
                "measurement": "measured", "profile": r["profile"], "link_gbps": f"{nominal_gbps(rate):g}",
                "workers": r["workers"], "shards": r["shards"], "scheme": r["scheme"], "fusion": r["fusion"],
                "groups": r["groups"], "compressor": r["compressor"], "steady_steps": r["steady_steps"],
                **{f"{phase}_ms": round(1e3 * r[f"{phase}_s"], 3)
                   for phase in ("step", "backward", "compress", "communicate", "decode")},
                "sent_bytes_per_step": round(r["bytes_sent_per_step"]),
                "compression_ratio": r["compression_ratio"],
                "scaling_efficiency_pct": round(100 * r["backward_s"] / r["step_s"], 2) if r["step_s"] else ""})


def plan_runs(args):
    """(profile, scheme, workers, shards, fusion) of every run, in order."""
    runs = []
    for profile in args.profiles:
        for w in args.workers:
            if profile in args.memory_heavy and w > args.heavy_max_workers:
                continue
            for scheme in args.schemes:
                for s in (args.shards if scheme in PS_SCHEMES else [1]):
                    runs.append((profile, scheme, w, s, args.fusion_default))
    for scheme in args.fusion_schemes:
        for fusion in args.fusions:
            key = (args.fusion_profile, scheme, args.fusion_workers, max(args.shards) if scheme in PS_SCHEMES else 1,
                   fusion)
            if key not in runs:
                runs.append(key)
    return runs


def csv_list(value):
    return [v for v in value.split(",") if v]


def int_list(value):
    try:
        out = [int(v) for v in csv_list(value)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a comma-separated list of integers")
    if not out or any(v < 1 for v in out):
        raise argparse.ArgumentTypeError(f"'{value}': every entry must be a positive integer")
    return out


def main():
    global SERVER, WORKER
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--quick", action="store_true",
                        help="a few short runs that check the harness works end to end (CI); no figures to keep")
    parser.add_argument("--rate", default="1gbit", type=tc_rate, help="tc tbf rate of every link (e.g. 1gbit, 500mbit)")
    parser.add_argument("--workers", type=int_list, default=[2, 4, 8])
    parser.add_argument("--shards", type=int_list, default=[1, 2], help="shard counts of the PS schemes")
    parser.add_argument("--profiles", type=csv_list, default=["resnet50", "gpt2_small"])
    parser.add_argument("--schemes", type=csv_list, default=SCHEMES)
    parser.add_argument("--fusion_default", default="optimal")
    parser.add_argument("--fusions", type=csv_list, default=FUSIONS, help="the fusion comparison's planners")
    parser.add_argument("--fusion_schemes", type=csv_list,
                        default=["dense_allreduce", "sketch_allreduce", "sketch_ps", "topk_allgather"])
    parser.add_argument("--fusion_profile", default="resnet50")
    parser.add_argument("--fusion_workers", type=int, default=4)
    parser.add_argument("--memory_heavy", type=csv_list, default=["gpt2_small", "vgg16", "bert_base"],
                        help="profiles run with at most --heavy_max_workers workers (memory)")
    parser.add_argument("--heavy_max_workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5, help="synthetic steps per run; the first is left out")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a run may take")
    parser.add_argument("--server", default=SERVER, help="the sketchfuse_server binary")
    parser.add_argument("--worker", default=WORKER, help="the sketchfuse_worker binary")
    parser.add_argument("worker_flags", nargs="*", help="after --: more worker flags for every run")
    args = parser.parse_args()
    SERVER, WORKER = args.server, args.worker
    for p in args.profiles + [args.fusion_profile]:
        if p not in PROFILES:
            parser.error(f"unknown profile '{p}'; known: {', '.join(PROFILES)}")
    for s in args.schemes + args.fusion_schemes:
        if s not in SCHEMES + ["dense_ps"]:
            parser.error(f"unknown scheme '{s}'; known: {', '.join(SCHEMES + ['dense_ps'])}")
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is left out)")
    if args.quick:
        args.workers, args.shards, args.profiles, args.steps = [2], [1], ["resnet50"], 2
        args.schemes = ["dense_allreduce", "sketch_ps", "sketch_allreduce"]
        args.fusion_schemes, args.fusions = ["sketch_allreduce"], ["per_layer", "mergecomp"]
        args.fusion_workers = 2
    for binary in (SERVER, WORKER):
        if not os.access(binary, os.X_OK):
            print(f"shaped_cluster: {binary} is not an executable (bash scripts/bazel.sh build "
                  "//server:sketchfuse_server //worker:sketchfuse_worker)", file=sys.stderr)
            return 2
    why = missing_tools()
    if why:
        print(f"shaped_cluster: cannot make the network fabric here: {why}", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    runs = plan_runs(args)
    hosts = max(w + (s if sch in PS_SCHEMES else 1) for _, sch, w, s, _ in runs)
    rows, failed = [], []
    try:
        with Fabric(hosts, args.rate) as fabric:
            link = measure_link(fabric, args.quick)
            json.dump(link, open(os.path.join(args.out, "link.json"), "w"), indent=2)
            print(f"link ({args.rate} tbf): alpha {1e6 * link['alpha_s']:.0f} us, {link['gbps']:.3f} Gb/s "
                  f"(R^2 {link['r2']:.4f}, {len(link['samples'])} raw TCP messages of 64 KiB to "
                  f"{link['samples'][-1]['bytes'] >> 20} MiB)", flush=True)
            print(f"{'run':<48} {'step ms':>9} {'backward':>9} {'compress':>9} {'communic.':>9} {'decode':>9} "
                  f"{'MiB/step':>9}", flush=True)
            for i, (profile, scheme, w, s, fusion) in enumerate(runs):
                t = time.time()
                try:
                    row = run_cluster(fabric, args.out, scheme, w, s, profile, fusion, args.steps, args.timeout,
                                      args.worker_flags)
                except RunFailed as e:
                    failed.append(str(e))
                    print(f"FAILED {profile} {scheme} w{w} s{s} {fusion}: {e}", flush=True)
                    continue
                rows.append(row)
                print(f"{row['name']:<48} {1e3 * row['step_s']:>9.1f} {1e3 * row['backward_s']:>9.1f} "
                      f"{1e3 * row['compress_s']:>9.1f} {1e3 * row['communicate_s']:>9.1f} "
                      f"{1e3 * row['decode_s']:>9.1f} {row['bytes_sent_per_step'] / 2**20:>9.2f}   "
                      f"({i + 1}/{len(runs)}, {time.time() - t:.0f} s)", flush=True)
    except FabricError as e:
        print(f"shaped_cluster: cannot make the network fabric here: {e}", file=sys.stderr)
        return 3
    if rows:
        with open(os.path.join(args.out, "runs.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        write_results_csv(os.path.join(args.out, "results.csv"), rows, args.rate)
    json.dump({"rate": args.rate, "quick": args.quick, "link": link, "runs": rows, "failed": failed},
              open(os.path.join(args.out, "runs.json"), "w"), indent=2)
    print(f"written: {args.out}/results.csv (a study's rows), {args.out}/runs.csv and runs.json "
          f"(bench/scale_projection.py reads them), {args.out}/link.json")
    if failed:
        print(f"{len(failed)} run(s) failed:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
