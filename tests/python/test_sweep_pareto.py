"""The Pareto front on hand-made tables."""

import pandas

from npusim.sweep.pareto import dominated, pareto_mask


def test_dominated_rows():
    costs = [[1, 5], [2, 2], [3, 1], [3, 3], [2, 2], [4, 4]]
    # [3, 3] and [4, 4] are beaten by [2, 2]; the two equal rows [2, 2] do not dominate each other.
    assert list(dominated(costs)) == [False, False, False, True, False, True]


def test_front_skips_failed_and_infeasible_points_and_honours_goals():
    table = pandas.DataFrame(
        {
            "point": [0, 1, 2, 3, 4, 5],
            "status": ["ok", "ok", "ok", "ok", "failed", "ok"],
            "seconds": [1.0, 2.0, 3.0, 0.5, 0.1, 2.5],
            "utilisation": [0.2, 0.6, 0.9, 0.9, 1.0, 0.5],
            "feasible": [True, True, True, False, None, True],
        }
    )
    objectives = [{"name": "seconds", "goal": "minimize"}, {"name": "utilisation", "goal": "maximize"}]
    # 3 would dominate everything but violates a constraint; 4 failed; 5 (2.5 s, 0.5) is beaten by 1 (2 s, 0.6).
    assert list(pareto_mask(table, objectives)) == [True, True, True, False, False, False]
    three = objectives + [{"name": "energy", "goal": "minimize"}]
    table["energy"] = [9.0, 9.0, 9.0, 9.0, 9.0, 1.0]
    assert list(pareto_mask(table, three)) == [True, True, True, False, False, True]  # 5 now wins on energy
