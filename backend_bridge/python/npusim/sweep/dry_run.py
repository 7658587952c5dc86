"""`npusim sweep --dry-run`: the points a sweep would run, the ones its constraints reject and why, which runs are
already cached, and an estimate of the run time."""

import statistics

from . import cache as cache_module
from .points import axis_names, generate

# A run's wall time before any run of its workload has been timed: interpreter, torch and npusim start-up plus a
# small workload; the cache's own timings replace it as soon as there are some.
UNTIMED_RUN_SECONDS = 15.0


def dry_run(sweep, out_dir, jobs):
    """Prints the plan; returns the estimated wall time in seconds."""
    points = generate(sweep)
    run_cache = cache_module.RunCache(out_dir / "cache") if (out_dir / "cache").is_dir() else None
    axes = axis_names(sweep)
    width = max([6] + [len(a) + 2 for a in axes])
    print(f"sweep {sweep.name}: base {sweep.base}, {sweep.mode} mode, {sweep.combine}, {len(points)} points")
    print("".join(f"{'point':<7}") + "".join(f"{axis:>{width}}" for axis in axes) + "  status")
    estimate, per_workload = 0.0, {}
    for workload in sweep.workloads:
        timed = run_cache.wall_seconds(workload.name) if run_cache else []
        per_workload[workload.name] = statistics.mean(timed) if timed else None
    runnable = 0
    for point in points:
        values = "".join(f"{point.config[axis]!s:>{width}}" for axis in axes)
        if point.rejected_by:
            status = f"rejected: {point.rejected_by}"
        else:
            runnable += 1
            cached = 0
            for workload in sweep.workloads:
                key = cache_module.run_key(point.config, workload, sweep.mode)
                stored = run_cache.get(key) if run_cache else None
                if stored:
                    cached += 1
                else:
                    estimate += per_workload[workload.name] or UNTIMED_RUN_SECONDS
            status = "run" if not cached else f"{cached}/{len(sweep.workloads)} runs cached"
        print(f"{point.index:<7}{values}  {status}")
    timing = ", ".join(
        f"{name} {seconds:.1f} s/run (measured)" if seconds else f"{name} ~{UNTIMED_RUN_SECONDS:.0f} s/run (guess)"
        for name, seconds in per_workload.items()
    )
    print(
        f"{runnable} points to run, {len(points) - runnable} rejected; {len(sweep.workloads)} workloads ({timing}); "
        f"estimated {estimate / max(jobs, 1) / 60:.1f} min with {jobs} jobs"
    )
    return estimate / max(jobs, 1)
