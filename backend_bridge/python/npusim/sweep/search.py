"""`npusim sweep --search optuna --trials N`: Optuna's NSGA-II searches the axes for the Pareto front of the
objectives instead of running every point. The study lives beside the results (study.db, SQLite), so a search
resumes where it stopped; runs go through the same executors and cache as a grid sweep; the seed is recorded."""

import json
import sys

import optuna

from . import cache as cache_module
from . import results
from .executors import make_executor
from .points import make_point
from .progress import SweepProgress
from .runner import RunScheduler, SweepError, describe, sweep_metadata, validate_with_loader
from .spec import Sweep

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)


def suggest(trial, sweep: Sweep):
    """The trial's point: a value for each axis, from its list or its range."""
    overrides = {}
    for name, axis in sweep.axes.items():
        if axis.values is not None:
            overrides[name] = trial.suggest_categorical(name, list(axis.values))
        elif isinstance(axis.low, int) and isinstance(axis.high, int):
            overrides[name] = trial.suggest_int(name, axis.low, axis.high, log=axis.log)
        else:
            overrides[name] = trial.suggest_float(name, float(axis.low), float(axis.high), log=axis.log)
    return overrides


def open_study(sweep, out_dir):
    storage = f"sqlite:///{out_dir / 'study.db'}"
    sampler = optuna.samplers.NSGAIISampler(seed=sweep.seed)
    study = optuna.create_study(
        study_name=sweep.name,
        storage=storage,
        sampler=sampler,
        directions=[o.goal for o in sweep.objectives],
        load_if_exists=True,
    )
    recorded = study.user_attrs.get("seed", sweep.seed)
    if recorded != sweep.seed:
        # Resuming under another seed would mix two searches' samples in one study without saying so.
        raise SweepError(
            f"{out_dir / 'study.db'} holds a search with seed {recorded}, the sweep file says {sweep.seed}: "
            "resume with the same seed, or search into another --out"
        )
    study.set_user_attr("seed", sweep.seed)
    study.set_user_attr("objectives", [o.name for o in sweep.objectives])
    return study


def _conclude(study, sweep, scheduler, trial, point, entry):
    """Tells the study a trial's outcome: its objective values, or a failure (rejected, a run failed)."""
    if point.rejected_by:
        trial.set_user_attr("rejected_by", point.rejected_by)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return
    combined = scheduler.point_figures(entry)
    if combined is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return
    figures = {**point.figures, **{k: v for k, v in combined.items() if v is not None}}
    try:
        values = [float(o.expression.evaluate(figures)) for o in sweep.objectives]
    except KeyError:  # an objective on a figure the reports lack (area_mm2 before the area model)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        return
    for constraint in sweep.constraints:  # NSGA-II ranks trials with a positive value as infeasible
        try:
            trial.set_constraint(constraint.expression.text, 0.0 if constraint.expression.evaluate(figures) else 1.0)
        except KeyError:  # undecidable (a figure the reports lack): not held against the trial
            trial.set_constraint(constraint.expression.text, 0.0)
    study.tell(trial, values)


def _requeue_interrupted(study):
    """Trials a stopped search left running are failed and asked again with the same parameters: their runs that
    finished come from the cache."""
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"requeued_from": trial.number})


def _superseded(study):
    """Numbers of the interrupted trials that were asked again: the new trial stands for them."""
    return {t.user_attrs["requeued_from"] for t in study.get_trials(deepcopy=False) if "requeued_from" in t.user_attrs}


def _finished(study):
    trials = study.get_trials(deepcopy=False, states=FINISHED)
    return len(trials) - len(_superseded(study) & {t.number for t in trials})


def _point_of(sweep, trial):
    return make_point(sweep, trial.number, {name: trial.params[name] for name in sweep.axes})


def _write_meta(sweep, study, out_dir):
    described, superseded = [], _superseded(study)
    for trial in study.get_trials(deepcopy=False):
        if trial.number not in superseded and set(sweep.axes) <= set(trial.params):
            described.append(describe(sweep, _point_of(sweep, trial)))
    extra = {"search": {"sampler": "NSGAIISampler", "seed": sweep.seed, "study": str(out_dir / "study.db")}}
    cache_module.write_atomically(out_dir / "sweep.json", json.dumps(sweep_metadata(sweep, described, extra), indent=1))


def run_search(
    sweep, out_dir, trials, executor_kind="local", jobs=None, scheduler=None, retry_failed=False, quiet=False
):
    """Runs NSGA-II trials until the study holds `trials` finished ones; returns the summary table."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    executor = make_executor(executor_kind, jobs, scheduler)
    out_dir.mkdir(parents=True, exist_ok=True)
    study = open_study(sweep, out_dir)
    _requeue_interrupted(study)
    run_scheduler = RunScheduler(sweep, out_dir, executor, retry_failed, quiet)
    finished = _finished(study)
    progress = SweepProgress(max(trials - finished, 0) * len(sweep.workloads), 0, 0, quiet, f"{sweep.name} (optuna)")
    try:
        while finished < trials:
            batch = [study.ask() for _ in range(min(executor.jobs, trials - finished))]
            points = [make_point(sweep, trial.number, suggest(trial, sweep)) for trial in batch]
            validate_with_loader(sweep, points)
            described = [(point, describe(sweep, point)) for point in points]
            _write_meta(sweep, study, out_dir)
            cached, failed, to_run = run_scheduler.pending(described)
            progress.skipped(len(cached), len(failed))
            run_scheduler.execute(to_run, progress)
            for trial, (point, entry) in zip(batch, described, strict=True):
                _conclude(study, sweep, run_scheduler, trial, point, entry)
            finished += len(batch)
    finally:
        progress.close()
        executor.close()
        _write_meta(sweep, study, out_dir)
        table = results.write_results(out_dir)
    if not quiet:
        front = [t.number for t in study.best_trials]
        print(f"npusim sweep: {finished} trials (seed {sweep.seed}); Pareto front: trials {front}", file=sys.stderr)
    return table
