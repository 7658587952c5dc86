"""Where npusim's native coverage stands, in three figures: the share of PyTorch's float32 OpInfo entries that run
with NPUSIM_FALLBACK=error and match the CPU (bench/opinfo_coverage.py), the same for their gradients (--gradients),
and the share of the transformers zoo's architectures (bench/compile_zoo.py --eager: a forward and backward with no
CPU fallback, equal to the CPU) that pass.

    python bench/native_coverage.py          # all three, in full (a few minutes on two cores)
    python bench/native_coverage.py --smoke  # a few entries and one model: CI's check that it still works

Each figure comes from its own benchmark run as a child process, whose full report (what falls back, which models
fail and why) is printed below the summary. (Not bench/coverage.py: a script of that name would shadow the coverage
package, which PyTorch's test machinery imports through numba, for every script in bench/.)
"""

import argparse
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
OPINFO_RATE = re.compile(r"passing with NPUSIM_FALLBACK=error: (\d+) of (\d+)")
ZOO_RATE = re.compile(r"pass rate: (\d+)/(\d+)")


def run(script, *arguments):
    """The benchmark's output and the (passed, of) pair its summary line gives; exits if it gave none."""
    done = subprocess.run([sys.executable, str(BENCH / script), *arguments], capture_output=True, text=True)
    pattern = OPINFO_RATE if script == "opinfo_coverage.py" else ZOO_RATE
    found = pattern.search(done.stdout)
    if not found:
        sys.exit(f"{script} printed no figure (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout, int(found.group(1)), int(found.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a few OpInfo entries and one model")
    arguments = parser.parse_args()
    smoke = ["--smoke"] if arguments.smoke else []
    opinfo_report, opinfo_passed, opinfo_count = run("opinfo_coverage.py", *smoke)
    gradient_report, gradient_passed, gradient_count = run("opinfo_coverage.py", "--gradients", *smoke)
    zoo_report, zoo_passed, zoo_count = run("compile_zoo.py", "--eager", *smoke)
    print(f"OpInfo float32 entries native and equal to the CPU: {opinfo_passed} of {opinfo_count} "
          f"({100 * opinfo_passed / opinfo_count:.1f} %)")  # fmt: skip
    print(f"their gradients (first order), native and equal to the CPU's: {gradient_passed} of {gradient_count} "
          f"({100 * gradient_passed / gradient_count:.1f} %)")  # fmt: skip
    print(f"transformers zoo, eager forward and backward, no CPU fallback, equal to the CPU: {zoo_passed} of "
          f"{zoo_count} ({100 * zoo_passed / zoo_count:.0f} %)")  # fmt: skip
    print("\n--- bench/opinfo_coverage.py\n" + opinfo_report)
    print("\n--- bench/opinfo_coverage.py --gradients\n" + gradient_report)
    print("\n--- bench/compile_zoo.py --eager\n" + zoo_report)


if __name__ == "__main__":
    main()
