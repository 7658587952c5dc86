"""Pareto fronts: which points no other feasible point beats on every objective."""

import numpy


def dominated(costs):
    """For an (n, k) array of costs to minimise, a boolean array: True where another row is at least as good in
    every column and better in one."""
    costs = numpy.asarray(costs, dtype=float)
    no_worse = (costs[:, None, :] <= costs[None, :, :]).all(axis=2)  # [i, j]: i is no worse than j everywhere
    better = (costs[:, None, :] < costs[None, :, :]).any(axis=2)
    return (no_worse & better).any(axis=0)


def pareto_mask(table, objectives):
    """True for the rows of `table` (a DataFrame) on the Pareto front of `objectives` ([{name, goal}]): rows that
    succeeded, are not known to violate a constraint, and that no such row dominates."""
    names = [o["name"] for o in objectives]
    candidates = table["status"].eq("ok") & table[names].notna().all(axis=1)
    if "feasible" in table:
        candidates &= table["feasible"].astype("boolean").fillna(True).astype(bool)
    mask = numpy.zeros(len(table), dtype=bool)
    if candidates.any():
        signs = numpy.array([1.0 if o["goal"] == "minimize" else -1.0 for o in objectives])
        costs = table.loc[candidates, names].to_numpy(dtype=float) * signs
        mask[numpy.flatnonzero(candidates.to_numpy())] = ~dominated(costs)
    return mask
