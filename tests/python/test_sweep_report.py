"""The report's figures on hand-made results: first-order sensitivity indices, each point's roofline bound, and a
roofline for every point. Nothing here runs a design point."""

import re

import numpy
import pandas
import pytest
from sweep_helpers import fake_report, fake_results

from npusim.sweep import metrics, schema
from npusim.sweep.report import ROOFLINES_PER_IMAGE, write_report
from npusim.sweep.sensitivity import REMAINDER, sensitivity_indices

SECONDS = [{"name": "y", "goal": "minimize"}]


def test_a_sampled_axis_that_drives_the_objective_explains_it_and_an_irrelevant_one_does_not():
    """y = 10 + 5a, a and b uniform at random (a sampled sweep: every value its own): grouped into 5 quantile bins,
    a explains 1 - 1/5^2 = 96 % of y's variance (the rest varies within its bins), b only chance, about
    (5 - 1) / (200 - 1) = 2 %. Grouping by value, as before, gave b the whole range."""
    generator = numpy.random.default_rng(0)
    a, b = generator.uniform(0, 1, 200), generator.uniform(0, 1, 200)
    table = pandas.DataFrame({"status": "ok", "a": a, "b": b, "y": 10 + 5 * a})
    indices = sensitivity_indices(table, SECONDS, ["a", "b"]).loc["y"]
    assert indices["a"] > 0.9
    assert indices["b"] < 0.1
    assert indices[REMAINDER] == pytest.approx(max(0.0, 1 - indices["a"] - indices["b"]))


def test_grid_indices_match_a_hand_computation():
    """y = a * b on the grid a in {1, 2} x b in {10, 20, 30}: y = 10 20 30 20 40 60, mean 30,
    Var(y) = (400 + 100 + 0 + 100 + 100 + 900) / 6 = 1600 / 6.
    E[y | a] = 20, 40: variance (3 * 100 + 3 * 100) / 6 = 600 / 6, so S_a = 600 / 1600 = 0.375.
    E[y | b] = 15, 30, 45: variance (2 * 225 + 0 + 2 * 225) / 6 = 900 / 6, so S_b = 900 / 1600 = 0.5625.
    The product's interaction is the rest: 1 - 0.375 - 0.5625 = 0.0625. Axis c is zipped with a (c = 3a): the same
    index, counted once in the rest. A failed point is left out."""
    grid = [(a, b) for a in (1, 2) for b in (10, 20, 30)]
    table = pandas.DataFrame(
        {
            "status": ["ok"] * 6 + ["failed"],
            "a": [a for a, _ in grid] + [1],
            "b": [b for _, b in grid] + [10],
            "c": [3 * a for a, _ in grid] + [3],
            "y": [a * b for a, b in grid] + [1e9],
        }
    )
    indices = sensitivity_indices(table, SECONDS, ["a", "b", "c"]).loc["y"]
    assert indices["a"] == pytest.approx(0.375)
    assert indices["b"] == pytest.approx(0.5625)
    assert indices["c"] == pytest.approx(0.375)
    assert indices[REMAINDER] == pytest.approx(0.0625)


def test_roofline_bound_follows_the_cycles_not_the_count_of_kernels():
    """Three short memory-bound kernels (3 x 10 cycles) and one long compute-bound one (100 cycles): by count the
    point looks memory-bound, by time it is compute-bound."""
    kernels = [("add", 10, "memory", 10, 100)] * 3 + [("matmul", 100, "compute", 10**6, 100)]
    figures = metrics.run_metrics(fake_report(kernels))
    assert figures["memory_bound_kernels"] == 3 and figures["compute_bound_kernels"] == 1
    assert figures["compute_bound_cycles"] == 100 and figures["memory_bound_cycles"] == 30
    assert metrics.roofline_bound(figures) == "compute"
    # Over a point's workloads the cycles add up: a second workload of 200 memory-bound cycles tips it.
    other = metrics.run_metrics(fake_report([("copy", 200, "memory", 1, 1000)]))
    assert metrics.roofline_bound(metrics.combine([figures, other])) == "memory"
    assert metrics.roofline_bound(metrics.run_metrics(fake_report([]))) is None


def test_summary_names_each_points_roofline_bound(tmp_path):
    base = schema.base_configuration("default")
    summary = fake_results(
        tmp_path,
        [{**base, "dram.bandwidth_gbps": 25.0}, {**base, "dram.bandwidth_gbps": 400.0}],
        [
            fake_report([("matmul", 50, "compute", 10**6, 100), ("add", 80, "memory", 10, 100)]),
            fake_report([("matmul", 50, "compute", 10**6, 100), ("add", 20, "memory", 10, 100)]),
        ],
    )
    assert list(summary["roofline_bound"]) == ["memory", "compute"]
    written = pandas.read_csv(tmp_path / "summary.csv")
    assert list(written["roofline_bound"]) == ["memory", "compute"]


def test_report_of_many_points_has_a_roofline_for_each(tmp_path):
    count = 2 * ROOFLINES_PER_IMAGE + 3
    base = schema.base_configuration("default")
    configs = [{**base, "dram.bandwidth_gbps": 10.0 * (index + 1)} for index in range(count)]
    reports = [fake_report([("matmul", 1000 - index, "compute", 10**6, 10**4)]) for index in range(count)]
    fake_results(tmp_path, configs, reports)
    page = write_report(tmp_path).read_text()
    images = sorted((tmp_path / "report" / "rooflines").glob("rooflines-*.png"))
    assert len(images) == 3  # 12 + 12 + 3
    assert all(image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for image in images)
    captions = re.findall(r"<figcaption>rooflines of points ([\d, ]+)</figcaption>", page)
    drawn = [int(point) for caption in captions for point in caption.split(", ")]
    assert sorted(drawn) == list(range(count))
    # The first image is shown; the others are folded away, so hundreds of points leave the page readable.
    assert page.count("<details>") == len(images) - 1
    # A report of fewer points leaves no stale images of the earlier, larger one.
    fake_results(tmp_path, configs[:5], reports[:5])
    write_report(tmp_path)
    assert [p.name for p in (tmp_path / "report" / "rooflines").glob("*.png")] == ["rooflines-001.png"]
