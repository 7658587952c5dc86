"""Sweep files: schema errors located at file, line and key; points of each combination; constraints; dry runs.
Nothing here runs a design point."""

import re
import textwrap
import time

import pytest
from sweep_helpers import sweep_in_process

import npusim
from npusim.sweep import schema
from npusim.sweep.expressions import Expression, ExpressionError
from npusim.sweep.located_yaml import SweepFileError
from npusim.sweep.points import generate
from npusim.sweep.runner import validate_with_loader
from npusim.sweep.spec import load_sweep


def write(tmp_path, text, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


WORKLOAD = """
workloads:
  - builtin: gemm
    args: [--m, 16, --n, 16, --k, 16]
"""


@pytest.mark.parametrize(
    ("axes", "line", "message"),
    [
        (
            "  core.systolic_rows: [8, 2000]\n",
            3,
            "key 'axes.core.systolic_rows': 'core.systolic_rows' = 2000 is outside",
        ),
        ("  core.systolic_row: [8]\n", 3, "unknown parameter 'core.systolic_row' (did you mean 'core.systolic_rows'?)"),
        ("  chip.cores: [1, 2.5]\n", 3, "'chip.cores' must be an integer, found 2.5"),
        ("  dram.kind: [3]\n", 3, "'dram.kind' must be text"),
        (
            "  core.dataflow: [weight_stationary, diagonal]\n",
            3,
            "key 'axes.core.dataflow': 'core.dataflow' = 'diagonal' is not one of weight_stationary, output_stationary",
        ),
        # A list written one value a line: the line of the bad value, not of its axis.
        ("  core.pe_type:\n    - fp16\n    - fp8\n", 5, "'core.pe_type' = 'fp8' is not one of int8, int16"),
        ("  core.dataflow: {min: a, max: b}\n", 3, "'core.dataflow' is text: its axis is a list of values"),
        ("  core.scratchpad_kib: [64]\n  dram.bandwidth_gbps: {min: 0, max: 10, steps: 2}\n", 4, "is outside"),
    ],
)
def test_bad_axis_is_an_error_naming_file_line_and_key(tmp_path, axes, line, message):
    path = write(tmp_path, "base: default\naxes:\n" + axes + WORKLOAD)
    with pytest.raises(SweepFileError) as error:
        load_sweep(path)
    assert str(error.value).startswith(f"{path}:{line}:"), str(error.value)
    assert message in str(error.value)


def test_other_mistakes_are_located(tmp_path):
    cases = {
        "base: default\nobjectivs: [seconds]\n" + WORKLOAD: (2, "unknown key 'objectivs'"),
        "base: nosuchpreset\n" + WORKLOAD: (1, "unknown configuration 'nosuchpreset'"),
        "axes: {core.systolic_rows: [8]}\nconstraints:\n  - core.systolic_rows * chip.coress <= 4\n" + WORKLOAD: (
            3,
            "names unknown figure 'chip.coress'",
        ),
        "constraints:\n  - __import__('os').system('true')\n" + WORKLOAD: (2, "unsupported syntax"),
        "workloads:\n  - builtin: nosuch\n": (2, "unknown builtin workload 'nosuch'"),
        "objectives: [seconds, {name: x, goal: fastest}]\n" + WORKLOAD: (1, "goal must be 'minimize' or 'maximize'"),
        "combine: list\npoints:\n  - {chip.cores: 2}\n  - {dram.kind: hbm4}\n" + WORKLOAD: (
            4,
            "key 'points.dram.kind': 'dram.kind' = 'hbm4' is not one of ddr3, lpddr4, lpddr5, hbm2, hbm3",
        ),
        # A constraint comparing a text parameter with a value it cannot take would never (or always) hold.
        "axes: {chip.cores: [1, 2]}\nconstraints:\n  - chip.cores == 1 or core.dataflow == 'diagonal'\n" + WORKLOAD: (
            3,
            "'core.dataflow' = 'diagonal' is not one of weight_stationary, output_stationary",
        ),
    }
    for index, (text, (line, message)) in enumerate(cases.items()):
        path = write(tmp_path, text, f"case{index}.yaml")
        with pytest.raises(SweepFileError) as error:
            load_sweep(path)
        assert str(error.value).startswith(f"{path}:{line}:"), str(error.value)
        assert message in str(error.value), str(error.value)


def test_grid_with_zip_group_and_constraint(tmp_path):
    path = write(
        tmp_path,
        textwrap.dedent(
            """
        axes:
          core.systolic_rows: [8, 16, 32]
          core.systolic_cols: [8, 16, 32]
          dram.bandwidth_gbps: {min: 50, max: 200, steps: 3, log: true}
        zip: [[core.systolic_rows, core.systolic_cols]]
        derived:
          pes: core.systolic_rows * core.systolic_cols
        constraints:
          - pes * dram.bandwidth_gbps <= 256 * 100
        """
        )
        + WORKLOAD,
    )
    points = generate(load_sweep(path))
    assert len(points) == 9  # 3 zipped array sizes x 3 bandwidths
    assert {(p.config["core.systolic_rows"], p.config["core.systolic_cols"]) for p in points} == {
        (8, 8),
        (16, 16),
        (32, 32),
    }
    assert sorted({p.config["dram.bandwidth_gbps"] for p in points}) == pytest.approx([50.0, 100.0, 200.0])
    rejected = {(p.config["core.systolic_rows"], p.config["dram.bandwidth_gbps"]) for p in points if p.rejected_by}
    # 16 x 16 x 200 and every 32 x 32 exceed 25600.
    assert rejected == {(16, 200.0), (32, 50.0), (32, 100.0), (32, 200.0)}
    assert all(p.config["core.scratchpad_kib"] == 256 for p in points)  # the base (default preset) elsewhere
    assert points[0].figures["peak_gflops"] == 2 * 8 * 8 * 1.0


def test_zip_list_and_sampled_points(tmp_path):
    zipped = load_sweep(
        write(
            tmp_path, "combine: zip\naxes:\n  chip.cores: [1, 2]\n  core.vector_lanes: [8, 32]\n" + WORKLOAD, "z.yaml"
        )
    )
    assert [p.overrides for p in generate(zipped)] == [
        {"chip.cores": 1, "core.vector_lanes": 8},
        {"chip.cores": 2, "core.vector_lanes": 32},
    ]
    listed = load_sweep(
        write(
            tmp_path,
            "combine: list\npoints:\n  - {chip.cores: 2}\n  - {core.scratchpad_kib: 64}\n" + WORKLOAD,
            "l.yaml",
        )
    )
    assert [p.overrides for p in generate(listed)] == [{"chip.cores": 2}, {"core.scratchpad_kib": 64}]
    sampled_text = textwrap.dedent(
        """
        combine: {method}
        samples: 8
        seed: 7
        axes:
          core.scratchpad_kib: {{min: 32, max: 1024, log: true}}
          dram.bandwidth_gbps: {{min: 10, max: 400}}
          core.systolic_rows: [8, 16, 32]
        """
    )
    for method in ("random", "sobol"):
        sweep = load_sweep(write(tmp_path, sampled_text.format(method=method) + WORKLOAD, f"{method}.yaml"))
        first, again = generate(sweep), generate(sweep)
        assert [p.overrides for p in first] == [p.overrides for p in again]  # the seed fixes the samples
        assert len(first) == 8
        for point in first:
            assert (
                isinstance(point.config["core.scratchpad_kib"], int)
                and 32 <= point.config["core.scratchpad_kib"] <= 1024
            )
            assert 10 <= point.config["dram.bandwidth_gbps"] <= 400
            assert point.config["core.systolic_rows"] in (8, 16, 32)
    sobol = load_sweep(write(tmp_path, sampled_text.format(method="sobol") + WORKLOAD, "s.yaml"))
    other_seed = load_sweep(
        write(tmp_path, sampled_text.format(method="sobol").replace("seed: 7", "seed: 8") + WORKLOAD, "t.yaml")
    )
    assert [p.overrides for p in generate(sobol)] != [p.overrides for p in generate(other_seed)]


def test_expressions_are_evaluated_without_eval():
    expression = Expression("core.systolic_rows * core.systolic_cols * chip.cores <= 16384 and max(a, 2) > 1")
    assert expression.names == {"core.systolic_rows", "core.systolic_cols", "chip.cores", "a"}
    assert expression.evaluate({"core.systolic_rows": 128, "core.systolic_cols": 128, "chip.cores": 1, "a": 0})
    assert not expression.evaluate({"core.systolic_rows": 128, "core.systolic_cols": 128, "chip.cores": 2, "a": 0})
    for text in ("open('x')", "x.__class__", "[1][0]", "lambda: 1", "f'{x}'"):
        with pytest.raises(ExpressionError):
            Expression(text)


def test_powers_are_bounded_so_an_expression_cannot_hang_the_sweep():
    assert Expression("2 ** 10 + 2 ** 0.5").evaluate({}) == pytest.approx(1024 + 2**0.5)
    assert Expression("x ** 2").evaluate({"x": 2**100}) == 2**200
    # 10 ** 10 ** 10 has ten billion digits, ((10 ** 1000) ** 1000) ** 1000 a billion from small exponents: each
    # fails at once, naming the expression; a float power overflows instead of taking forever.
    for text in ("10 ** 10 ** 10", "((10 ** 1000) ** 1000) ** 1000", "2.0 ** 1e10", "'x' * 10 ** 9"):
        started = time.monotonic()
        with pytest.raises(ExpressionError, match=re.escape(f"cannot evaluate '{text}'")):
            Expression(text).evaluate({})
        assert time.monotonic() - started < 1


def test_a_huge_power_in_a_constraint_is_an_error_at_its_line(tmp_path):
    path = write(
        tmp_path,
        "axes:\n  core.systolic_rows: [8, 16]\nconstraints:\n  - core.systolic_rows ** 10 ** 10 > 1\n" + WORKLOAD,
    )
    process = sweep_in_process(path, "--dry-run")
    assert process.returncode == 2
    assert f"{path}:4: cannot evaluate 'core.systolic_rows ** 10 ** 10 > 1': a power to the 10000000000" in (
        process.stderr
    )


def test_text_parameters_take_every_value_the_loader_takes_and_no_other(tmp_path):
    """The values a sweep accepts for each text parameter are those of the C++ loader's schema (parameters.def): a
    sweep over all of them makes a point each, and the loader takes each of those points."""
    text_parameters = [name for name, row in schema.parameters().items() if row["type"] == "text"]
    assert {"core.dataflow", "core.pe_type", "dram.kind"} <= set(text_parameters)
    for name in text_parameters:
        choices = schema.text_choices(name)
        assert len(choices) >= 2, name
        sweep = load_sweep(write(tmp_path, f"axes:\n  {name}: [{', '.join(choices)}]\n" + WORKLOAD, "all.yaml"))
        points = generate(sweep)
        assert [p.config[name] for p in points] == choices
        validate_with_loader(sweep, points)  # raises unless the loader takes every value
        with pytest.raises(ValueError, match="is not one of"):
            schema.check_value(name, "no-such-value")
        section, key = name.split(".")
        bad = write(tmp_path, f"{section}:\n  {key}: no-such-value\n", "bad.yaml")
        with pytest.raises(Exception, match="is not one of"):
            npusim._C.configuration(str(bad), npusim.config_dirs())


def test_a_bad_text_value_fails_the_dry_run_naming_file_line_and_key(tmp_path):
    path = write(
        tmp_path, "axes:\n  core.systolic_rows: [8, 16]\n  core.dataflow: [weight_stationary, diagonal]\n" + WORKLOAD
    )
    process = sweep_in_process(path, "--dry-run", "--out", tmp_path / "out")
    assert process.returncode == 2 and process.stdout == ""
    assert (
        f"{path}:3: key 'axes.core.dataflow': 'core.dataflow' = 'diagonal' is not one of weight_stationary, "
        "output_stationary" in process.stderr
    )


def test_area_and_peak_power_are_configuration_figures_that_reject_before_running(tmp_path):
    """The cost model's area and peak power are known from the configuration: a constraint on them rejects a point
    without running it, and its figures are the ones `npusim configs` and the reports give."""
    path = write(
        tmp_path,
        "axes:\n  core.systolic_rows: [8, 128]\n  core.systolic_cols: [8, 128]\nzip: [[core.systolic_rows, "
        "core.systolic_cols]]\nconstraints:\n  - area_mm2 <= 5 and peak_power_w < 10\n" + WORKLOAD,
    )
    sweep = load_sweep(path)
    assert all(constraint.before_run for constraint in sweep.constraints)
    small, large = generate(sweep)
    assert small.figures["area_mm2"] == pytest.approx(npusim.costs.area_mm2(small.config))
    assert small.figures["peak_power_w"] == pytest.approx(npusim.costs.peak_power_w(small.config))
    assert large.figures["area_mm2"] > 5 > small.figures["area_mm2"]
    assert small.rejected_by is None and large.rejected_by == "area_mm2 <= 5 and peak_power_w < 10"


def test_dry_run_lists_points_rejections_and_an_estimate(tmp_path):
    path = write(
        tmp_path,
        "axes:\n  core.systolic_rows: [8, 64]\nconstraints:\n  - core.systolic_rows <= 32\n" + WORKLOAD,
    )
    process = sweep_in_process(path, "--dry-run", "--out", tmp_path / "out")
    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    assert any(line.startswith("0 ") and line.endswith("run") for line in lines), process.stdout
    assert any(line.startswith("1 ") and "rejected: core.systolic_rows <= 32" in line for line in lines)
    assert "1 points to run, 1 rejected" in process.stdout and "estimated" in process.stdout
    assert not (tmp_path / "out").exists()  # a dry run runs nothing


def test_schema_error_stops_the_command_before_anything_runs(tmp_path):
    path = write(tmp_path, "axes:\n  core.systolic_rows: [8, 0]\n" + WORKLOAD)
    process = sweep_in_process(path, "--out", tmp_path / "out")
    assert process.returncode == 2
    assert (
        f"{path}:2: key 'axes.core.systolic_rows': 'core.systolic_rows' = 0 is outside [1, 1024] PEs" in process.stderr
    )
    assert not (tmp_path / "out").exists()


def test_parameter_schema_matches_the_configuration_loader(tmp_path):
    rows = {row["name"]: row for row in npusim._C.parameter_schema()}
    empty = write(tmp_path, "name: defaults\n", "defaults.yaml")  # every parameter at its declared default
    defaults = npusim._C.configuration(str(empty), npusim.config_dirs())
    assert set(rows) == set(defaults) - {"name", "source"}
    for name, row in rows.items():
        value = defaults[name]
        if row["type"] == "text":
            assert row["default"].strip('"') == value
        else:
            assert float(row["default"]) == value and row["min"] <= value <= row["max"], name
