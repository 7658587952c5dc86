"""Timed (SystemC) mode against functional mode on the same kernels, measured in one run (issue 5's goals).

    python bench/timed_speed.py                 # default config
    python bench/timed_speed.py datacenter
    python bench/timed_speed.py --smoke         # a 64^3 GEMM and a 4096-element add: CI's check that it still works

For a 1024^3 fp32 GEMM and a 16 Mi-element add it prints: wall time in each mode, their ratio (goal: timed <= 2x
functional), the simulated kernel cycles and the simulated cycles per host second in timed mode, and how close the
kernel comes to its roofline bound (max of compute at peak and bytes at DRAM bandwidth). Each mode's result is checked
against torch on the CPU, and a kernel of zero cycles stops the run without a figure.

Each mode runs in its own process (SystemC builds one timed chip per process). Not a test: figures depend on the
machine.
"""

import argparse
import json
import subprocess
import sys

WORKER = """
import json, os, sys, time
os.environ["NPUSIM_MODE"], os.environ["NPUSIM_CONFIG"] = sys.argv[1], sys.argv[2]
size, elements = json.loads(sys.argv[3])
import torch, npusim
results = {}
for name, make in [(f"{size}^3 fp32 GEMM", lambda: (torch.randn(size, size), torch.randn(size, size), torch.matmul)),
                   (sys.argv[4], lambda: (torch.ones(elements), torch.ones(elements), torch.add))]:
    a, b, op = make()
    da, db = a.to("npusim"), b.to("npusim")
    with npusim.profile() as report:  # also warms the kernel cache and the profiler
        op(da, db)
    seconds = float("inf")
    for _ in range(3):  # best of three, outside the profiler
        started = time.perf_counter()
        result = op(da, db)
        torch.npusim.synchronize()  # launches are asynchronous
        seconds = min(seconds, time.perf_counter() - started)
    # A figure from a run that computed something else would be no figure at all.
    torch.testing.assert_close(result.cpu(), op(a, b), rtol=1e-4, atol=1e-3, msg=f"{name}: wrong result")
    (kernel,) = [r for r in report.records if not r.name.startswith("copy")]
    results[name] = {"seconds": seconds, "cycles": kernel.kernel_cycles,
                     "fraction": report.roofline(kernel)["fraction_of_bound"]}
print(json.dumps(results))
"""


def run(mode, config, size, elements):
    label = f"{elements >> 20} Mi-element fp32 add" if elements >= 1 << 20 else f"{elements}-element fp32 add"
    process = subprocess.run(
        [sys.executable, "-c", WORKER, mode, config, json.dumps([size, elements]), label],
        capture_output=True,
        text=True,
    )
    if process.returncode != 0:
        sys.exit(f"{mode} worker failed (exit {process.returncode}):\n{process.stderr.strip()}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="default", help="a preset name or a config file")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds, not minutes)")
    arguments = parser.parse_args()
    config = arguments.config
    size, elements = (64, 4096) if arguments.smoke else (1024, 1 << 24)
    functional, timed = run("functional", config, size, elements), run("timed", config, size, elements)
    empty = [name for name, result in timed.items() if result["cycles"] <= 0 or result["seconds"] <= 0]
    if empty:
        sys.exit(f"no work simulated for {', '.join(empty)} (zero cycles or zero time): no figure")
    print(f"config {config}")
    columns = ("functional s", 13), ("timed s", 9), ("ratio", 7), ("sim cycles", 12), ("cycles/s", 11), ("roofline", 10)
    print(f"{'kernel':<26}" + "".join(f"{title:>{width}}" for title, width in columns))
    for name, result in timed.items():
        ratio = result["seconds"] / functional[name]["seconds"]
        rate = result["cycles"] / result["seconds"]
        achieved = result["fraction"]
        print(
            f"{name:<26}{functional[name]['seconds']:>13.3f}{result['seconds']:>9.3f}{ratio:>7.2f}"
            f"{result['cycles']:>12}{rate / 1e6:>9.1f} M{achieved:>9.0%}"
        )


if __name__ == "__main__":
    main()
