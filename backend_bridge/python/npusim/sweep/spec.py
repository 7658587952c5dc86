"""The sweep file: base chip, axes and how they combine, derived figures, constraints, workloads, objectives.
Everything is checked here, against the parameter schema, before any point runs; errors name file, line and key."""

from dataclasses import dataclass, field
from pathlib import Path

import numpy

from . import schema, workloads
from .expressions import Expression, ExpressionError
from .located_yaml import LocatedYaml
from .metrics import RUN_METRICS

COMBINATIONS = ("grid", "zip", "list", "random", "sobol")
TOP_LEVEL_KEYS = {
    "name",
    "base",
    "mode",
    "timeout_s",
    "axes",
    "combine",
    "zip",
    "samples",
    "seed",
    "points",
    "derived",
    "constraints",
    "workloads",
    "objectives",
}
# Figures of a configuration that are not parameters themselves.
DERIVED_FIGURES = {
    "macs_per_cycle": "core.systolic_rows * core.systolic_cols * chip.cores",
    "peak_gflops": "2 * core.systolic_rows * core.systolic_cols * chip.clock_ghz * chip.cores",
    "sram_kib": "(core.scratchpad_kib + core.accumulator_kib) * chip.cores",
    "dram_bytes_per_cycle": "dram.bandwidth_gbps / chip.clock_ghz",
}
# Figures npusim's cost model computes from a configuration (npusim.costs, docs/costs.md): known before anything
# runs, so a constraint on them rejects a point without running it.
MODEL_FIGURES = ("area_mm2", "peak_power_w")


@dataclass(frozen=True)
class Axis:
    """A parameter and either its list of values or a range [low, high] (log-spaced if `log`); `steps` makes a
    range usable in a grid."""

    name: str
    values: tuple | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    steps: int | None = None
    line: int = 0


@dataclass(frozen=True)
class Objective:
    name: str
    expression: Expression
    goal: str  # "minimize" or "maximize"


@dataclass(frozen=True)
class Constraint:
    expression: Expression
    line: int

    @property
    def before_run(self):
        """True when it names only configuration figures, so it can reject a point without running it."""
        return not (self.expression.names & (set(RUN_METRICS) - set(MODEL_FIGURES)))


@dataclass
class Sweep:
    path: Path
    name: str
    base: str
    base_values: dict
    mode: str = "timed"
    timeout_s: float = 1800.0
    axes: dict = field(default_factory=dict)
    combine: str = "grid"
    zip_groups: list = field(default_factory=list)
    samples: int = 0
    seed: int = 0
    listed_points: list = field(default_factory=list)
    derived: dict = field(default_factory=dict)
    constraints: list = field(default_factory=list)
    workloads: list = field(default_factory=list)
    objectives: list = field(default_factory=list)
    located: LocatedYaml | None = None


def _check_figures(located, expression, known, *path):
    """Every figure the expression names is known, and every text it compares a parameter with is one of the
    parameter's values (`core.dataflow == "diagonal"` would silently never hold)."""
    unknown = sorted(expression.names - known)
    if unknown:
        raise located.error(f"'{expression.text}' names unknown figure '{unknown[0]}'", *path)
    for name, text in sorted(expression.compared_texts):
        if name in schema.parameters():
            try:
                schema.check_value(name, text)
            except ValueError as error:
                raise located.error(f"'{expression.text}': {error}", *path) from None


def _parse_expression(located, text, *path):
    try:
        return Expression(text, origin=f"{located.path}:{located.line(*path)}")
    except ExpressionError as error:
        raise located.error(str(error), *path) from None


def _axis(located, name, entry):
    path = ("axes", name)
    try:
        schema.check_name(name)
    except ValueError as error:
        raise located.error(str(error), *path, "<key>") from None
    if isinstance(entry, list):
        if not entry:
            raise located.error("an axis needs at least one value", *path)
        values = []
        for index, value in enumerate(entry):
            try:
                values.append(schema.check_value(name, value))
            except ValueError as error:
                raise located.error(str(error), *path, index) from None
        return Axis(name, values=tuple(values), line=located.line(*path))
    if isinstance(entry, dict):
        if schema.parameters()[name]["type"] == "text":
            choices = ", ".join(schema.text_choices(name)) or "any text"
            raise located.error(f"'{name}' is text: its axis is a list of values ({choices}), not a range", *path)
        unknown = set(entry) - {"min", "max", "log", "steps"}
        if unknown or not {"min", "max"} <= set(entry):
            raise located.error("a range axis is {min: LOW, max: HIGH, log: BOOL, steps: N}", *path)
        for bound in ("min", "max"):
            try:
                schema.check_value(name, entry[bound])
            except ValueError as error:
                raise located.error(str(error), *path, bound) from None
        if entry["min"] > entry["max"]:
            raise located.error("min is above max", *path)
        if entry.get("log") and entry["min"] <= 0:
            raise located.error("a log range needs min > 0", *path, "min")
        steps = entry.get("steps")
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise located.error("steps must be a positive integer", *path, "steps")
        return Axis(name, None, entry["min"], entry["max"], bool(entry.get("log")), steps, located.line(*path))
    raise located.error("an axis is a list of values or a range {min, max}", *path)


def _objective(located, entry, index, known):
    path = ("objectives", index)
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, dict) or "name" not in entry:
        raise located.error("an objective is a figure name or {name, expr, goal}", *path)
    unknown = set(entry) - {"name", "expr", "goal"}
    if unknown:
        raise located.error(f"unknown objective key '{sorted(unknown)[0]}'", *path)
    goal = entry.get("goal", "minimize")
    if goal not in ("minimize", "maximize"):
        raise located.error("goal must be 'minimize' or 'maximize'", *path, "goal")
    expression = _parse_expression(located, entry.get("expr", entry["name"]), *path)
    _check_figures(located, expression, known, *path)
    return Objective(str(entry["name"]), expression, goal)


def load_sweep(path, search=False):
    """Reads and checks a sweep file; raises SweepFileError (`file:line: key '...': reason`). With `search`, the
    axes are a search space (Optuna), so ranges need no steps and `combine` is not used."""
    located = LocatedYaml(path)
    data = located.data
    if not isinstance(data, dict):
        raise located.error("a sweep file is a map (base, axes, workloads, objectives, ...)")
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise located.error(f"unknown key '{key}'; known: {', '.join(sorted(TOP_LEVEL_KEYS))}", key, "<key>")
    sweep_dir = Path(path).resolve().parent
    base = str(data.get("base", "default"))
    if "/" in base or base.endswith(".yaml"):
        base = str((sweep_dir / base).resolve())
    try:
        base_values = schema.base_configuration(base)
    except Exception as error:  # the C++ loader's ConfigError, which names the base file, line and key
        raise located.error(f"base configuration: {error}", "base") from None
    sweep = Sweep(Path(path).resolve(), str(data.get("name", Path(path).stem)), base, base_values, located=located)
    sweep.mode = data.get("mode", "timed")
    if sweep.mode not in ("timed", "functional"):
        raise located.error("mode must be 'timed' or 'functional'", "mode")
    sweep.timeout_s = data.get("timeout_s", sweep.timeout_s)
    if isinstance(sweep.timeout_s, bool) or not isinstance(sweep.timeout_s, (int, float)) or sweep.timeout_s <= 0:
        raise located.error("timeout_s must be a positive number of seconds", "timeout_s")
    axes = data.get("axes") or {}
    if not isinstance(axes, dict):
        raise located.error("axes is a map of parameter: values", "axes")
    sweep.axes = {name: _axis(located, name, entry) for name, entry in axes.items()}
    sweep.combine = data.get("combine", "grid")
    if sweep.combine not in COMBINATIONS:
        raise located.error(f"combine must be one of {', '.join(COMBINATIONS)}", "combine")
    if search:
        sweep.seed = data.get("seed", 0)
    else:
        _combination(located, sweep, data)
    known = set(schema.parameters()) | set(DERIVED_FIGURES) | set(MODEL_FIGURES)
    for name, text in (data.get("derived") or {}).items():
        expression = _parse_expression(located, text, "derived", name)
        _check_figures(located, expression, known, "derived", name)
        sweep.derived[name] = expression
    known |= set(sweep.derived)
    for index, text in enumerate(data.get("constraints") or []):
        expression = _parse_expression(located, text, "constraints", index)
        _check_figures(located, expression, known | set(RUN_METRICS), "constraints", index)
        sweep.constraints.append(Constraint(expression, located.line("constraints", index)))
    entries = data.get("workloads") or []
    if not entries:
        raise located.error("a sweep needs at least one workload", "workloads")
    for index, entry in enumerate(entries):
        sweep.workloads.append(
            workloads.resolve(
                entry, sweep_dir, lambda message, *key, i=index: located.error(message, "workloads", i, *key)
            )
        )
    names = [w.name for w in sweep.workloads]
    if len(set(names)) != len(names):
        raise located.error("workload names must differ (give one a 'name')", "workloads")
    objectives = data.get("objectives") or ["seconds", "energy_uj"]
    sweep.objectives = [_objective(located, entry, i, known | set(RUN_METRICS)) for i, entry in enumerate(objectives)]
    return sweep


def _combination(located, sweep, data):
    if sweep.combine in ("grid", "zip"):
        for name, axis in sweep.axes.items():
            if axis.values is None and axis.steps is None:
                raise located.error(f"a {sweep.combine} needs values or a range with steps", "axes", name)
    if sweep.combine == "zip":
        lengths = {len(grid_values(axis)) for axis in sweep.axes.values()}
        if len(lengths) > 1:
            raise located.error("zipped axes must have the same number of values", "axes")
    for index, group in enumerate(data.get("zip") or []):
        if sweep.combine != "grid":
            raise located.error("'zip' groups belong to a grid", "zip")
        if not isinstance(group, list) or any(name not in sweep.axes for name in group):
            raise located.error("a zip group is a list of axis names", "zip", index)
        if len({len(grid_values(sweep.axes[name])) for name in group}) > 1:
            raise located.error("axes zipped together must have the same number of values", "zip", index)
        sweep.zip_groups.append(list(group))
    if sweep.combine in ("random", "sobol"):
        sweep.samples = data.get("samples", 0)
        if not isinstance(sweep.samples, int) or sweep.samples < 1:
            raise located.error(f"{sweep.combine} sampling needs 'samples' (a positive integer)", "samples")
    sweep.seed = data.get("seed", 0)
    if not isinstance(sweep.seed, int):
        raise located.error("seed must be an integer", "seed")
    if sweep.combine == "list":
        points = data.get("points") or []
        if not points:
            raise located.error("combine: list needs 'points' (a list of {parameter: value} maps)", "points")
        for index, point in enumerate(points):
            if not isinstance(point, dict):
                raise located.error("a point is a map of parameter: value", "points", index)
            checked = {}
            for name, value in point.items():
                try:
                    checked[name] = schema.check_value(name, value)
                except ValueError as error:
                    raise located.error(str(error), "points", index, name) from None
            sweep.listed_points.append(checked)


def grid_values(axis):
    """The values an axis takes in a grid or zip."""
    if axis.values is not None:
        return list(axis.values)
    space = numpy.geomspace if axis.log else numpy.linspace
    values = [float(v) for v in space(axis.low, axis.high, axis.steps)]
    if schema.parameters()[axis.name]["type"] == "integer":
        values = sorted({int(round(v)) for v in values})
    return values
