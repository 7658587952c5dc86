"""Running sweeps: results, failures recorded while the rest finish, the cache on a second run, --retry-failed,
resuming an interrupted sweep, the report's files and npusim compare."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import matplotlib.image
import numpy
import pandas
import pytest
from sweep_helpers import PICKY_SCRIPT, sweep_in_process, write

from npusim.sweep.compare import compare_reports
from npusim.sweep.report import write_report


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 3-point grid over the array rows (32 fails on purpose, 64 is rejected by a constraint), run once."""
    directory = tmp_path_factory.mktemp("sweep")
    write(directory / "picky.py", PICKY_SCRIPT)
    sweep_file = write(
        directory / "rows.yaml",
        """
        name: rows
        base: default
        mode: timed
        axes:
          core.systolic_rows: [8, 16, 32, 64]
        constraints:
          - core.systolic_rows <= 32
        workloads:
          - script: picky.py
        objectives:
          - seconds
          - energy_uj
          - {name: utilisation_matrix, goal: maximize}
        """,
    )
    out = directory / "out"
    started = time.monotonic()
    first = sweep_in_process(sweep_file, "--out", out, "--jobs", 2, "--quiet")
    return {"file": sweep_file, "out": out, "first": first, "seconds": time.monotonic() - started}


def cache_files(out):
    return {path.name: path.stat().st_mtime_ns for path in (out / "cache").glob("*.json")}


def test_failing_point_is_recorded_while_the_others_finish(swept):
    first, out = swept["first"], swept["out"]
    assert first.returncode == 1, first.stderr  # a point failed
    summary = pandas.read_csv(out / "summary.csv")
    assert list(summary["point"]) == [0, 1, 2, 3]
    assert list(summary["status"]) == ["ok", "ok", "failed", "rejected"]
    failed = summary.iloc[2]
    assert failed["returncode"] == 3 and failed["error"] == "picky: refusing a 32-row array"
    assert summary.iloc[3]["rejected_by"] == "core.systolic_rows <= 32"
    ok = summary[summary["status"] == "ok"]
    assert (ok["seconds"] > 0).all() and (ok["kernel_cycles"] > 0).all() and (ok["energy_uj"] > 0).all()
    assert (ok["dram_bytes"] > 0).all() and ((ok["utilisation_matrix"] > 0) & (ok["utilisation_matrix"] <= 1)).all()
    # A 16-row array does the same product in fewer matrix-engine cycles than an 8-row one.
    assert ok.iloc[1]["kernel_cycles"] < ok.iloc[0]["kernel_cycles"]
    # The area from the reports' area model (docs/costs.md): a taller array is a larger chip.
    assert (ok["area_mm2"] > 0).all() and ok.iloc[1]["area_mm2"] > ok.iloc[0]["area_mm2"]
    # What bounds each point: the class of kernels (compute- or memory-bound) that takes more of its cycles.
    for _, row in ok.iterrows():
        larger = "compute" if row["compute_bound_cycles"] >= row["memory_bound_cycles"] else "memory"
        assert row["roofline_bound"] == larger
        assert row["compute_bound_cycles"] + row["memory_bound_cycles"] == row["kernel_cycles"]
    assert summary.iloc[2:]["roofline_bound"].isna().all()
    entry = json.loads(next(p for p in (out / "cache").glob("*.json") if '"failed"' in p.read_text()).read_text())
    assert entry["returncode"] == 3 and "refusing" in entry["stderr_tail"]


def test_results_are_a_long_parquet_table_per_point_and_kernel(swept):
    out = swept["out"]
    kernels = pandas.read_parquet(out / "results.parquet")
    assert set(kernels["point"]) == {0, 1}  # the successful points only
    for point, rows in kernels.groupby("point"):
        assert rows["kernel"].is_unique  # one row per kernel, never twice
        assert {"matmul_f32", "copy_h2d", "copy_d2h"} <= set(rows["kernel"])
        summary = pandas.read_csv(out / "summary.csv").set_index("point")
        assert rows["seconds"].sum() == pytest.approx(summary.loc[point, "seconds"])
        assert rows["energy_uj"].sum() == pytest.approx(summary.loc[point, "energy_uj"])


def test_second_run_is_all_cached_and_retry_failed_reruns_only_failures(swept):
    out, sweep_file = swept["out"], swept["file"]
    before = cache_files(out)
    again = sweep_in_process(sweep_file, "--out", out, "--jobs", 2)
    assert again.returncode == 1
    assert "0 ran, 3 cached, 1 failed" in again.stderr
    assert cache_files(out) == before  # nothing re-ran, nothing rewritten
    retried = sweep_in_process(sweep_file, "--out", out, "--jobs", 2, "--retry-failed")
    assert "1 ran, 2 cached" in retried.stderr and "1 failed" in retried.stderr
    after = cache_files(out)
    assert after.keys() == before.keys()
    changed = [name for name in after if after[name] != before[name]]
    assert len(changed) == 1 and '"failed"' in (out / "cache" / changed[0]).read_text()
    assert len(pandas.read_csv(out / "summary.csv")) == 4


def test_report_files_are_written(swept):
    out = swept["out"]
    report = write_report(out).parent
    for name in ("pareto.png", "kernels.png", "sensitivity.png", "rooflines/rooflines-001.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4  # self-contained: every plot embedded
    assert "Pareto front" in page and "picky" in page and "<table" in page
    assert re.search(r"rooflines of points (0, 1|1, 0)<", page) and "interactions and noise" in page


@pytest.mark.skipif(not shutil.which("chromium-headless-shell"), reason="needs Debian's chromium-headless-shell")
def test_report_page_shows_its_plots_in_a_headless_browser(swept, tmp_path):
    page = write_report(swept["out"])
    screenshot = tmp_path / "page.png"
    subprocess.run(
        ["chromium-headless-shell", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1000"]
        + [f"--screenshot={screenshot}", page.resolve().as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = matplotlib.image.imread(screenshot)[:, :, :3]
    # The Pareto plot's front markers are matplotlib's tab:blue (31, 119, 180); the page's text and tables are not.
    blue = (abs(pixels - numpy.array([31, 119, 180]) / 255).max(axis=2) < 0.05).sum()
    assert blue > 100, blue


def test_compare_shows_per_kernel_and_per_operator_differences(swept, tmp_path):
    out = swept["out"]
    entries = [json.loads(p.read_text()) for p in (out / "cache").glob("*.json")]
    reports = sorted((e for e in entries if e["status"] == "ok"), key=lambda e: e["point"])
    paths = []
    for entry in reports:
        paths.append(tmp_path / f"report{entry['point']}.json")
        paths[-1].write_text(json.dumps(entry["report"]))
    text = compare_reports(*paths)
    assert "per kernel" in text and "per operator" in text and "aten::mm" in text
    matmul = next(line for line in text.splitlines() if line.startswith("matmul_f32 "))
    cycles_a, cycles_b = (r["report"]["totals"]["kernel_cycles"] for r in reports)
    assert cycles_b < cycles_a
    kernel_line = next(line for line in text.splitlines() if line.startswith("kernel_cycles"))
    assert f"{cycles_b - cycles_a:+}" in kernel_line.replace(" ", "")
    assert matmul.split()[1] == "1"  # one product in each run


# Runs in turn (--jobs 1): the first leaves a marker and ends; the next finds it and waits a few seconds, so that the
# interrupt always lands while it runs (each run is a process group of its own: the sweep waits for it, then drops its
# result); once the test has said it resumes, it ends at once.
GATE_SCRIPT = """
import os, sys, time
marker, resumed = sys.argv[1:]
if os.path.exists(marker) and not os.path.exists(resumed):
    time.sleep(5)
open(marker, "w").close()
import torch
(torch.arange(16.0, device="npusim") * 2).cpu()
"""


def test_interrupted_sweep_resumes_without_losing_or_repeating_runs(tmp_path):
    write(tmp_path / "gate.py", GATE_SCRIPT)
    sweep_file = write(
        tmp_path / "resume.yaml",
        f"""
        mode: functional
        axes:
          core.scratchpad_kib: [64, 128]
        workloads:
          - script: gate.py
            args: [{tmp_path / "marker"}, {tmp_path / "resumed"}]
        """,
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "npusim.cli", "sweep", str(sweep_file), "--out", str(out), "--jobs", "1"]
    # A session of its own, so that the interrupt reaches the sweep and its child as Ctrl-C does at a terminal; and
    # SIGINT's default action, which a shell's background job (a CI runner's) would otherwise pass on as ignored.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not list((out / "cache").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    finished = cache_files(out)
    assert len(finished) == 1
    summary = pandas.read_csv(out / "summary.csv")  # written on the way out
    assert list(summary["status"]) == ["ok", "pending"]
    (tmp_path / "resumed").touch()
    resumed = sweep_in_process(sweep_file, "--out", out, "--jobs", 1)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 ran, 1 cached, 0 failed" in resumed.stderr
    after = cache_files(out)
    assert len(after) == 2 and all(after[name] == mtime for name, mtime in finished.items())
    summary = pandas.read_csv(out / "summary.csv")
    assert list(summary["point"]) == [0, 1] and (summary["status"] == "ok").all()
    assert pandas.read_parquet(out / "results.parquet").groupby(["point", "kernel"]).size().max() == 1


def test_a_run_over_its_timeout_is_killed_and_recorded(tmp_path):
    write(tmp_path / "slow.py", "import time\ntime.sleep(120)\n")
    sweep_file = write(
        tmp_path / "slow.yaml",
        """
        mode: functional
        timeout_s: 3
        workloads:
          - script: slow.py
        """,
    )
    started = time.monotonic()
    process = sweep_in_process(sweep_file, "--out", tmp_path / "out", "--quiet")
    assert process.returncode == 1 and time.monotonic() - started < 60
    row = pandas.read_csv(tmp_path / "out" / "summary.csv").iloc[0]
    assert row["status"] == "timeout" and "killed after the timeout of 3 s" in row["error"]
