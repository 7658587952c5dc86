"""npusim's systolic array against SCALE-Sim (issue 25): the same GEMMs on the same arrays, both dataflows.

    python bench/scalesim_validation.py            # the full grid: arrays 8x8 .. 128x128
    python bench/scalesim_validation.py --quick    # two arrays, three shapes
    python bench/scalesim_validation.py --smoke    # one 8x8 array, one shape: CI's check that it still works

Runs SCALE-Sim itself (``pip install scalesim==3.0.0``) on each array size and dataflow, all shapes as the layers of
one GEMM topology, and npusim in timed mode on bench/scalesim_compatible.yaml with that array and dataflow (one
process each: one SystemC design per process), a @ b for each shape. Compared: SCALE-Sim's compute cycles (its
COMPUTE_REPORT's "Total Cycles", the 0-based cycle of the last output, + 1) against the npusim kernel's
``array_cycles`` (the cycles its systolic array loaded weights, streamed operands or drained results; docs/timing.md).
The kernel's own ``kernel_cycles`` are printed too: they add what SCALE-Sim does not model (launch, DMA, the scalar
unit, mx.st). Wall times are each tool's for the whole group of shapes: SCALE-Sim's run, npusim's products (and its
whole process, start-up included, apart). Each npusim product is checked against torch on the CPU, and a GEMM of zero
cycles in either tool stops the run without a figure. Not a test: a report
(tests/python/test_scalesim_validation.py runs a small grid).
"""

import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPATIBLE_CONFIG = ROOT / "bench" / "scalesim_compatible.yaml"
DATAFLOWS = {"weight_stationary": "ws", "output_stationary": "os"}
ARRAYS = [8, 16, 32, 64, 128]
# (M, K, N): M = 1, ragged edges on every array, several folds.
SHAPES = [(1, 64, 64), (1, 200, 130), (20, 20, 5), (37, 45, 21), (64, 64, 64), (100, 150, 70), (128, 128, 128)]
QUICK_ARRAYS = [8, 32]
QUICK_SHAPES = [(1, 64, 64), (37, 45, 21), (100, 150, 70)]
SMOKE_ARRAYS, SMOKE_SHAPES = [8], [(20, 20, 5)]

SCALESIM_CONFIG = """[general]
run_name = npusim_validation

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 65536
FilterSramSzkB: 65536
OfmapSramSzkB: 65536
IfmapOffset: 0
FilterOffset: 100000000
OfmapOffset: 200000000
Dataflow: {dataflow}
Bandwidth: 100000
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""

NPUSIM_WORKER = """
import json, sys, time, torch, npusim
results = []
for m, k, n in json.loads(sys.argv[1]):
    a, b = torch.randn(m, k), torch.randn(k, n)
    da, db = a.to("npusim"), b.to("npusim")
    started = time.perf_counter()
    with npusim.profile() as report:
        product = (da @ db).cpu()
    seconds = time.perf_counter() - started
    # A figure from a run that computed something else would be no figure at all.
    torch.testing.assert_close(product, a @ b, rtol=1e-4, atol=1e-3)
    (kernel,) = [r for r in report.kernels]
    results.append({"array_cycles": kernel.stats["array_cycles"], "kernel_cycles": kernel.kernel_cycles,
                    "seconds": seconds})
print(json.dumps(results))
"""


def scalesim_compute_cycles(rows, cols, dataflow, shapes):
    """SCALE-Sim's compute cycles for each shape on a rows x cols array, and its wall time for all of them."""
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory() as directory:
        folder = pathlib.Path(directory)
        (folder / "scale.cfg").write_text(SCALESIM_CONFIG.format(rows=rows, cols=cols, dataflow=DATAFLOWS[dataflow]))
        topology = "Layer, M, N, K,\n" + "".join(f"g{i}, {m}, {n}, {k},\n" for i, (m, k, n) in enumerate(shapes))
        (folder / "gemm.csv").write_text(topology)
        # SCALE-Sim reads a layout file even for GEMMs; the default layout orders every dimension plainly.
        layout = "Layer name," + ",".join(f" f{i}" for i in range(20)) + ",\n"
        layout += "".join(
            f"g{i}," + " 1," * 6 + " 0, 1, 2," * 2 + " 0, 1, 2, 3," * 2 + "\n" for i in range(len(shapes))
        )
        (folder / "layout.csv").write_text(layout)
        started = time.perf_counter()
        simulator = scalesim(
            save_disk_space=True,
            verbose=False,
            config=str(folder / "scale.cfg"),
            topology=str(folder / "gemm.csv"),
            layout=str(folder / "layout.csv"),
            input_type_gemm=True,
        )
        simulator.run_scale(top_path=str(folder / "out"))
        seconds = time.perf_counter() - started
        with open(folder / "out" / "npusim_validation" / "COMPUTE_REPORT.csv") as file:
            rows_read = [{key.strip(): value.strip() for key, value in row.items()} for row in csv.DictReader(file)]
    # "Total Cycles" is the index of the last output's cycle, counted from 0: one less than the cycles.
    return [int(row["Total Cycles"]) + 1 for row in rows_read], seconds


def npusim_cycles(rows, cols, dataflow, shapes):
    """npusim's array and kernel cycles for each shape, timed, on the SCALE-Sim-compatible chip; its wall time for the
    products (kernel built, launched, simulated, result copied back) and for its whole process (Python, torch and the
    device's start-up included)."""
    config = yaml.safe_load(COMPATIBLE_CONFIG.read_text())
    config["name"] = f"scalesim_compatible_{dataflow}_{rows}x{cols}"
    config["core"].update(systolic_rows=rows, systolic_cols=cols, dataflow=dataflow)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
        yaml.safe_dump(config, file)
        file.flush()
        environment = {**os.environ, "NPUSIM_MODE": "timed", "NPUSIM_CONFIG": file.name}
        started = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-c", NPUSIM_WORKER, json.dumps(shapes)], capture_output=True, text=True, env=environment
        )
        process_seconds = time.perf_counter() - started
    if process.returncode != 0:
        sys.exit(f"npusim on {config['name']} failed (exit {process.returncode}):\n{process.stderr.strip()}")
    results = json.loads(process.stdout.strip().splitlines()[-1])
    return results, sum(r["seconds"] for r in results), process_seconds


def compare(arrays, shapes):
    """Every (dataflow, array, shape): both tools' cycles and the error; wall times per (dataflow, array)."""
    rows, groups = [], []
    for dataflow in DATAFLOWS:
        for size in arrays:
            reference, reference_seconds = scalesim_compute_cycles(size, size, dataflow, shapes)
            ours, our_seconds, process_seconds = npusim_cycles(size, size, dataflow, shapes)
            groups.append(
                {
                    "dataflow": dataflow,
                    "array": size,
                    "scalesim_s": reference_seconds,
                    "npusim_s": our_seconds,
                    "npusim_process_s": process_seconds,
                }
            )
            for shape, expected, result in zip(shapes, reference, ours, strict=True):
                if expected <= 0 or result["array_cycles"] <= 0:
                    sys.exit(
                        f"{dataflow} {size}^2 {shape}: {expected} SCALE-Sim cycles, {result['array_cycles']} npusim"
                    )
                rows.append(
                    {
                        "dataflow": dataflow,
                        "array": size,
                        "shape": shape,
                        "scalesim": expected,
                        "npusim": result["array_cycles"],
                        "kernel_cycles": result["kernel_cycles"],
                        "error": result["array_cycles"] / expected - 1,
                    }
                )
    return rows, groups


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two arrays and three shapes")
    parser.add_argument("--smoke", action="store_true", help="one array and one shape (seconds, not minutes)")
    arguments = parser.parse_args()
    arrays, shapes = (
        (SMOKE_ARRAYS, SMOKE_SHAPES)
        if arguments.smoke
        else (QUICK_ARRAYS, QUICK_SHAPES)
        if arguments.quick
        else (ARRAYS, SHAPES)
    )
    rows, groups = compare(arrays, shapes)
    if not rows:
        sys.exit("no GEMM compared: no figure")
    print(f"{'dataflow':<19}{'array':>8}  {'M x K x N':<16}{'SCALE-Sim':>11}{'npusim':>11}{'error':>9}{'kernel':>11}")
    for row in rows:
        m, k, n = row["shape"]
        print(
            f"{row['dataflow']:<19}{row['array']:>5}^2  {f'{m} x {k} x {n}':<16}{row['scalesim']:>11}"
            f"{row['npusim']:>11}{row['error']:>9.2%}{row['kernel_cycles']:>11}"
        )
    print(f"\n{'dataflow':<19}{'array':>8}{'SCALE-Sim s':>13}{'npusim s':>10}{'ratio':>9}{'npusim process s':>18}")
    for group in groups:
        ratio = group["scalesim_s"] / group["npusim_s"]
        print(
            f"{group['dataflow']:<19}{group['array']:>5}^2{group['scalesim_s']:>13.3f}{group['npusim_s']:>10.3f}"
            f"{ratio:>8.0f}x{group['npusim_process_s']:>18.2f}"
        )
    worst = max(abs(row["error"]) for row in rows)
    print(f"\nlargest error {worst:.2%} over {len(rows)} GEMMs (npusim array_cycles against SCALE-Sim compute cycles)")


if __name__ == "__main__":
    main()
