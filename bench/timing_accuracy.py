"""Timed-mode accuracy against closed forms (issue 5): emitted GEMMs against the weight-stationary systolic schedule
for several shapes and array sizes, and streaming kernels against bytes / DRAM bandwidth.

    python bench/timing_accuracy.py
    python bench/timing_accuracy.py --smoke    # one small GEMM and one add on one array: CI's check that it works

GEMM closed form, for an M x K x N product on an R x C array (docs/timing.md): every K x N weight tile is loaded once,
into the idle one of the array's two weight sets while the previous tile's product runs (so only the first load's R
cycles show), then all M input rows stream through it (M cycles: products pipeline, each streaming while the one
before drains), the tiles shared by the cores, and the last product drains (R + C - 1):
R + ceil(K/R) * ceil(N/C) * M / cores + R + C - 1  cycles.
Streaming closed form: bytes moved / DRAM bandwidth. "error" is simulated / closed form - 1: what the emitted
kernel adds (tiling, DMA not hidden behind compute, bank conflicts, launch) to the ideal schedule. Each array size
runs in its own process (one SystemC design per process), on the default preset with only the array size changed.
Every kernel's result is checked against torch on the CPU, and a kernel of zero cycles or a run with no kernels stops
without a figure. Not a test: a report.
"""

import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
GEMM_SHAPES = [(256, 256, 256), (1024, 256, 512), (512, 1024, 256), (1024, 1024, 1024)]
ARRAY_SIZES = [8, 16, 32]
STREAM_ELEMENTS = [1 << 16, 1 << 20, 1 << 24]
SMOKE_GEMM_SHAPES, SMOKE_ARRAY_SIZES, SMOKE_STREAM_ELEMENTS = [(32, 16, 24)], [16], [1 << 12]

WORKER = """
import json, sys, torch, npusim
shapes, elements = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = []
def kernel_cycles(run, expected):
    run()  # warm the kernel cache
    with npusim.profile() as report:
        result = run()
    # A figure from a run that computed something else would be no figure at all.
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-3)
    (kernel,) = [r for r in report.records if not r.name.startswith("copy")]
    return kernel.kernel_cycles, kernel.bytes
for m, k, n in shapes:
    a, b = torch.randn(m, k), torch.randn(k, n)
    da, db = a.to("npusim"), b.to("npusim")
    cycles, moved = kernel_cycles(lambda: da @ db, a @ b)
    results.append({"kind": "gemm", "shape": [m, k, n], "cycles": cycles, "bytes": moved})
for count in elements:
    x, y = torch.ones(count).to("npusim"), torch.ones(count).to("npusim")
    cycles, moved = kernel_cycles(lambda: x + y, torch.full((count,), 2.0))
    results.append({"kind": "add", "shape": [count], "cycles": cycles, "bytes": moved})
print(json.dumps(results))
"""


def run_on_array(size, shapes, elements):
    config = yaml.safe_load((ROOT / "configs" / "default.yaml").read_text())
    config["name"] = f"default-{size}x{size}"
    config["core"]["systolic_rows"] = config["core"]["systolic_cols"] = size
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(config, file)
        file.flush()
        environment = {"NPUSIM_MODE": "timed", "NPUSIM_CONFIG": file.name}
        process = subprocess.run(
            [sys.executable, "-c", WORKER, json.dumps(shapes), json.dumps(elements)],
            capture_output=True,
            text=True,
            env={**os.environ, **environment},
        )
    if process.returncode != 0:
        sys.exit(f"the {size}x{size} array's worker failed (exit {process.returncode}):\n{process.stderr.strip()}")
    return config, json.loads(process.stdout.strip().splitlines()[-1])


def systolic_cycles(m, k, n, rows, cols, cores):
    return rows + math.ceil(k / rows) * math.ceil(n / cols) * m / cores + rows + cols - 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one small GEMM and one add (seconds, not minutes)")
    arguments = parser.parse_args()
    shapes, sizes, elements = (
        (SMOKE_GEMM_SHAPES, SMOKE_ARRAY_SIZES, SMOKE_STREAM_ELEMENTS)
        if arguments.smoke
        else (GEMM_SHAPES, ARRAY_SIZES, STREAM_ELEMENTS)
    )
    print(f"{'kernel':<28}{'array':>7}{'simulated':>12}{'closed form':>13}{'error':>8}")
    errors = {"gemm": [], "add": []}
    for size in sizes:
        config, results = run_on_array(size, shapes, elements if size == 16 else [])
        clock_ghz, bandwidth = config["chip"]["clock_ghz"], config["dram"]["bandwidth_gbps"]
        for result in results:
            if result["kind"] == "gemm":
                m, k, n = result["shape"]
                expected = systolic_cycles(m, k, n, size, size, config["chip"]["cores"])
                name = f"GEMM {m}x{k}x{n} f32"
            else:
                expected = result["bytes"] / bandwidth * clock_ghz  # ns at GB/s, then cycles
                name = f"add {result['shape'][0]} f32"
            if result["cycles"] <= 0 or expected <= 0:
                sys.exit(
                    f"{name} on {size}x{size}: {result['cycles']} cycles simulated, {expected} expected: no figure"
                )
            error = result["cycles"] / expected - 1
            errors[result["kind"]].append(error)
            print(f"{name:<28}{size:>4}x{size:<2}{result['cycles']:>12}{expected:>13.0f}{error:>8.1%}")
    for kind, values in errors.items():
        if not values:
            sys.exit(f"no {kind} kernel ran: no figure")
        print(f"{kind}: error from {min(values):.1%} to {max(values):.1%}")


if __name__ == "__main__":
    main()
