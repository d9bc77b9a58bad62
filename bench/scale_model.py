"""The alpha-beta scale model of a SketchFuse step, for every scheme.

A step is simulated the way worker/pipeline/step_pipeline.h runs it (the same two
resources as common/fusion_planner.h SimulateStepTime):
  backward      layer l's gradient is ready after the layers before it and
                its own 20 us + n_l * ns_per_element (the synthetic profiles'
                model of an accelerator's backward pass);
  communication one thread, groups in plan order: group g starts at
                max(ready_g, end_{g-1}) and takes compress(n_g) + comm(n_g) +
                decode(n_g); with compress_on_device (a GPU worker) compress
                runs on the compute device instead, delaying the layers after
                the group, as in SimulateStepTime. A parameter-server push is
                asynchronous: the thread only compresses, and the pushes and
                answers queue on the network in group order.
The step ends when the last group does (or the backward pass, if later).

comm(n) is the scheme's traffic on a link of latency alpha (s) and beta (s per
byte), full duplex, one per host, a non-blocking switch:
  allreduce (dense_allreduce, sketch_allreduce)
    ring (Gloo's, which the CPU workers use)          2(W-1) alpha + 2(W-1)/W P beta
    nccl (the faster of ring and a pipelined tree,
          as NCCL chooses; GPU workers)               tree: 2 ceil(log2 W) alpha + 2 P beta
  allgather (topk_allgather)                            (W-1) alpha + (W-1) P beta
  gtopk (tree reduction, then broadcast)             2 ceil(log2 W) (alpha + P beta)
  spardl (sparse reduce-scatter, all-gather)          2 log2 W alpha + 2(W-1)/W P beta
  importance_allreduce (broadcast of the k indices, ceil(log2 W) (alpha + P/2 beta)
                        allreduce of their values)     + ring allreduce of P/2
  parameter server (sketch_ps, topk_ps, dense_ps):   2 alpha + max(1, W/S) (P + R) beta
    (a group's W pushes arrive on one shard's link; groups alternate shards)
    plus, for sketch_ps, the server's decode of the summed sketch.
P is the group's payload (bytes), R the server's answer (8 bytes per selected
coordinate; 4 per element for dense_ps).
"""
import math

# The traffic of each modelled scheme's algorithm (the table above), by the
# registry's scheme name. The schemes the model covers are this table's keys,
# not a list of their own; //bench:scale_model_test checks each against the
# worker's registry (--list_schemes=json): a known name on the route its
# traffic says (the parameter-server traffic for the centralized schemes).
def _ring_or_tree(W, payload, answer, shards, link, allreduce):
    return allreduce_seconds(W, payload, link, allreduce)


def _allgather(W, payload, answer, shards, link, allreduce):
    return (W - 1) * link.alpha + (W - 1) * payload * link.beta


def _gtopk(W, payload, answer, shards, link, allreduce):
    return 2 * math.ceil(math.log2(W)) * (link.alpha + payload * link.beta)


def _spardl(W, payload, answer, shards, link, allreduce):
    return 2 * math.ceil(math.log2(W)) * link.alpha + 2 * (W - 1) / W * payload * link.beta


def _importance(W, payload, answer, shards, link, allreduce):
    return (math.ceil(math.log2(W)) * (link.alpha + payload / 2 * link.beta)
            + allreduce_seconds(W, payload / 2, link, allreduce))


def _parameter_server(W, payload, answer, shards, link, allreduce):
    return 2 * link.alpha + max(1.0, W / shards) * (payload + answer) * link.beta


TRAFFIC = {
    "dense_allreduce": _ring_or_tree,
    "topk_allgather": _allgather,
    "gtopk": _gtopk,
    "topk_ps": _parameter_server,
    "sketch_ps": _parameter_server,
    "sketch_allreduce": _ring_or_tree,
    "spardl": _spardl,
    "importance_allreduce": _importance,
    "dense_ps": _parameter_server,
}
SCHEMES = [s for s in TRAFFIC if s != "dense_ps"]  # the suite's schemes: dense_ps trains as dense_allreduce does
PS_SCHEMES = {s for s, traffic in TRAFFIC.items() if traffic is _parameter_server}


# Parameters whose values are words, not numbers.
WORD_PARAMS = {"method"}


def parse_spec(spec):
    """'name:key=value,...' -> (name, {key: float, or str for WORD_PARAMS}); ValueError naming the problem."""
    name, _, params = spec.partition(":")
    values = {}
    for item in filter(None, params.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"compressor spec '{spec}': '{item}' is not key=value")
        if key in WORD_PARAMS:
            values[key] = value
            continue
        try:
            values[key] = float(value)
        except ValueError:
            raise ValueError(f"compressor spec '{spec}': {key}={value} is not a number")
    return name, values


def payload_bytes_per_element(spec):
    """Bytes a worker's payload holds per gradient element, for a compressor spec."""
    name, p = parse_spec(spec)
    if name == "dense":
        return 4.0
    if "density" not in p:
        raise ValueError(f"compressor spec '{spec}' has no density")
    if name == "count_sketch":
        # The compressor's defaults (common/compressors/count_sketch_compressor.cc).
        peel = p.get("method", "peel") == "peel"
        return 4.0 * p.get("rows", 4 if peel else 5) * p.get("width", 4 if peel else 10) * p["density"]
    return 8.0 * p["density"]


def answer_bytes_per_element(spec):
    name, p = parse_spec(spec)
    return 4.0 if name == "dense" else 8.0 * p["density"]


class Link:
    def __init__(self, alpha_s, beta_s_per_byte):
        if alpha_s < 0 or beta_s_per_byte <= 0:
            raise ValueError(f"a link needs alpha >= 0 and beta > 0 (got {alpha_s}, {beta_s_per_byte})")
        self.alpha, self.beta = alpha_s, beta_s_per_byte

    @staticmethod
    def of_rate(gbps, alpha_s):
        return Link(alpha_s, 8e-9 / gbps)


def allreduce_seconds(workers, payload, link, algorithm="ring"):
    W, a, b = workers, link.alpha, link.beta
    ring = 2 * (W - 1) * a + 2 * (W - 1) / W * payload * b
    if algorithm == "ring":
        return ring
    if algorithm == "nccl":
        return min(ring, 2 * math.ceil(math.log2(W)) * a + 2 * payload * b)
    raise ValueError(f"unknown allreduce algorithm '{algorithm}' (ring or nccl)")


def comm_seconds(scheme, workers, shards, payload, answer, link, allreduce="ring"):
    """Seconds the traffic of one group takes (payload and answer in bytes)."""
    if workers == 1:
        return 0.0
    if scheme not in TRAFFIC:
        raise ValueError(f"no traffic model for scheme '{scheme}'")
    return TRAFFIC[scheme](workers, payload, answer, shards, link, allreduce)


class Costs:
    """Per-group compress and decode seconds as alpha + beta * elements."""

    def __init__(self, compress=(0.0, 0.0), decode=(0.0, 0.0), server_decode=(0.0, 0.0)):
        self.compress, self.decode, self.server_decode = compress, decode, server_decode

    @staticmethod
    def at(cost, n):
        return max(0.0, cost[0] + cost[1] * n)


def layer_ready_times(layer_sizes, ns_per_element, overhead_s=20e-6):
    t, out = 0.0, []
    for n in layer_sizes:
        t += overhead_s + n * ns_per_element * 1e-9
        out.append(t)
    return out


def simulate_step(layer_sizes, group_ends, scheme, workers, shards, spec, link, costs, ns_per_element,
                  compress_on_device=False, allreduce="ring"):
    """Simulated step seconds and its parts. group_ends: each group's end layer (exclusive), in order."""
    if not group_ends or group_ends[-1] != len(layer_sizes) or any(
            b <= a for a, b in zip([0] + group_ends, group_ends)):
        raise ValueError("the groups must tile the layers in order")
    p_elem, r_elem = payload_bytes_per_element(spec), answer_bytes_per_element(spec)
    compute, pipeline, network, first = 0.0, 0.0, 0.0, 0
    parts = {"compress": 0.0, "communicate": 0.0, "decode": 0.0}
    for end in group_ends:
        n = sum(layer_sizes[first:end])
        for size in layer_sizes[first:end]:
            compute += 20e-6 + size * ns_per_element * 1e-9
        c = Costs.at(costs.compress, n)
        d = Costs.at(costs.decode, n)
        m = comm_seconds(scheme, workers, shards, p_elem * n, r_elem * n, link, allreduce)
        if scheme == "sketch_ps":
            m += Costs.at(costs.server_decode, n)
        parts["compress"] += c
        parts["communicate"] += m
        parts["decode"] += d
        if compress_on_device:
            compute += c
            ready = compute
        else:
            pipeline = max(compute, pipeline) + c
            ready = pipeline
        if scheme in PS_SCHEMES:
            # Pushes are asynchronous: the thread goes on to the next group while
            # the network carries this one (a FIFO of its own).
            network = max(ready, network) + m + d
        else:
            pipeline = max(ready, pipeline) + m + d
        first = end
    parts["backward"] = compute - (parts["compress"] if compress_on_device else 0.0)
    return max(compute, pipeline, network), parts


def per_layer_ends(layer_sizes):
    return list(range(1, len(layer_sizes) + 1))


def fit_line(xs, ys):
    """Least squares y = a + b x -> (a, b, r2); ValueError for fewer than 2 distinct x."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError("a line needs at least 2 distinct x values")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    return a, b, (1 - res / ss) if ss > 0 else 1.0
