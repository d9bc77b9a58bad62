#!/usr/bin/env python3
"""Validates the alpha-beta scale model (bench/scale_model.py) against the
shaped-link runs, then projects every scheme to 16-256 workers.

Validation: each measured run (bench/shaped_cluster.py's runs.json) is
simulated with its own fusion plan (its job.json) and the compress and decode
seconds the run measured, spread over its groups by size, on two links: the
raw TCP link fitted in the same fabric (link.json), and each scheme's
effective link (alpha, beta) fitted to the step times of its runs with fewer
than --holdout_workers workers; the larger runs are held out of that fit. The
error is (simulated - measured) / measured step time.

Projection: GPU workers (compress on the device, as a GPU worker does), the
per-group compress and decode costs measured on the GPU (gpu_worker_bench's
fusion runs for the sketch, gpu_compression_bench's top-k, error-feedback and
scatter kernels for the sparse schemes), a backward pass of 20 us + 2 ns per
element per layer (the synthetic profiles' model), links of 10, 25 and 100
Gb/s with latency --alpha_us, NCCL's choice of ring or tree for allreduces,
with the optimal fusion plan the workers use and with one group per layer. Scaling efficiency: the backward pass alone over
the simulated step.

    bench/scale_projection.py --shaped DIR --gpu DIR --out DIR

Writes DIR/validation.{csv,json}, DIR/projection.{csv,json} and, with gnuplot,
DIR/validation.png and DIR/projection.png.
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_model as sm  # noqa: E402

PROJECTED_WORKERS = [16, 32, 64, 128, 256]
PROJECTED_GBPS = [10, 25, 100]
GPU_SKETCH = "count_sketch:method=estimate,density=0.001,rows=5,width=10"  # gpu_worker_bench's compressor
GPU_SPARSE = "topk:density=0.001"                           # gpu_compression_bench's k = d/1000


def load_json(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"scale_projection: cannot read {what} {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"scale_projection: {what} {path} is not JSON: {e}")


def job_layers(run_dir):
    job = load_json(os.path.join(run_dir, "job.json"), "job config")
    sizes = [int(x) for x in job["run"]["layerSizes"]]
    ends = [int(g["layerEnd"]) for g in job["groups"]]
    return sizes, ends, float(job["run"].get("backwardNsPerElement", 2.0)), job["groups"][0]["compressor"]


def link_of(link_json):
    return sm.Link(max(0.0, link_json["alpha_s"]), link_json["beta_s_per_byte"])


def load_runs(shaped_dir):
    """runs.json, and each run's (layer sizes, group ends, ns per element, compressor) from its job.json, by name."""
    runs = load_json(os.path.join(shaped_dir, "runs.json"), "shaped-link runs")
    plans = {r["name"]: job_layers(os.path.join(shaped_dir, "runs", r["name"])) for r in runs["runs"]}
    return runs, plans


def simulate_run(r, plan, link, server_decode):
    sizes, ends, ns, spec = plan
    n = float(r["parameters"])
    costs = sm.Costs(compress=(0.0, r["compress_s"] / n), decode=(0.0, r["decode_s"] / n),
                     server_decode=(0.0, server_decode.get((r["profile"], r["workers"]), 0.0)))
    return sm.simulate_step(sizes, ends, r["scheme"], r["workers"], r["shards"], spec, link, costs, ns)


def fit_scheme_link(runs, plans, raw, server_decode):
    """The (alpha, beta) that best explain these runs' step times: least squared relative error over a grid of
    alpha in [0, 16 ms] and beta from 0.5x to 20x the raw link's."""
    alphas = [0.0] + [1e-5 * 1.4 ** i for i in range(23)]
    factors = [0.5 * 1.11 ** i for i in range(36)]
    best = None
    for alpha in alphas:
        for f in factors:
            link = sm.Link(alpha, raw.beta * f)
            err = 0.0
            for r in runs:
                step, _ = simulate_run(r, plans[r["name"]], link, server_decode)
                err += ((step - r["step_s"]) / r["step_s"]) ** 2
            if best is None or err < best[0]:
                best = (err, link)
    return best[1]


def validate(runs, plans, holdout_workers):
    """Each run simulated twice: on the raw TCP link, and on its scheme's link fitted to the runs with fewer than
    `holdout_workers` workers (the others are held out)."""
    raw = link_of(runs["link"])
    # sketch_ps decodes on the server: its per-element cost is taken from the
    # sketch_allreduce run of the same profile and workers (the same decode).
    server_decode = {(r["profile"], r["workers"]): r["decode_s"] / r["parameters"]
                     for r in runs["runs"] if r["scheme"] == "sketch_allreduce" and r["fusion"] == "optimal"}
    fitted = {}
    for scheme in sorted({r["scheme"] for r in runs["runs"]}):
        train = [r for r in runs["runs"] if r["scheme"] == scheme and r["workers"] < holdout_workers]
        fitted[scheme] = fit_scheme_link(train, plans, raw, server_decode) if train else raw
    rows = []
    for r in runs["runs"]:
        raw_step, _ = simulate_run(r, plans[r["name"]], raw, server_decode)
        link = fitted[r["scheme"]]
        step, parts = simulate_run(r, plans[r["name"]], link, server_decode)
        rows.append({"name": r["name"], "profile": r["profile"], "scheme": r["scheme"], "workers": r["workers"],
                     "shards": r["shards"], "fusion": r["fusion"], "held_out": r["workers"] >= holdout_workers,
                     "measured_s": r["step_s"], "simulated_s": step, "error": (step - r["step_s"]) / r["step_s"],
                     "raw_link_simulated_s": raw_step, "raw_link_error": (raw_step - r["step_s"]) / r["step_s"],
                     "fitted_alpha_us": 1e6 * link.alpha, "fitted_beta_over_raw": link.beta / raw.beta,
                     "simulated_communicate_s": parts["communicate"], "measured_communicate_s": r["communicate_s"]})
    return rows


def read_study(results_dir, study):
    """The rows of a kept study's results.csv (bench/results/<study>/)."""
    path = os.path.join(results_dir, study, "results.csv")
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"scale_projection: cannot read the GPU figures {path}: {e}")


def gpu_costs(results_dir):
    """Per-group (alpha, beta per element) compress/decode costs on the GPU, per compressor family, from
    the GPU studies kept under `results_dir` (gpu_worker_step's fusion plans, gpu_kernels' kernels)."""
    sketch_c, sketch_d = [], []
    plans = [r for r in read_study(results_dir, "gpu_worker_step")
             if r["run"] == "fusion_plans" and r["device"] == "gpu" and r["workload"] == "resnet50"]
    for fusion, groups in (("per_layer", 161), ("single", 1), ("4", 4)):
        for r in (r for r in plans if r["fusion"] == fusion):
            sketch_c.append((groups, 1e-3 * float(r["compress_ms"]), int(r["parameters"])))
            sketch_d.append((groups, 1e-3 * float(r["decode_ms"]), int(r["parameters"])))
    if len({g for g, _, _ in sketch_c}) < 2:
        sys.exit(f"scale_projection: {results_dir}/gpu_worker_step needs GPU figures of at least two fusion plans "
                 "(per_layer, single, 4)")

    # fit_line(groups, seconds) gives seconds = intercept + slope * groups:
    # slope is the per-group overhead, intercept the per-element work of all n.
    def cost(samples):
        intercept, slope, _ = sm.fit_line([g for g, _, _ in samples], [t for _, t, _ in samples])
        n = samples[0][2]
        return (max(0.0, slope), max(0.0, intercept) / n)

    kernels = {r["op"]: (1e-3 * float(r["sketchfuse_ms"]), int(r["parameters"]))
               for r in read_study(results_dir, "gpu_kernels") if r["profile"] == "resnet50"}
    for op in ("topk", "ef_momentum", "scatter_add", "gather"):
        if op not in kernels:
            sys.exit(f"scale_projection: no '{op}' figure in {results_dir}/gpu_kernels/results.csv")
    sketch_compress, sketch_decode = cost(sketch_c), cost(sketch_d)
    per_elem = lambda op: kernels[op][0] / kernels[op][1]  # noqa: E731
    k_fraction = 0.001
    sparse_compress = (sketch_compress[0], per_elem("topk") + per_elem("ef_momentum") + per_elem("gather"))
    # Decoding a sparse aggregate: a scatter-add of the k entries of each worker.
    scatter_per_entry = kernels["scatter_add"][0] / (k_fraction * kernels["scatter_add"][1])
    return {"sketch_compress": sketch_compress, "sketch_decode": sketch_decode, "sparse_compress": sparse_compress,
            "scatter_per_entry_s": scatter_per_entry, "decode_alpha_s": sketch_decode[0], "k_fraction": k_fraction}


def projection_costs(scheme, workers, g):
    if scheme == "dense_allreduce":
        return sm.Costs(), "dense"
    if scheme in ("sketch_allreduce", "sketch_ps"):
        return sm.Costs(compress=g["sketch_compress"], decode=g["sketch_decode"],
                        server_decode=g["sketch_decode"]), GPU_SKETCH
    decode = (g["decode_alpha_s"], workers * g["k_fraction"] * g["scatter_per_entry_s"])
    return sm.Costs(compress=g["sparse_compress"], decode=decode), GPU_SPARSE


def optimal_plan(runs, plans, shaped_dir, profile="resnet50"):
    """(layer sizes, group ends, ns per element) of the workers' optimal plan for `profile`, from its runs."""
    plan_run = next((r for r in runs["runs"] if r["profile"] == profile and r["fusion"] == "optimal"), None)
    if plan_run is None:
        sys.exit(f"scale_projection: no {profile} run with the optimal plan in {shaped_dir}")
    return plans[plan_run["name"]][:3]


def project(plan, g, alpha_s, profile="resnet50"):
    sizes, optimal_ends, ns = plan
    backward = sum(20e-6 + n * ns * 1e-9 for n in sizes)
    rows = []
    for gbps in PROJECTED_GBPS:
        link = sm.Link.of_rate(gbps, alpha_s)
        for workers in PROJECTED_WORKERS:
            for scheme in sm.SCHEMES:
                costs, spec = projection_costs(scheme, workers, g)
                shards = max(1, workers // 8) if scheme.endswith("_ps") else 1
                for fusion, ends in (("optimal", optimal_ends), ("per_layer", sm.per_layer_ends(sizes))):
                    step, parts = sm.simulate_step(sizes, ends, scheme, workers, shards, spec, link, costs, ns,
                                                   compress_on_device=True, allreduce="nccl")
                    rows.append({"profile": profile, "gbps": gbps, "workers": workers, "scheme": scheme,
                                 "shards": shards, "fusion": fusion, "groups": len(ends), "compressor": spec,
                                 "step_s": step, "backward_s": backward, "efficiency": backward / step,
                                 "compress_s": parts["compress"], "communicate_s": parts["communicate"],
                                 "decode_s": parts["decode"]})
    return rows


def measured_setting_on_gpus(plan, g, raw):
    """The shaped-link target's setting (ResNet-50 with `plan`, 4 workers, the measured 1 Gb/s link, 2 shards for
    the PS routes) with GPU workers (the costs --gpu names) instead of the VM's shared cores: step per scheme."""
    sizes, ends, ns = plan
    out = []
    for scheme in sm.SCHEMES:
        costs, spec = projection_costs(scheme, 4, g)
        step, parts = sm.simulate_step(sizes, ends, scheme, 4, 2 if scheme.endswith("_ps") else 1, spec, raw, costs,
                                       ns, compress_on_device=True, allreduce="nccl")
        out.append({"scheme": scheme, "compressor": spec, "step_s": step, **{k + "_s": v for k, v in parts.items()}})
    return out


def crossovers(rows):
    """Per link rate, the smallest projected W at which sketch_allreduce is faster than each rival (fused)."""
    out = []
    for gbps in PROJECTED_GBPS:
        for rival in ("topk_allgather", "gtopk"):
            first = None
            for w in PROJECTED_WORKERS:
                step = {r["scheme"]: r["step_s"] for r in rows
                        if r["gbps"] == gbps and r["workers"] == w and r["fusion"] == "optimal"}
                if step["sketch_allreduce"] < step[rival]:
                    first = w
                    break
            out.append({"gbps": gbps, "rival": rival, "sketch_allreduce_faster_from_workers": first})
    return out


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def plots(out, validation, projection):
    if shutil.which("gnuplot") is None:
        print("(no plots: gnuplot is not installed; scripts/setup.sh --bench installs it)")
        return
    with open(os.path.join(out, "validation.dat"), "w") as f:
        for r in validation:
            f.write(f"{1e3 * r['measured_s']:.3f} {1e3 * r['simulated_s']:.3f}\n")
    cmds = []
    for scheme in sm.SCHEMES:
        path = os.path.join(out, f"projection_{scheme}.dat")
        with open(path, "w") as f:
            for r in projection:
                if r["scheme"] == scheme and r["gbps"] == 25 and r["fusion"] == "optimal":
                    f.write(f"{r['workers']} {100 * r['efficiency']:.3f}\n")
        cmds.append(f"'{path}' using 1:2 with linespoints title '{scheme}'")
    subprocess.run(["gnuplot", "-e",
                    f"set terminal png size 1200,500; set output '{out}/scale.png'; set termoption noenhanced; "
                    "set multiplot layout 1,2; set logscale xy; set xlabel 'measured step (ms)'; "
                    "set ylabel 'simulated step (ms)'; set title 'alpha-beta model against the shaped-link runs'; "
                    f"plot '{out}/validation.dat' using 1:2 with points pt 7 title 'runs', x title 'exact'; "
                    "unset logscale; set logscale x 2; set xlabel 'workers'; set ylabel 'scaling efficiency (%)'; "
                    "set title 'ResNet-50 on GPU workers, 25 Gb/s, fused (projected)'; set key bottom left; "
                    f"set yrange [0:105]; plot {', '.join(cmds)}; unset multiplot"], check=False)
    print(f"plot: {out}/scale.png")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shaped", required=True, help="bench/shaped_cluster.py's output folder")
    parser.add_argument("--gpu", required=True,
                        help="the kept studies' folder (bench/results) whose gpu_kernels and gpu_worker_step "
                             "studies give the GPU costs")
    parser.add_argument("--out", required=True)
    parser.add_argument("--holdout_workers", type=int, default=8,
                        help="runs with at least this many workers are held out of the link fit")
    parser.add_argument("--alpha_us", type=float, default=25.0,
                        help="per-message latency of the projected links, us (>= 0)")
    args = parser.parse_args()
    if not args.alpha_us >= 0:
        parser.error("--alpha_us must be >= 0")
    os.makedirs(args.out, exist_ok=True)
    try:
        runs, plans = load_runs(args.shaped)
        validation = validate(runs, plans, args.holdout_workers)
        g = gpu_costs(args.gpu)
        plan = optimal_plan(runs, plans, args.shaped)
        projection = project(plan, g, 1e-6 * args.alpha_us)
        raw = link_of(runs["link"])
        gpu_setting = measured_setting_on_gpus(plan, g, raw)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        sys.exit(f"scale_projection: the figures in {args.shaped} or {args.gpu} are malformed: "
                 f"{type(e).__name__} {e}")
    if not validation:
        sys.exit(f"scale_projection: {args.shaped}/runs.json has no runs")
    def report(label, rows, key):
        e = sorted(abs(r[key]) for r in rows)
        if e:
            print(f"  {label:<44} |error| median {100 * statistics.median(e):5.1f}%, within 15%: "
                  f"{sum(x <= 0.15 for x in e)}/{len(e)}")

    print(f"validation: {len(validation)} shaped-link runs ({runs['rate']})")
    report("raw TCP link, every run", validation, "raw_link_error")
    report("fitted links, runs in the fit", [r for r in validation if not r["held_out"]], "error")
    report(f"fitted links, held out (W >= {args.holdout_workers})", [r for r in validation if r["held_out"]], "error")
    by_scheme = {}
    for r in validation:
        by_scheme.setdefault(r["scheme"], []).append(r)
    for scheme, rs in sorted(by_scheme.items()):
        e = [abs(r["error"]) for r in rs]
        print(f"  {scheme:<22} fitted alpha {rs[0]['fitted_alpha_us']:7.0f} us, beta {rs[0]['fitted_beta_over_raw']:5.2f}x "
              f"raw; median |error| {100 * statistics.median(e):5.1f}%, max {100 * max(e):5.1f}% ({len(e)} runs)")
    print(f"projection: GPU costs (sketch compress {1e6 * g['sketch_compress'][0]:.1f} us/group + "
          f"{1e12 * g['sketch_compress'][1]:.1f} ps/element, decode {1e6 * g['sketch_decode'][0]:.1f} us/group + "
          f"{1e12 * g['sketch_decode'][1]:.1f} ps/element), links alpha {args.alpha_us:g} us")
    print(f"{'Gb/s':>5} {'W':>4} " + " ".join(f"{s[:14]:>14}" for s in sm.SCHEMES) + "   (efficiency, fused)")
    for gbps in PROJECTED_GBPS:
        for w in PROJECTED_WORKERS:
            eff = {r["scheme"]: r["efficiency"] for r in projection
                   if r["gbps"] == gbps and r["workers"] == w and r["fusion"] == "optimal"}
            print(f"{gbps:>5} {w:>4} " + " ".join(f"{100 * eff[s]:>13.1f}%" for s in sm.SCHEMES))
    dense = next((r["step_s"] for r in gpu_setting if r["scheme"] == "dense_allreduce"), 0)
    if gpu_setting:
        print("the shaped-link setting (ResNet-50, 4 workers, the measured link) with GPU workers, simulated:")
        for r in gpu_setting:
            print(f"  {r['scheme']:<22} step {1e3 * r['step_s']:8.1f} ms   {dense / r['step_s']:5.2f}x dense_allreduce")
    cross = crossovers(projection)
    for c in cross:
        w = c["sketch_allreduce_faster_from_workers"]
        print(f"  {c['gbps']:>3} Gb/s: sketch_allreduce faster than {c['rival']:<14} "
              + (f"from {w} workers" if w else "at none of 16-256 workers"))
    write_csv(os.path.join(args.out, "validation.csv"), validation)
    write_csv(os.path.join(args.out, "projection.csv"), projection)
    json.dump({"validation": validation}, open(os.path.join(args.out, "validation.json"), "w"), indent=2)
    json.dump({"alpha_us": args.alpha_us, "gpu_costs": g, "crossovers": cross, "projection": projection,
               "measured_setting_on_gpus": gpu_setting},
              open(os.path.join(args.out, "projection.json"), "w"), indent=2)
    print(f"written: {args.out}/validation.csv, validation.json, projection.csv, projection.json")
    plots(args.out, validation, projection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
