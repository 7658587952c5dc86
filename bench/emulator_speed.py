"""Emulator speed against CPU PyTorch on the same machine (issue 4's goals), measured in one run.

    python bench/emulator_speed.py            # functional mode; prints ratios (emulator time / torch CPU time)

Not a test: figures depend on the machine. Ratios compare like with like in the same process.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("NPUSIM_MODE", "functional")

import torch  # noqa: E402

import npusim  # noqa: E402, F401


def best_of(repeats, work):
    """The best wall time of `work()`; launches are asynchronous, so the clock stops after the device has finished."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        torch.npusim.synchronize()
        best = min(best, time.perf_counter() - started)
    return best


def check(result, expected, name):
    """A figure from a run that computed something else would be no figure at all."""
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-3, msg=f"{name}: wrong result")


def main():
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []

    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    da, db = a.to("npusim"), b.to("npusim")
    # The emulator first: torch's BLAS threads keep spinning for a while after a CPU matmul and would slow it.
    emulated = best_of(3, lambda: torch.matmul(da, db))  # the first run also builds the kernel
    cpu = best_of(3, lambda: torch.matmul(a, b))
    check(torch.matmul(da, db), torch.matmul(a, b), "GEMM")
    rows.append(("1024x1024x1024 fp32 GEMM", emulated, cpu, 3))

    n = 64 * 1024 * 1024
    x, y = torch.ones(n), torch.ones(n)
    dx, dy = x.to("npusim"), y.to("npusim")
    emulated = best_of(3, lambda: dx + dy)
    cpu = best_of(3, lambda: x + y)
    check(dx + dy, x + y, "add")
    rows.append(("64 Mi-element fp32 add", emulated, cpu, 3))

    print(f"{'workload':<28}{'emulator s':>12}{'torch CPU s':>13}{'ratio':>9}{'goal':>7}")
    for name, emulated, cpu, goal in rows:
        print(f"{name:<28}{emulated:>12.3f}{cpu:>13.4f}{emulated / cpu:>9.1f}{goal:>7}")

    scalar_bench = Path(__file__).resolve().parents[1] / "build" / "bench" / "npusim-bench-scalar"
    if scalar_bench.exists():
        print(subprocess.run([str(scalar_bench)], capture_output=True, text=True, check=True).stdout.strip())
    else:
        print(f"(build the project for {scalar_bench.name})", file=sys.stderr)


if __name__ == "__main__":
    main()
