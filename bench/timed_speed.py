"""Timed (SystemC) mode against functional mode on the same kernels, measured in one run (issue 5's goals).

    python bench/timed_speed.py                 # default config
    python bench/timed_speed.py datacenter

For a 1024^3 fp32 GEMM and a 16 Mi-element add it prints: wall time in each mode, their ratio (goal: timed <= 2x
functional), the simulated kernel cycles and the simulated cycles per host second in timed mode, and how close the
kernel comes to its roofline bound (max of compute at peak and bytes at DRAM bandwidth).

Each mode runs in its own process (SystemC builds one timed chip per process). Not a test: figures depend on the
machine.
"""

import json
import subprocess
import sys

WORKER = """
import json, os, sys, time
os.environ["NPUSIM_MODE"], os.environ["NPUSIM_CONFIG"] = sys.argv[1], sys.argv[2]
import torch, npusim
results = {}
for name, make in [("1024^3 fp32 GEMM", lambda: (torch.randn(1024, 1024), torch.randn(1024, 1024), torch.matmul)),
                   ("16 Mi-element fp32 add", lambda: (torch.ones(1 << 24), torch.ones(1 << 24), torch.add))]:
    a, b, op = make()
    da, db = a.to("npusim"), b.to("npusim")
    with npusim.profile() as report:  # also warms the kernel cache and the profiler
        op(da, db)
    seconds = float("inf")
    for _ in range(3):  # best of three, outside the profiler
        started = time.perf_counter()
        op(da, db)
        torch.npusim.synchronize()  # launches are asynchronous
        seconds = min(seconds, time.perf_counter() - started)
    (kernel,) = [r for r in report.records if not r.name.startswith("copy")]
    results[name] = {"seconds": seconds, "cycles": kernel.kernel_cycles,
                     "fraction": report.roofline(kernel)["fraction_of_bound"]}
print(json.dumps(results))
"""


def run(mode, config):
    process = subprocess.run([sys.executable, "-c", WORKER, mode, config], capture_output=True, text=True, check=True)
    return json.loads(process.stdout.strip().splitlines()[-1])


def main():
    config = sys.argv[1] if len(sys.argv) > 1 else "default"
    functional, timed = run("functional", config), run("timed", config)
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
