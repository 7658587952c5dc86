"""Every benchmark in bench/ at a tiny size (its smoke mode), so that a broken one fails CI instead of printing a false
figure. Each benchmark checks its own results against the CPU and refuses to print a figure from a run that did no
work; these tests see that it exits 0 and printed its table. Figures are printed, never asserted: they depend on the
machine."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
BENCH_BUILD = ROOT / "build" / "bench"  # where the project's build puts the C++ benchmarks (bench/CMakeLists.txt)
TIMEOUT_S = 300  # each takes seconds; a hang fails instead of stalling CI

# Each script's smoke arguments and a line its output must contain: its table's header or a row with a figure.
PYTHON_BENCHMARKS = {
    "compile_speedup.py": (["--smoke"], r"commands per step: \d+ eager, \d+ compiled"),
    "compile_zoo.py": (["--smoke"], r"gpt2 .* PASS .*\n\npass rate: 1/1"),
    "native_coverage.py": (
        ["--smoke"],
        r"native and equal to the CPU: [1-9]\d* of \d+ \(\d+\.\d %\)\n"
        r"their gradients .*: [1-9]\d* of \d+ \(\d+\.\d %\)\n.*: 1 of 1 \(100 %\)",
    ),
    "conv_roofline.py": (["--smoke"], r"forward +backward.*\n.*-> 8, 3x3 +\d+\.\d+x +\d+\.\d+x"),
    "emulator_speed.py": (["--smoke"], r"workload +emulator s.*\n64x64x64 fp32 GEMM +\d+\.\d+ +\d+\.\d+ +\d+\.\d+"),
    "half_precision_overhead.py": (["--smoke"], r"bicubic resize +\d+\.\d+ +\d+\.\d+ +\d+\.\d+ +\d+\.\d+ +\d+\.\d+"),
    "long_rows.py": (["--smoke"], r"batch norm, one looped kernel .*: \d+ -> \d+ kernels, \d+\.\d+x fewer cycles"),
    "model_breakdown.py": (["--smoke"], r"ms of device time per training step on default \([1-9]\d* cycles\)"),
    "optimizer_step.py": (["--smoke"], r"SGD, momentum +fused +[1-9]\d* +1 +\d+\.\d+x +none"),
    "scalesim_validation.py": (["--smoke"], r"largest error \d+\.\d+% over 2 GEMMs"),
    "sweep_wall_time.py": (["--smoke"], r"--jobs 2 +\d+\.\d+ s"),
    "timed_speed.py": (["--smoke"], r"64\^3 fp32 GEMM +\d+\.\d+ +\d+\.\d+ +\d+\.\d+ +[1-9]\d*"),
    "timing_accuracy.py": (["--smoke"], r"GEMM 32x16x24 f32 +16x16 +[1-9]\d* +\d+"),
}
# Benchmarks another test runs whole, which a smoke run would only repeat in part.
RUN_WHOLE_ELSEWHERE = {"opinfo_coverage.py"}  # test_opinfo.py's coverage ratchet
CPP_BENCHMARKS = {
    "npusim-bench-fused-overlap": (["smoke"], r"linear_gelu / max\(mm, gelu\) = \d+\.\d+"),
    "npusim-bench-kernel-build": (["1", "1"], r"all \d+ kernels assemble back to their built words"),
    "npusim-bench-launch": (["200"], r"timed, command-processor cycles per launch \(device - kernel\): \d+\.\d+"),
    "npusim-bench-scalar": (["100000"], r"500003 instructions in \d+\.\d+ s = \d+\.\d+ million"),
}


def run(command):
    # A clean environment: each benchmark chooses its own mode and chip.
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NPUSIM_")}
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=TIMEOUT_S, cwd=ROOT)


def check(process, expected):
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout[-2000:]}\n{process.stderr[-4000:]}"
    assert re.search(expected, process.stdout), f"no figures in its output:\n{process.stdout[-4000:]}"


@pytest.mark.parametrize("script", sorted(PYTHON_BENCHMARKS))
def test_python_benchmark_smoke(script):
    arguments, expected = PYTHON_BENCHMARKS[script]
    check(run([sys.executable, str(BENCH / script), *arguments]), expected)


@pytest.mark.parametrize("executable", sorted(CPP_BENCHMARKS))
def test_cpp_benchmark_smoke(executable):
    path = BENCH_BUILD / executable
    assert path.exists(), f"{path} is not built (build the project: bash tools/dev.sh setup)"
    arguments, expected = CPP_BENCHMARKS[executable]
    check(run([str(path), *arguments]), expected)


def test_every_benchmark_has_a_smoke_test():
    scripts = {path.name for path in BENCH.glob("*.py")}
    executables = set(re.findall(r"add_executable\((\S+)", (BENCH / "CMakeLists.txt").read_text()))
    assert (scripts, executables) == (set(PYTHON_BENCHMARKS) | RUN_WHOLE_ELSEWHERE, set(CPP_BENCHMARKS))
