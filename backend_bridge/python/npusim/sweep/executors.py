"""Where runs execute: one child process per run (`npusim run` with the point's configuration), in a local pool of
threads that each wait on their child, or on a Dask cluster. Both executors call the same `run_one`, which returns
the outcome (status, exit code, stderr tail, report) instead of writing files, so a Dask worker needs no shared
result directory."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import yaml

STDERR_TAIL_CHARS = 4000
INTERRUPTED = (-signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT)
# Outcomes that say nothing about the design point; they are not cached, so the next run of the sweep retries them.
NOT_CACHED = ("interrupted", "lost")


def script_here(task, scratch):
    """(the script to run, the directory to run it in): the script at its path when this machine has it with the
    contents the sweep was given, else (a worker on another machine) those contents written into `scratch` under the
    script's name, run from there. Files a script reads beside it must then be on the worker too."""
    path = Path(task["script"])
    text = task.get("script_text")
    if text is None or (path.is_file() and path.read_text() == text):
        return str(path), task.get("cwd")
    shipped = Path(scratch) / "script" / path.name
    shipped.parent.mkdir()
    shipped.write_text(text)
    cwd = task.get("cwd")
    return str(shipped), cwd if cwd and Path(cwd).is_dir() else str(shipped.parent)


def run_one(task):
    """Runs one (configuration, workload) in a child process; returns its outcome as a dict.

    `task`: {"config_sections", "script", "script_text", "args", "map_device", "mode", "timeout_s", "threads",
    "cwd"}."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="npusim-sweep-") as scratch:
        script, cwd = script_here(task, scratch)
        config_path, report_path = Path(scratch) / "point.yaml", Path(scratch) / "report.json"
        config_path.write_text(yaml.safe_dump({"name": "sweep-point", **task["config_sections"]}, sort_keys=False))
        command = [sys.executable, "-m", "npusim.cli", "run", "--config", str(config_path), "--mode", task["mode"]]
        command += ["--report", str(report_path), "--progress", "0"]
        if task.get("map_device"):
            command += ["--map-device", task["map_device"]]
        command += [script, *task["args"]]
        threads = str(task.get("threads", 1))
        environment = {**os.environ, "NPUSIM_THREADS": threads, "OMP_NUM_THREADS": threads}
        environment.pop("NPUSIM_CONFIG", None)
        environment.pop("NPUSIM_MODE", None)
        try:
            process = subprocess.run(
                command,
                cwd=cwd,
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                timeout=task["timeout_s"],
                check=False,
            )
            returncode, stderr = process.returncode, process.stderr
            if returncode == 0 and report_path.exists():
                status = "ok"
            elif returncode in INTERRUPTED:  # Ctrl-C or a stopped worker: not the design's fault, run it again
                status = "interrupted"
            else:
                status = "failed"
        except subprocess.TimeoutExpired as expired:
            returncode, status = None, "timeout"
            stderr = expired.stderr or ""
            stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
            stderr += f"\nnpusim sweep: killed after the timeout of {task['timeout_s']} s"
        report = json.loads(report_path.read_text()) if status == "ok" else None
    return {
        "status": status,
        "returncode": returncode,
        "stderr_tail": stderr[-STDERR_TAIL_CHARS:],
        "wall_seconds": time.monotonic() - started,
        "host": os.uname().nodename,
        "report": report,
    }


def run_on_dask_worker(task):
    """run_one on a Dask worker, its outcome naming the worker's address: which worker ran what, for a failure
    that only one machine shows."""
    from distributed import get_worker

    return {**run_one(task), "worker": get_worker().address}


class LocalExecutor:
    """`jobs` children at a time on this machine."""

    def __init__(self, jobs):
        self.jobs = jobs
        # Children share the cores: each emulates with as many host threads as its share.
        self.threads_per_run = max(1, (os.cpu_count() or 1) // jobs)
        self.description = f"local, {jobs} job{'s' if jobs != 1 else ''}"

    def run(self, tasks):
        """Yields (tag, outcome) as runs finish; `tasks` is a list of (tag, task)."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            pending = {pool.submit(run_one, task): tag for tag, task in tasks}
            try:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield pending.pop(future), future.result()
            finally:  # interrupted: runs not yet started are dropped, running children finish
                for future in pending:
                    future.cancel()

    def close(self):
        pass


class DaskExecutor:
    """Runs on a Dask cluster through dask.distributed: a `dask scheduler` and `dask worker`s on any machines with
    npusim installed. Each task carries its workload script's contents (see script_here), so a worker needs no copy
    of it; files a script reads beside it must be on the workers."""

    def __init__(self, scheduler):
        from distributed import Client

        self.client = Client(scheduler, timeout="30s")
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        threads = sum(worker["nthreads"] for worker in workers.values())
        self.jobs = max(threads, 1)
        self.threads_per_run = 1  # a worker runs one child per thread
        self.description = f"dask at {scheduler}, {len(workers)} workers, {threads} threads"

    def run(self, tasks):
        from distributed import as_completed

        futures = {}
        for tag, task in tasks:
            # pure=False: a run is not a cached computation for Dask, our own cache decides what re-runs.
            futures[self.client.submit(run_on_dask_worker, task, pure=False, retries=0)] = tag
        try:
            for future in as_completed(futures):
                try:
                    outcome = future.result()
                except Exception as error:  # a lost worker, not a failed run: not cached, so a re-run retries it
                    outcome = {"status": "lost", "returncode": None, "stderr_tail": repr(error), "report": None}
                yield futures[future], outcome
        finally:
            for future in futures:
                future.cancel()

    def close(self):
        self.client.close()


def make_executor(kind, jobs=None, scheduler=None):
    if kind == "dask":
        if not scheduler:
            raise ValueError("--executor dask needs --scheduler tcp://HOST:PORT")
        return DaskExecutor(scheduler)
    return LocalExecutor(jobs or os.cpu_count() or 1)
