"""The result tables of a sweep, rebuilt from its description (sweep.json) and the run cache: a Parquet long table
(one row per point, workload and kernel) and a summary CSV (one row per point). Both are written atomically and
derived from the cache, where each run is stored once, so no finished run is lost or counted twice."""

import json
import os
import tempfile
from pathlib import Path

import pandas

from . import metrics
from .cache import RunCache, write_atomically
from .expressions import Expression


def _violations(constraints, figures):
    """The constraints a point's figures break; None when one cannot be decided (a figure the reports lack)."""
    broken = []
    for text in constraints:
        try:
            if not Expression(text).evaluate(figures):
                broken.append(text)
        except (KeyError, TypeError):
            return None
    return broken


def _objective_values(objectives, figures):
    values = {}
    for objective in objectives:
        try:
            values[objective["name"]] = float(Expression(objective["expr"]).evaluate(figures))
        except (KeyError, TypeError):
            values[objective["name"]] = None
    return values


def point_rows(meta, entries):
    """One dict per point: axes, status, figures totalled over the workloads, objectives, feasibility.
    `entries`: {run key: cached outcome or None}."""
    rows = []
    for point in meta["points"]:
        row = {"point": point["index"], **{axis: point["config"][axis] for axis in meta["axes"]}}
        stored = {name: entries[key] for name, key in point["runs"].items()}
        if point["rejected_by"]:
            row.update(status="rejected", rejected_by=point["rejected_by"])
        elif any(entry is None for entry in stored.values()):
            row["status"] = "pending"
        elif any(entry["status"] != "ok" for entry in stored.values()):
            first = next(entry for entry in stored.values() if entry["status"] != "ok")
            row.update(status=first["status"], returncode=first["returncode"])
            row["error"] = (first["stderr_tail"].strip().splitlines() or [""])[-1]
        else:
            row["status"] = "ok"
        if row["status"] == "ok":
            per_workload = {name: metrics.run_metrics(entry["report"]) for name, entry in stored.items()}
            combined = metrics.combine(list(per_workload.values()))
            row.update(combined)
            row["roofline_bound"] = metrics.roofline_bound(combined)
            for name, figures in per_workload.items():
                row[f"{name}.seconds"] = figures["seconds"]
                row[f"{name}.energy_uj"] = figures["energy_uj"]
            figures = {**point["figures"], **{k: v for k, v in combined.items() if v is not None}}
            row.update(_objective_values(meta["objectives"], figures))
            broken = _violations(meta["constraints"], figures)
            row["feasible"] = None if broken is None else not broken
            row["violated"] = "; ".join(broken or [])
        row["run_keys"] = " ".join(point["runs"].values())
        rows.append(row)
    return rows


def kernel_rows(meta, entries):
    """One dict per point, workload and kernel of every successful run."""
    rows = []
    for point in meta["points"]:
        for workload, key in point["runs"].items():
            entry = entries[key]
            if not entry or entry["status"] != "ok":
                continue
            axes = {axis: point["config"][axis] for axis in meta["axes"]}
            for kernel in metrics.kernel_rows(entry["report"]):
                rows.append({"point": point["index"], **axes, "workload": workload, "run_key": key, **kernel})
    return rows


def load_meta(out_dir):
    return json.loads((Path(out_dir) / "sweep.json").read_text())


def write_results(out_dir):
    """Writes summary.csv and results.parquet; returns the summary as a DataFrame."""
    out_dir = Path(out_dir)
    meta, run_cache = load_meta(out_dir), RunCache(out_dir / "cache")
    entries = {key: run_cache.get(key) for point in meta["points"] for key in point["runs"].values()}
    summary = pandas.DataFrame(point_rows(meta, entries))
    kernels = pandas.DataFrame(kernel_rows(meta, entries))
    write_atomically(out_dir / "summary.csv", summary.to_csv(index=False))
    descriptor, temporary = tempfile.mkstemp(dir=out_dir, prefix=".results.", suffix=".parquet")
    os.close(descriptor)
    try:
        kernels.to_parquet(temporary, index=False)
        os.replace(temporary, out_dir / "results.parquet")
    except BaseException:
        os.unlink(temporary)
        raise
    return summary


def read_summary(out_dir):
    return pandas.read_csv(Path(out_dir) / "summary.csv")


def read_kernels(out_dir):
    return pandas.read_parquet(Path(out_dir) / "results.parquet")
