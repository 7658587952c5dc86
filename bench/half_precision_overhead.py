"""Host time per call of half-precision operators that compute in float32 (widened on the device, rounded back once:
float32_compute.cpp) against the same operators in float32, measured in one run.

    python bench/half_precision_overhead.py            # bfloat16 / float32 time per call, small tensors
    python bench/half_precision_overhead.py --smoke    # fewer calls: CI's check that it still works

A widened call adds two conversions and, the first time for each operator and argument dtypes, a run of the
operator's meta function to learn its results' dtypes (some are slow Python functions: torch 2.13's bicubic resize
takes half a second). Each result is checked against the CPU, and an operator that fell back to the CPU or launched
nothing stops the run without a figure. Not a test: figures depend on the machine; the ratio compares like with like.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("NPUSIM_MODE", "functional")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import npusim  # noqa: E402

OPERATORS = {
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "layer_norm": lambda x: F.layer_norm(x, (16,)),
    "bicubic resize": lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    "cumsum": lambda x: torch.cumsum(x, -1),
}


def seconds_per_call(calls, operator, tensor):
    """Wall time of the first call of operator(tensor) (building its kernels, and a widened call's meta run), then
    per call of the next `calls`, synchronised (launches are asynchronous)."""
    started = time.perf_counter()
    operator(tensor)
    torch.npusim.synchronize()
    first = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(calls):
        result = operator(tensor)
    torch.npusim.synchronize()
    return first, (time.perf_counter() - started) / calls, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few calls each (seconds)")
    calls = 3 if parser.parse_args().smoke else 50
    x = torch.randn(2, 8, 16, 16, generator=torch.Generator().manual_seed(0))
    print(f"{'operator':<18}{'first call ms: float32':>24}{'bfloat16':>10}{'then a call: float32':>22}{'bfloat16':>10}"
          f"{'ratio':>8}")  # fmt: skip
    for name, operator in OPERATORS.items():
        firsts, times = {}, {}
        for dtype in (torch.float32, torch.bfloat16):
            on_device = x.to(dtype).to("npusim")
            firsts[dtype], times[dtype], result = seconds_per_call(calls, operator, on_device)
            with npusim.profile() as report:  # one more call, apart: recording has a cost of its own
                operator(on_device).cpu()
            if report.fallbacks or not report.kernels:
                sys.exit(
                    f"{name} ({dtype}): {len(report.kernels)} kernels, CPU fallbacks {report.fallbacks}: no figure"
                )
            expected = operator(x.float()).to(dtype)
            torch.testing.assert_close(result.cpu(), expected, rtol=2e-2, atol=2e-2, msg=f"{name}: wrong result")
        f32, bf16 = times[torch.float32], times[torch.bfloat16]
        print(f"{name:<18}{firsts[torch.float32] * 1e3:>24.1f}{firsts[torch.bfloat16] * 1e3:>10.1f}{f32 * 1e3:>22.3f}"
              f"{bf16 * 1e3:>10.3f}{bf16 / f32:>8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
