"""Design points from a sweep's axes (grid, zip, list, random or Sobol samples), each with its full configuration,
its derived figures, and the constraint that rejects it before running, if any."""

import itertools
from dataclasses import dataclass, field

import numpy
from scipy.stats import qmc

from .. import costs
from . import schema
from .expressions import Expression
from .spec import DERIVED_FIGURES, grid_values

_BUILTIN_DERIVED = {name: Expression(text) for name, text in DERIVED_FIGURES.items()}


@dataclass
class Point:
    index: int
    overrides: dict  # the axis values of this point, "section.key" -> value
    config: dict  # every parameter
    figures: dict = field(default_factory=dict)  # parameters and derived figures, for constraints
    rejected_by: str | None = None  # the text of the first constraint it fails

    def yaml_sections(self):
        """The configuration as the loader's YAML map of sections."""
        sections = {}
        for name, value in self.config.items():
            section, key = name.split(".", 1)
            sections.setdefault(section, {})[key] = value
        return sections


def _grid(sweep):
    """The product of the axes, the axes of each zip group moving together."""
    grouped = {name for group in sweep.zip_groups for name in group}
    factors = [[{name: v} for v in grid_values(axis)] for name, axis in sweep.axes.items() if name not in grouped]
    for group in sweep.zip_groups:
        columns = [grid_values(sweep.axes[name]) for name in group]
        factors.append([dict(zip(group, row, strict=True)) for row in zip(*columns, strict=True)])
    for combination in itertools.product(*factors):
        yield {name: value for part in combination for name, value in part.items()}


def _zip(sweep):
    columns = {name: grid_values(axis) for name, axis in sweep.axes.items()}
    for row in zip(*columns.values(), strict=True):
        yield dict(zip(columns, row, strict=True))


def _value_at(axis, unit):
    """An axis value for a sample `unit` in [0, 1): an index into its list, or a point of its range."""
    if axis.values is not None:
        return axis.values[min(int(unit * len(axis.values)), len(axis.values) - 1)]
    if axis.log:
        value = float(numpy.exp(numpy.log(axis.low) + unit * (numpy.log(axis.high) - numpy.log(axis.low))))
    else:
        value = axis.low + unit * (axis.high - axis.low)
    if schema.parameters()[axis.name]["type"] == "integer":
        return int(round(value))
    return value


def _samples(sweep):
    axes = list(sweep.axes.values())
    if sweep.combine == "sobol":
        units = qmc.Sobol(d=len(axes), scramble=True, seed=sweep.seed).random(sweep.samples)
    else:
        units = numpy.random.default_rng(sweep.seed).random((sweep.samples, len(axes)))
    for row in units:
        yield {axis.name: _value_at(axis, unit) for axis, unit in zip(axes, row, strict=True)}


def figures_of(config, derived):
    """A configuration's parameters and its derived figures (the cost model's, the built-in ones, then the sweep's
    own)."""
    figures = dict(config, area_mm2=costs.area_mm2(config), peak_power_w=costs.peak_power_w(config))
    for name, expression in {**_BUILTIN_DERIVED, **derived}.items():
        figures[name] = expression.evaluate(figures)
    return figures


def make_point(sweep, index, overrides):
    config = {**sweep.base_values, **overrides}
    point = Point(index, dict(overrides), config, figures_of(config, sweep.derived))
    for constraint in sweep.constraints:
        if constraint.before_run and not constraint.expression.evaluate(point.figures):
            point.rejected_by = constraint.expression.text
            break
    return point


def generate(sweep):
    """Every distinct design point of the sweep, in order; identical samples are kept once."""
    if sweep.combine == "grid":
        rows = _grid(sweep)
    elif sweep.combine == "zip":
        rows = _zip(sweep)
    elif sweep.combine == "list":
        rows = iter(sweep.listed_points)
    else:
        rows = _samples(sweep)
    points, seen = [], set()
    for overrides in rows:
        identity = tuple(sorted(overrides.items()))
        if identity not in seen:
            seen.add(identity)
            points.append(make_point(sweep, len(points), overrides))
    return points


def axis_names(sweep):
    """The parameters the sweep varies (a listed sweep's are the keys of its points)."""
    if sweep.combine == "list":
        return sorted({name for point in sweep.listed_points for name in point})
    return list(sweep.axes)
