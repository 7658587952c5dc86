"""Timed-mode accuracy against closed forms (issue 5): emitted GEMMs against the weight-stationary systolic schedule
for several shapes and array sizes, and streaming kernels against bytes / DRAM bandwidth.

    python bench/timing_accuracy.py

GEMM closed form, for an M x K x N product on an R x C array (docs/timing.md): every K x N weight tile is loaded once,
into the idle one of the array's two weight sets while the previous tile's product runs (so only the first load's R
cycles show), then all M input rows stream through it (M cycles: products pipeline, each streaming while the one
before drains), the tiles shared by the cores, and the last product drains (R + C - 1):
R + ceil(K/R) * ceil(N/C) * M / cores + R + C - 1  cycles.
Streaming closed form: bytes moved / DRAM bandwidth. "error" is simulated / closed form - 1: what the emitted
kernel adds (tiling, DMA not hidden behind compute, bank conflicts, launch) to the ideal schedule. Each array size
runs in its own process (one SystemC design per process), on the default preset with only the array size changed.
Not a test: a report.
"""

import json
import math
import pathlib
import subprocess
import sys
import tempfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
GEMM_SHAPES = [(256, 256, 256), (1024, 256, 512), (512, 1024, 256), (1024, 1024, 1024)]
ARRAY_SIZES = [8, 16, 32]
STREAM_ELEMENTS = [1 << 16, 1 << 20, 1 << 24]

WORKER = """
import json, sys, torch, npusim
shapes, elements = json.loads(sys.argv[1]), json.loads(sys.argv[2])
results = []
def kernel_cycles(run):
    run()  # warm the kernel cache
    with npusim.profile() as report:
        run()
    (kernel,) = [r for r in report.records if not r.name.startswith("copy")]
    return kernel.kernel_cycles, kernel.bytes
for m, k, n in shapes:
    a, b = torch.randn(m, k).to("npusim"), torch.randn(k, n).to("npusim")
    cycles, moved = kernel_cycles(lambda: a @ b)
    results.append({"kind": "gemm", "shape": [m, k, n], "cycles": cycles, "bytes": moved})
for count in elements:
    x, y = torch.ones(count).to("npusim"), torch.ones(count).to("npusim")
    cycles, moved = kernel_cycles(lambda: x + y)
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
            check=True,
            env={**__import__("os").environ, **environment},
        )
    return config, json.loads(process.stdout.strip().splitlines()[-1])


def systolic_cycles(m, k, n, rows, cols, cores):
    return rows + math.ceil(k / rows) * math.ceil(n / cols) * m / cores + rows + cols - 1


def main():
    print(f"{'kernel':<28}{'array':>7}{'simulated':>12}{'closed form':>13}{'error':>8}")
    errors = {"gemm": [], "add": []}
    for size in ARRAY_SIZES:
        config, results = run_on_array(size, GEMM_SHAPES, STREAM_ELEMENTS if size == 16 else [])
        clock_ghz, bandwidth = config["chip"]["clock_ghz"], config["dram"]["bandwidth_gbps"]
        for result in results:
            if result["kind"] == "gemm":
                m, k, n = result["shape"]
                expected = systolic_cycles(m, k, n, size, size, config["chip"]["cores"])
                name = f"GEMM {m}x{k}x{n} f32"
            else:
                expected = result["bytes"] / bandwidth * clock_ghz  # ns at GB/s, then cycles
                name = f"add {result['shape'][0]} f32"
            error = result["cycles"] / expected - 1
            errors[result["kind"]].append(error)
            print(f"{name:<28}{size:>4}x{size:<2}{result['cycles']:>12}{expected:>13.0f}{error:>8.1%}")
    for kind, values in errors.items():
        print(f"{kind}: error from {min(values):.1%} to {max(values):.1%}")


if __name__ == "__main__":
    main()
