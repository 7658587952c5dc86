"""Emulator speed against CPU PyTorch on the same machine (issue 4's goals), measured in one run.

    python bench/emulator_speed.py            # functional mode; prints ratios (emulator time / torch CPU time)
    python bench/emulator_speed.py --smoke    # the same at a tiny size, once each: CI's check that it still works

Each timed result is checked against torch on the CPU, and a workload that launched no kernel on the device (a CPU
fallback, or nothing at all) stops the run without a figure. Not a test: figures depend on the machine. Ratios compare
like with like in the same process.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("NPUSIM_MODE", "functional")

import torch  # noqa: E402

import npusim  # noqa: E402


def best_of(repeats, work):
    """The best wall time of `work()` and its last result; launches are asynchronous, so the clock stops after the
    device has finished."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = work()
        torch.npusim.synchronize()
        best = min(best, time.perf_counter() - started)
    return best, result


def check(result, expected, name):
    """A figure from a run that computed something else would be no figure at all."""
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-3, msg=f"{name}: wrong result")


def device_seconds(repeats, work, name):
    """best_of on the device, refusing a figure if the work is not a kernel on the device (a CPU fallback, or nothing).
    The profiled run is one more, apart: recording would add its own cost to the timed ones."""
    seconds, result = best_of(repeats, work)
    with npusim.profile() as report:
        work()
    if report.fallbacks or not report.kernels:
        sys.exit(f"{name}: {len(report.kernels)} kernels on the device, CPU fallbacks {report.fallbacks}: no figure")
    return seconds, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one run each (seconds, not minutes)")
    arguments = parser.parse_args()
    size, elements, repeats = (64, 4096, 1) if arguments.smoke else (1024, 64 * 1024 * 1024, 3)
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []

    a, b = torch.randn(size, size), torch.randn(size, size)
    da, db = a.to("npusim"), b.to("npusim")
    # The emulator first: torch's BLAS threads keep spinning for a while after a CPU matmul and would slow it.
    emulated, result = device_seconds(repeats, lambda: torch.matmul(da, db), "GEMM")  # the first run builds the kernel
    cpu, expected = best_of(repeats, lambda: torch.matmul(a, b))
    check(result, expected, "GEMM")
    rows.append((f"{size}x{size}x{size} fp32 GEMM", emulated, cpu, 3))

    x, y = torch.ones(elements), torch.ones(elements)
    dx, dy = x.to("npusim"), y.to("npusim")
    emulated, result = device_seconds(repeats, lambda: dx + dy, "add")
    cpu, expected = best_of(repeats, lambda: x + y)
    check(result, expected, "add")
    count = f"{elements // (1024 * 1024)} Mi" if elements >= 1024 * 1024 else f"{elements}"
    rows.append((f"{count}-element fp32 add", emulated, cpu, 3))

    print(f"{'workload':<28}{'emulator s':>12}{'torch CPU s':>13}{'ratio':>9}{'goal':>7}")
    for name, emulated, cpu, goal in rows:
        print(f"{name:<28}{emulated:>12.3f}{cpu:>13.4f}{emulated / cpu:>9.1f}{goal:>7}")

    scalar_bench = Path(__file__).resolve().parents[1] / "build" / "bench" / "npusim-bench-scalar"
    if scalar_bench.exists():
        command = [str(scalar_bench), *(["100000"] if arguments.smoke else [])]
        print(subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip())
    else:
        print(f"(build the project for {scalar_bench.name})", file=sys.stderr)


if __name__ == "__main__":
    main()
