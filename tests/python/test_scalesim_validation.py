"""npusim's systolic array against SCALE-Sim itself on a small grid of GEMMs, both dataflows (issue 25;
bench/scalesim_validation.py runs the full grid and docs/timing.md explains the comparison)."""

import importlib.util
import pathlib

import numpy
import pytest

pytest.importorskip("scalesim", reason="SCALE-Sim is not installed (pip install scalesim==3.0.0)")
if tuple(int(part) for part in numpy.__version__.split(".")[:2]) >= (2, 4):
    pytest.skip(
        f"SCALE-Sim 3.0.0 converts one-element arrays with int(), which numpy {numpy.__version__} rejects: needs < 2.4",
        allow_module_level=True,
    )

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "scalesim_validation.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("scalesim_validation", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_array_cycles_match_scalesim_within_one_percent():
    # M = 1, a ragged N narrower than the array, ragged M, K and N with several folds, on two array sizes.
    rows, groups = load_bench().compare([8, 16], [(1, 32, 24), (20, 20, 5), (37, 45, 21)])
    assert {row["dataflow"] for row in rows} == {"weight_stationary", "output_stationary"}
    assert len(rows) == 2 * 2 * 3
    for row in rows:
        assert abs(row["error"]) <= 0.01, row
        # The kernel does more than its array's work: launch, DMA, the scalar unit, mx.st.
        assert row["kernel_cycles"] > row["npusim"], row
    assert all(group["scalesim_s"] > 0 and 0 < group["npusim_s"] < group["npusim_process_s"] for group in groups)
