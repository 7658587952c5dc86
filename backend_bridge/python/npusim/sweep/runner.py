"""Running a sweep's design points: validate every point, look each run up in the cache, run the rest on an
executor, store each outcome as it arrives, and rebuild the result tables (also when interrupted)."""

import json
import sys
import tempfile
from pathlib import Path

import yaml

import npusim

from . import cache as cache_module
from . import metrics, results
from .executors import NOT_CACHED, make_executor
from .points import axis_names, generate
from .progress import SweepProgress


class SweepError(RuntimeError):
    """A sweep that cannot start (a point the configuration loader rejects, an unreachable scheduler)."""


def validate_with_loader(sweep, points):
    """Loads every runnable point's configuration with the C++ loader, the final word on what a chip can be."""
    with tempfile.TemporaryDirectory(prefix="npusim-sweep-check-") as scratch:
        for point in points:
            if point.rejected_by:
                continue
            path = Path(scratch) / f"point{point.index}.yaml"
            path.write_text(yaml.safe_dump(point.yaml_sections()))
            try:
                npusim._C.configuration(str(path), npusim.config_dirs())
            except Exception as error:
                line = min((sweep.axes[n].line for n in point.overrides if n in sweep.axes), default=1)
                raise SweepError(f"{sweep.path}:{line}: point {point.index} {point.overrides}: {error}") from None


def task_of(sweep, point, workload, threads):
    return {
        "config_sections": point.yaml_sections(),
        "script": workload.script,
        "script_text": Path(workload.script).read_text(),  # for a worker that does not have the script at its path
        "args": list(workload.args),
        "map_device": workload.map_device,
        "mode": sweep.mode,
        "timeout_s": sweep.timeout_s,
        "threads": threads,
        "cwd": str(sweep.path.parent),
    }


def describe(sweep, point):
    return {
        "index": point.index,
        "overrides": point.overrides,
        "config": point.config,
        "figures": point.figures,
        "rejected_by": point.rejected_by,
        "runs": {w.name: cache_module.run_key(point.config, w, sweep.mode) for w in sweep.workloads},
    }


def sweep_metadata(sweep, described_points, extra=None):
    """What the result tables and the report need to know about the sweep, written beside the results."""
    return {
        "name": sweep.name,
        "sweep_file": str(sweep.path),
        "base": sweep.base,
        "mode": sweep.mode,
        "combine": sweep.combine,
        "seed": sweep.seed,
        "axes": axis_names(sweep),
        "constraints": [c.expression.text for c in sweep.constraints],
        "workloads": [{"name": w.name, "script": w.script, "args": list(w.args)} for w in sweep.workloads],
        "objectives": [{"name": o.name, "expr": o.expression.text, "goal": o.goal} for o in sweep.objectives],
        "npusim": cache_module.npusim_version(),
        "points": described_points,
        **(extra or {}),
    }


class RunScheduler:
    """Runs (point, workload) pairs through an executor and the cache; shared by grid sweeps and the search."""

    def __init__(self, sweep, out_dir, executor, retry_failed, quiet):
        self.sweep, self.out_dir, self.executor = sweep, Path(out_dir), executor
        self.cache = cache_module.RunCache(self.out_dir / "cache")
        self.retry_failed, self.quiet = retry_failed, quiet
        self.threads = executor.threads_per_run

    def pending(self, described):
        """Splits runs into cached (ok or failed) and to-run, as [(key, workload, point)]."""
        cached, failed, to_run = [], [], []
        for point, entry in described:
            if point.rejected_by:
                continue
            for workload in self.sweep.workloads:
                key = entry["runs"][workload.name]
                stored = self.cache.get(key)
                if stored and stored["status"] == "ok":
                    cached.append(key)
                elif stored and not self.retry_failed:
                    failed.append(key)
                else:
                    to_run.append((key, workload, point))
        return cached, failed, to_run

    def execute(self, to_run, progress):
        """Runs and stores each outcome as it arrives; returns {key: outcome}."""
        tasks = [
            ((key, workload.name, point.index), task_of(self.sweep, point, workload, self.threads))
            for key, workload, point in to_run
        ]
        outcomes = {}
        for (key, workload_name, index), outcome in self.executor.run(tasks):
            outcome.update(key=key, workload=workload_name, point=index)
            if outcome["status"] not in NOT_CACHED:
                self.cache.put(key, outcome)
            outcomes[key] = outcome
            progress.finished(outcome["status"])
            if outcome["status"] != "ok" and not self.quiet:
                last = outcome["stderr_tail"].strip().splitlines()[-1:] or [""]
                print(
                    f"npusim sweep: point {index} / {workload_name}: {outcome['status']} "
                    f"(exit {outcome['returncode']}): {last[0]}",
                    file=sys.stderr,
                )
        return outcomes

    def point_figures(self, entry):
        """A point's combined run figures from the cache, or None unless every workload succeeded."""
        per_workload = []
        for key in entry["runs"].values():
            stored = self.cache.get(key)
            if not stored or stored["status"] != "ok":
                return None
            per_workload.append(metrics.run_metrics(stored["report"]))
        return metrics.combine(per_workload)


def run_sweep(sweep, out_dir, executor_kind="local", jobs=None, scheduler=None, retry_failed=False, quiet=False):
    """Runs every point of a grid/zip/list/sampled sweep; returns the summary table (pandas)."""
    executor = make_executor(executor_kind, jobs, scheduler)
    try:
        return _run_points(sweep, Path(out_dir), executor, retry_failed, quiet)
    finally:
        executor.close()


def _run_points(sweep, out_dir, executor, retry_failed, quiet):
    points = generate(sweep)
    validate_with_loader(sweep, points)
    out_dir.mkdir(parents=True, exist_ok=True)
    described = [(point, describe(sweep, point)) for point in points]
    cache_module.write_atomically(
        out_dir / "sweep.json", json.dumps(sweep_metadata(sweep, [entry for _, entry in described]), indent=1)
    )
    run_scheduler = RunScheduler(sweep, out_dir, executor, retry_failed, quiet)
    cached, failed, to_run = run_scheduler.pending(described)
    total = len(cached) + len(failed) + len(to_run)
    if not quiet:
        rejected = sum(1 for p in points if p.rejected_by)
        print(
            f"npusim sweep {sweep.name}: {len(points)} points ({rejected} rejected by constraints), "
            f"{total} runs: {len(cached)} cached, {len(failed)} failed before, {len(to_run)} to run "
            f"({executor.description})",
            file=sys.stderr,
        )
    progress = SweepProgress(total, len(cached), len(failed), quiet, sweep.name)
    try:
        run_scheduler.execute(to_run, progress)
    finally:
        progress.close()
        table = results.write_results(out_dir)
    return table
