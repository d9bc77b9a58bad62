"""Tables of bench/results/blas/ (the same training job on the reference BLAS and on OpenBLAS)."""
from tables.common import fmt, markdown, one, study_rows, value


def rows():
    return study_rows(__file__)


MODELS = ["mlp", "cnn", "cnn_wide", "mlp_large"]


def table_steps(rows):
    """The table of docs/BENCHMARKS.md "The CPU compression core and the BLAS": virtual worker 0's mean step
    and backward pass per model on each BLAS, the speed-ups, and the final accuracies."""
    body = []
    for model in MODELS:
        ref, opt = one(rows, model=model, blas="reference"), one(rows, model=model, blas="openblas")
        step_r, step_o = value(ref, "step_ms"), value(opt, "step_ms")
        back_r, back_o = value(ref, "backward_ms"), value(opt, "backward_ms")
        body.append([model, fmt(step_r, 1, " ms"), fmt(step_o, 1, " ms"), fmt(step_r / step_o, 1, "x"),
                     fmt(back_r, 1, " ms"), fmt(back_o, 1, " ms"), fmt(back_r / back_o, 1, "x"),
                     f"{fmt(value(ref, 'final_test_accuracy_pct'), 2, '%')} / "
                     f"{fmt(value(opt, 'final_test_accuracy_pct'), 2, '%')}"])
    return markdown(["model", "step, reference BLAS", "step, OpenBLAS", "speed-up", "backward, reference",
                     "backward, OpenBLAS", "speed-up", "accuracy, reference / OpenBLAS"], body,
                    ["l"] + ["r"] * 6 + ["l"])


TABLES = {"steps": table_steps}
