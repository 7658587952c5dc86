"""The Dask executor through a real cluster: a `dask scheduler` and two `dask worker` processes on loopback."""

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pandas
import pytest
from sweep_helpers import sweep_in_process, write


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask_command():
    """The `dask` command of this interpreter's environment."""
    beside = Path(sys.executable).parent / "dask"
    return [str(beside)] if beside.exists() else [shutil.which("dask") or "dask"]


@pytest.fixture
def cluster(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    host, port = address.removeprefix("tcp://").split(":")
    logs = tmp_path / "logs"
    logs.mkdir()
    processes = []

    def start(name, *args):
        log = open(logs / f"{name}.log", "w")  # noqa: SIM115  closed with the process below
        process = subprocess.Popen([*dask_command(), *args], stdout=log, stderr=subprocess.STDOUT)
        processes.append((process, log))
        return process

    start("scheduler", "scheduler", "--host", host, "--port", port, "--no-dashboard")
    for index in range(2):
        start(
            f"worker{index}",
            "worker",
            address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
            "--name",
            f"w{index}",
        )
    from distributed import Client

    with Client(address, timeout="60s") as client:
        client.wait_for_workers(2, timeout=60)
    yield address
    with Client(address, timeout="30s") as client:
        client.shutdown()  # the scheduler and its workers, gracefully
    for process, log in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # a worker still closing its connections: no need to wait for it
            process.kill()
            process.wait()
        log.close()


def test_sweep_runs_through_a_dask_scheduler_and_two_workers(cluster, tmp_path):
    sweep_file = write(
        tmp_path / "dask.yaml",
        """
        mode: timed
        axes:
          dram.bandwidth_gbps: [25, 400]
        workloads:
          - builtin: gemm
            args: [--m, 32, --n, 32, --k, 64]
        """,
    )
    out = tmp_path / "out"
    process = sweep_in_process(sweep_file, "--out", out, "--executor", "dask", "--scheduler", cluster)
    assert process.returncode == 0, process.stderr
    assert "dask at tcp://127.0.0.1" in process.stderr and "2 workers" in process.stderr
    summary = pandas.read_csv(out / "summary.csv")
    assert list(summary["status"]) == ["ok", "ok"]
    # The same product is slower with a sixteenth of the DRAM bandwidth.
    assert summary.iloc[0]["seconds"] > summary.iloc[1]["seconds"] > 0
    entries = [json.loads(p.read_text()) for p in (out / "cache").glob("*.json")]
    assert {entry["host"] for entry in entries} == {os.uname().nodename}
    # Two runs submitted at once to two idle one-thread workers: the scheduler gives each worker one.
    from distributed import Client

    with Client(cluster, timeout="30s") as client:
        workers = set(client.scheduler_info(n_workers=-1)["workers"])
    assert len(workers) == 2 and {entry["worker"] for entry in entries} == workers
    again = sweep_in_process(sweep_file, "--out", out, "--executor", "dask", "--scheduler", cluster)
    assert "0 ran, 2 cached" in again.stderr


def test_dask_executor_needs_a_scheduler(tmp_path):
    sweep_file = write(tmp_path / "s.yaml", "workloads: [gemm]\n")
    process = sweep_in_process(sweep_file, "--out", tmp_path / "out", "--executor", "dask")
    assert process.returncode == 2 and "--executor dask needs --scheduler" in process.stderr


def test_a_worker_without_the_script_runs_the_contents_its_task_carries(tmp_path):
    """A worker on another machine has no copy of the sweep's script (or another version of it at that path): the
    task carries the script's contents, which run_one writes and runs there."""
    from npusim.sweep.executors import run_one
    from npusim.sweep.points import generate
    from npusim.sweep.runner import task_of
    from npusim.sweep.spec import load_sweep

    write(tmp_path / "step.py", 'import torch\nimport npusim\nprint((torch.ones(4).to("npusim") * 2).sum().item())\n')
    sweep = load_sweep(write(tmp_path / "s.yaml", "mode: functional\nworkloads:\n  - script: step.py\n"))
    task = task_of(sweep, generate(sweep)[0], sweep.workloads[0], threads=1)
    assert task["script_text"] == (tmp_path / "step.py").read_text()
    elsewhere = dict(task, script=str(tmp_path / "not-here" / "step.py"), cwd=str(tmp_path / "not-here"))
    outcome = run_one(elsewhere)
    assert outcome["status"] == "ok", outcome["stderr_tail"]
    assert len(outcome["report"]["records"]) > 0 and outcome["report"]["totals"]["vector_elements"] > 0
    write(tmp_path / "step.py", "raise SystemExit(7)\n")  # another version at the path: the task's contents run
    assert run_one(task)["status"] == "ok"
