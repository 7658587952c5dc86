"""`--search optuna`: NSGA-II trials over the axes, the study stored beside the results and resumed."""

import sqlite3

import optuna
import pandas
from sweep_helpers import sweep_in_process, write

from npusim.sweep.search import suggest
from npusim.sweep.spec import load_sweep


def test_optuna_search_records_its_seed_and_resumes(tmp_path):
    sweep_file = write(
        tmp_path / "search.yaml",
        """
        name: search
        mode: functional
        seed: 11
        axes:
          core.systolic_rows: [8, 16]
          dram.bandwidth_gbps: {min: 50, max: 200, log: true}
        constraints:
          - core.systolic_rows <= 8 or dram.bandwidth_gbps >= 60
        workloads:
          - builtin: gemm
            args: [--m, 16, --n, 16, --k, 16]
        objectives: [instructions, {name: bandwidth, expr: dram.bandwidth_gbps, goal: maximize}]
        """,
    )
    out = tmp_path / "out"
    first = sweep_in_process(sweep_file, "--out", out, "--search", "optuna", "--trials", 2, "--jobs", 2)
    assert first.returncode == 0, first.stderr
    assert "2 trials (seed 11)" in first.stderr
    study = optuna.load_study(study_name="search", storage=f"sqlite:///{out / 'study.db'}")
    assert study.user_attrs["seed"] == 11 and len(study.trials) == 2
    # A search stopped while trial 2 was running: the next session asks it again with the same parameters.
    interrupted = study.ask()
    params = suggest(interrupted, load_sweep(sweep_file, search=True))
    resumed = sweep_in_process(sweep_file, "--out", out, "--search", "optuna", "--trials", 3, "--jobs", 2)
    assert resumed.returncode == 0, resumed.stderr
    study = optuna.load_study(study_name="search", storage=f"sqlite:///{out / 'study.db'}")
    assert len(study.trials) == 4  # the interrupted trial, failed, and its repetition: one more trial, not three
    assert study.trials[2].state == optuna.trial.TrialState.FAIL
    assert study.trials[3].user_attrs["requeued_from"] == 2 and study.trials[3].params == params
    summary = pandas.read_csv(out / "summary.csv")
    assert list(summary["point"]) == [0, 1, 3]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    for trial in complete:
        row = summary.set_index("point").loc[trial.number]
        assert trial.values[0] == row["instructions"] and trial.values[1] == row["bandwidth"]
        assert row["core.systolic_rows"] == trial.params["core.systolic_rows"]
    assert sqlite3.connect(out / "study.db").execute("select count(*) from trials").fetchone()[0] == 4
    # The same study under another seed would mix two searches: refused, naming both seeds.
    reseeded = sweep_file.read_text().replace("seed: 11", "seed: 12")
    sweep_file.write_text(reseeded)
    refused = sweep_in_process(sweep_file, "--out", out, "--search", "optuna", "--trials", 4, "--jobs", 2)
    assert refused.returncode == 2 and "seed 11, the sweep file says 12" in refused.stderr
