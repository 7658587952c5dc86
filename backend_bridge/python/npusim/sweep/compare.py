"""`npusim compare A.json B.json`: per-kernel and per-operator differences between two run reports."""

import json

import pandas

from . import metrics


def _per_kernel(report):
    return pandas.DataFrame(metrics.kernel_rows(report)).set_index("kernel")


def _per_op(report):
    clock_hz = report["clock_ghz"] * 1e9
    rows = {
        op: {"commands": e["commands"], "seconds": e["device_cycles"] / clock_hz} for op, e in report["by_op"].items()
    }
    return pandas.DataFrame.from_dict(rows, orient="index")


def difference(a, b, columns):
    """Side by side: each column in A and B, B - A, and B / A; rows present in one report only are kept (zero in
    the other); largest absolute time difference first."""
    joined = a[columns].merge(b[columns], how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    joined = joined.fillna(0)
    for column in columns:
        joined[f"{column}_diff"] = joined[f"{column}_b"] - joined[f"{column}_a"]
    joined["seconds_ratio"] = joined["seconds_b"] / joined["seconds_a"].where(joined["seconds_a"] != 0)
    order = joined["seconds_diff"].abs().sort_values(ascending=False).index
    return joined.loc[order]


def _format(frame, top):
    shown = frame.head(top).copy()
    for column in shown.columns:
        if column.startswith("seconds") and not column.endswith("ratio"):
            shown[column] = shown[column] * 1e6
    shown.columns = [c.replace("seconds", "us") for c in shown.columns]
    return shown.to_string(float_format=lambda v: f"{v:.4g}")


def compare_reports(path_a, path_b, top=25):
    """The comparison as text: totals, then per-kernel and per-operator tables."""
    with open(path_a) as file:
        a = json.load(file)
    with open(path_b) as file:
        b = json.load(file)
    totals_a, totals_b = metrics.run_metrics(a), metrics.run_metrics(b)
    lines = [f"A: {path_a} ({a['config']}, {a['mode']})", f"B: {path_b} ({b['config']}, {b['mode']})", ""]
    for name in ("seconds", "kernel_cycles", "energy_uj", "dram_bytes", "kernels", "utilisation_matrix"):
        va, vb = totals_a[name], totals_b[name]
        ratio = f"{vb / va:.3f}x" if va else "-"
        lines.append(f"{name:<20}{va:>16.6g}{vb:>16.6g}{vb - va:>+16.6g}{ratio:>10}")
    kernels = difference(_per_kernel(a), _per_kernel(b), ["count", "seconds", "energy_uj", "dram_bytes"])
    ops = difference(_per_op(a), _per_op(b), ["commands", "seconds"])
    lines += ["", "per kernel (time in us, largest difference first):", _format(kernels, top)]
    lines += ["", "per operator (time in us, largest difference first):", _format(ops, top)]
    return "\n".join(lines)
