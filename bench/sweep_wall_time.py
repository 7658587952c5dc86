"""Wall time of a sweep with --jobs 1, --jobs 2 and through Dask with two workers, measured in one run (issue 24).

    python bench/sweep_wall_time.py                                   # examples/sweeps/array_memory.yaml
    python bench/sweep_wall_time.py path/to/sweep.yaml
    python bench/sweep_wall_time.py --smoke                           # one 32^3 GEMM point: CI's check that it works

Each configuration runs the whole sweep into a fresh result directory (nothing cached), with `npusim sweep` as a
user runs it; the Dask one starts a `dask scheduler` and two `dask worker`s (one thread each) on loopback first (not
timed). Prints each wall time and its ratio to --jobs 1, and checks that the three summaries agree (the same
points, statuses and simulated seconds); a sweep in which no point succeeded stops the run without a figure. Not a
test: figures depend on the machine.
"""

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas

ROOT = Path(__file__).resolve().parent.parent
DASK = [str(Path(sys.executable).parent / "dask")]
# One point of one small product (the gemm workload checks its result against the CPU): each point costs a process.
SMOKE_SWEEP = """name: smoke
base: default
mode: timed
timeout_s: 120
axes:
  core.systolic_rows: [8]
workloads:
  - builtin: gemm
    args: [--m, 32, --n, 32, --k, 32]
objectives:
  - seconds
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_sweep(sweep_file, out, *options):
    started = time.monotonic()
    command = [sys.executable, "-m", "npusim.cli", "sweep", str(sweep_file), "--out", str(out), "--quiet", *options]
    subprocess.run(command, check=True)
    return time.monotonic() - started


def start_cluster(logs):
    from distributed import Client

    address = f"tcp://127.0.0.1:{free_port()}"
    host, port = address.removeprefix("tcp://").split(":")
    processes = [
        subprocess.Popen(
            [*DASK, "scheduler", "--host", host, "--port", port, "--no-dashboard"],
            stdout=open(logs / "scheduler.log", "w"),
            stderr=subprocess.STDOUT,
        )
    ]  # noqa: SIM115
    for index in range(2):
        processes.append(
            subprocess.Popen(
                [*DASK, "worker", address, "--nthreads", "1", "--no-dashboard"],
                stdout=open(logs / f"worker{index}.log", "w"),
                stderr=subprocess.STDOUT,
            )
        )  # noqa: SIM115
    with Client(address, timeout="60s") as client:
        client.wait_for_workers(2, timeout=120)
    return address, processes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", type=Path, default=ROOT / "examples" / "sweeps" / "array_memory.yaml")
    parser.add_argument("--smoke", action="store_true", help="a one-point sweep of a small GEMM instead")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="npusim-sweep-bench-") as scratch:
        scratch = Path(scratch)
        sweep_file = arguments.sweep
        if arguments.smoke:
            sweep_file = scratch / "smoke.yaml"
            sweep_file.write_text(SMOKE_SWEEP)
        times = {
            "--jobs 1": timed_sweep(sweep_file, scratch / "jobs1", "--jobs", "1"),
            "--jobs 2": timed_sweep(sweep_file, scratch / "jobs2", "--jobs", "2"),
        }
        address, processes = start_cluster(scratch)
        try:
            times["dask, 2 workers"] = timed_sweep(
                sweep_file, scratch / "dask", "--executor", "dask", "--scheduler", address
            )
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
        summaries = [pandas.read_csv(scratch / name / "summary.csv") for name in ("jobs1", "jobs2", "dask")]
        runs = int(summaries[0]["status"].eq("ok").sum())
        if runs == 0:
            sys.exit(f"{sweep_file.name}: none of {len(summaries[0])} points succeeded: no figure")
        for other in summaries[1:]:  # the same points and simulated figures whichever executor ran them
            pandas.testing.assert_series_equal(summaries[0]["status"], other["status"])
            pandas.testing.assert_series_equal(summaries[0]["seconds"], other["seconds"])
    print(f"{sweep_file.name}: {len(summaries[0])} points, {runs} succeeded")
    for name, seconds in times.items():
        print(f"{name:<18}{seconds:>8.1f} s{times['--jobs 1'] / seconds:>8.2f}x of --jobs 1")


if __name__ == "__main__":
    main()
