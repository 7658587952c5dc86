"""How much of each objective's variation each axis explains by itself: first-order variance-based (Sobol') indices
Var(E[Y | axis]) / Var(Y), estimated from the points a sweep ran, and the share no single axis explains."""

import pandas

# A sampled range axis gives every point its own value; its points are grouped into at most this many quantile bins,
# so that a group mean is an average and an irrelevant axis explains only what chance does, about
# (groups - 1) / (points - 1) of the variance.
MAX_BINS = 5
REMAINDER = "interactions and noise"


def axis_groups(values):
    """The group of each point along one axis: its value when the axis takes few values, each shared by several
    points (a grid, zip or list axis, or a list axis sampled), else its quantile bin (a sampled range axis)."""
    distinct = values.nunique()
    if distinct <= MAX_BINS or distinct * 2 <= len(values) or not pandas.api.types.is_numeric_dtype(values):
        return values
    return pandas.qcut(values, MAX_BINS, duplicates="drop")


def first_order_index(objective, groups):
    """Var(E[Y | group]) / Var(Y): the variance of each point's group mean (weighting groups by their points)
    over the objective's variance; NaN when the objective does not vary."""
    total = objective.var(ddof=0)
    if not total > 0:
        return float("nan")
    group_means = objective.groupby(groups, observed=True).transform("mean")
    return group_means.var(ddof=0) / total


def sensitivity_indices(summary, objectives, axes):
    """A table: a row per objective, a column per axis with its first-order index, and REMAINDER, 1 minus their
    sum (at least 0), the share left to interactions between axes and to noise. Zipped axes move together, so they
    get the same index, the effect of the group, which no table of these points can split between them; it counts
    once in the sum."""
    ok = summary[summary["status"].eq("ok")]
    table = pandas.DataFrame(index=[o["name"] for o in objectives], columns=[*axes, REMAINDER], dtype=float)
    for objective in objectives:
        name = objective["name"]
        points = ok.dropna(subset=[name])
        partitions = {}  # the axes that split the points alike (a zip group) count once in the sum
        for axis in axes:
            groups = axis_groups(points[axis])
            table.loc[name, axis] = first_order_index(points[name], groups)
            partitions[tuple(pandas.factorize(groups)[0])] = table.loc[name, axis]
        explained = pandas.Series(list(partitions.values()), dtype=float)
        if explained.notna().any():
            table.loc[name, REMAINDER] = max(0.0, 1.0 - explained.sum())
    return table
