"""Tables of bench/results/transport/ (the shards' gRPC push and reply against raw TCP on
loopback: where the time of a 16 MiB round trip goes, and 1 to 64 MiB on 1, 2 and 4 channels)."""
from tables.common import fmt, markdown, one, study_rows, value

ROWS_16 = [
    ("raw_tcp", "", "raw TCP (send, echo back, receive)"),
    ("grpc_echo", "values_left_in_grpc_buffers", "gRPC echoing the push's bytes, values left in gRPC's buffers"),
    ("grpc_echo", "values_copied_out", "gRPC echo, the values copied out of gRPC's buffers at each end"),
    ("grpc_push_reply", "daemons", "**push and reply, the daemons' settings**"),
    ("grpc_push_reply", "grpc_defaults", "push and reply, gRPC's defaults"),
    ("grpc_push_reply", "tcp_reads_1mib", "push and reply, + 1 MiB TCP reads"),
    ("grpc_push_reply", "zerocopy_sends", "push and reply, + zero-copy sends (`MSG_ZEROCOPY`)"),
]


def rows():
    return study_rows(__file__)


def table_sixteen_mib(rows):
    """The table of docs/BENCHMARKS.md "The aggregation servers": a 16 MiB round trip on one
    channel, the median of five repetitions, and its share of raw TCP's rate."""
    tcp = value(one(rows, benchmark="raw_tcp", mib=16, channels=1, repetitions=5), "round_trip_ms")
    body = []
    for bench, setting, label in ROWS_16:
        ms = value(one(rows, benchmark=bench, setting=setting, mib=16, channels=1, repetitions=5), "round_trip_ms")
        share = fmt(100 * tcp / ms, 0, "%")
        bold = label.startswith("**")
        body.append([label, f"**{fmt(ms)}**" if bold else fmt(ms), f"**{share}**" if bold else share])
    return markdown(["round trip of 16 MiB each way, one channel", "ms", "share of raw TCP"], body)


def table_sizes(rows):
    """The suite's sweep ("The aggregation servers"): push and reply with the daemons' settings
    against raw TCP on as many connections, one run each; gRPC's ms and its share of raw TCP."""
    body = []
    for mib in ("1", "4", "16", "64"):
        cells = []
        for ch in ("1", "2", "4"):
            g = value(one(rows, benchmark="grpc_push_reply", setting="daemons", mib=mib, channels=ch, repetitions=1),
                      "round_trip_ms")
            t = value(one(rows, benchmark="raw_tcp", mib=mib, channels=ch, repetitions=1), "round_trip_ms")
            cells.append(f"{fmt(g, 2)} ({fmt(100 * t / g, 0, '%')})")
        body.append([mib] + cells)
    return markdown(["MiB each way", "1 channel", "2 channels", "4 channels"], body, ["r", "r", "r", "r"])


TABLES = {"sixteen_mib": table_sixteen_mib, "sizes": table_sizes}
