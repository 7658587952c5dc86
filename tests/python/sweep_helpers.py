"""Helpers shared by the sweep tests: writing sweep files and running `npusim sweep` as a user would."""

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

from npusim import cli

# A workload that fails on purpose on 32 x 32 arrays (and runs a small product elsewhere), to test failures.
PICKY_SCRIPT = """
import sys
import torch
import npusim

rows = npusim._C.device_configuration()["core.systolic_rows"]
if rows == 32:
    print(f"picky: refusing a {rows}-row array", file=sys.stderr)
    raise SystemExit(3)
a = torch.randn(64, 96).to("npusim")  # a product the larger arrays finish sooner
(torch.relu(a @ a.t()) + 1).cpu()
"""


def write(path, text):
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def sweep_command(*args, env=None, **kwargs):
    """Runs `npusim sweep ARGS` and returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "npusim.cli", "sweep", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=300,
        **kwargs,
    )


def sweep_in_process(*args):
    """`npusim sweep ARGS` in this interpreter (saving a second start of torch per call; the runs are still child
    processes); returns its exit code, stdout and stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(["sweep", *map(str, args)])
    return SimpleNamespace(returncode=code, stdout=stdout.getvalue(), stderr=stderr.getvalue())


def fake_report(kernels, clock_ghz=1.0):
    """A minimal `npusim run --report` dict, for result and report tests that need no simulation: `kernels` is a
    list of (name, kernel_cycles, roofline bound, flops, DRAM bytes)."""
    records = [
        {
            "name": name,
            "bytes": dram_bytes,
            "cores": 1,
            "kernel_cycles": cycles,
            "device_cycles": cycles,
            "energy_uj": cycles * 1e-3,
            "stats": {},
            "roofline": {"flops": flops, "bound": bound},
        }
        for name, cycles, bound, flops, dram_bytes in kernels
    ]
    cycles = sum(record["kernel_cycles"] for record in records)
    totals = {
        "seconds": cycles / (clock_ghz * 1e9),
        "kernel_cycles": cycles,
        "device_cycles": cycles,
        "energy_uj": sum(record["energy_uj"] for record in records),
        "copy_bytes": 0,
    }
    return {"clock_ghz": clock_ghz, "records": records, "totals": totals, "fallbacks": {}}


def fake_results(directory, configs, reports):
    """A sweep result directory (sweep.json and a cache of one run per point) as `npusim sweep` leaves it, built
    from full configurations and their reports, its axes the parameters that differ between the configurations.
    Returns the summary table that results.write_results writes."""
    from npusim.sweep import cache, results

    axes = sorted(name for name in configs[0] if len({config[name] for config in configs}) > 1)
    points = []
    for index, (config, report) in enumerate(zip(configs, reports, strict=True)):
        key = f"run{index:04d}"
        cache.RunCache(directory / "cache").put(key, {"status": "ok", "returncode": 0, "report": report})
        points.append({"index": index, "config": config, "figures": {}, "rejected_by": None, "runs": {"w": key}})
    meta = {
        "name": "fake",
        "base": "default",
        "mode": "timed",
        "combine": "list",
        "seed": 0,
        "axes": axes,
        "constraints": [],
        "workloads": [{"name": "w", "script": "w.py", "args": []}],
        "objectives": [{"name": "seconds", "expr": "seconds", "goal": "minimize"}],
        "npusim": "test",
        "points": points,
    }
    (directory / "sweep.json").write_text(json.dumps(meta))
    return results.write_results(directory)
