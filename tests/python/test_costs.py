"""The energy and area model (npusim/costs.py, docs/costs.md): totals are the sums of their components, figures follow
the input type, the node and the memory sizes, and reports carry them."""

import json
import math
import pathlib

import pytest
from conftest import run_python

import npusim
from npusim import cost_tables, costs

PROFILED = """
    import sys, torch, npusim
    a, b = torch.randn(16, 32), torch.randn(32, 48)
    with npusim.profile() as report:
        (a.to("npusim") @ b.to("npusim")).cpu()
        (a.to(torch.bfloat16).to("npusim") @ b.to(torch.bfloat16).to("npusim")).cpu()
        torch.exp(a.to("npusim")).cpu()
    report.to_json(sys.argv[1])
"""


def preset(name):
    return npusim._C.configuration(name, npusim.config_dirs())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("costs") / "report.json"
    script = path.with_suffix(".py")
    script.write_text(__import__("textwrap").dedent(PROFILED))
    process = run_python(
        f"import runpy, sys; sys.argv = [{str(script)!r}, {str(path)!r}]; runpy.run_path({str(script)!r})",
        NPUSIM_MODE="timed",
    )
    assert process.returncode == 0, process.stderr
    return json.loads(path.read_text())


def test_every_energy_total_is_the_sum_of_its_components(report):
    for record in report["records"]:
        assert record["energy_uj"] == pytest.approx(sum(record["energy_breakdown_uj"].values()), rel=1e-12)
    totals = report["totals"]
    assert totals["energy_uj"] == pytest.approx(sum(totals["energy_breakdown_uj"].values()), rel=1e-12)
    assert totals["energy_uj"] == pytest.approx(sum(r["energy_uj"] for r in report["records"]), rel=1e-12)


def test_macs_are_charged_by_input_type(report):
    parameters = preset("default")
    energy_scale = cost_tables.technology_scale(parameters["chip.technology_nm"])[1]
    f32, bf16 = [r for r in report["records"] if r["name"].startswith("matmul")]
    assert f32["stats"]["matrix_macs_f32"] == f32["stats"]["matrix_macs"] == 16 * 32 * 48
    assert bf16["stats"]["matrix_macs_bf16"] == bf16["stats"]["matrix_macs"] == 16 * 32 * 48
    assert f32["energy_breakdown_uj"]["mac_f32"] == pytest.approx(
        16 * 32 * 48 * cost_tables.MAC_PJ["fp32"] * energy_scale * 1e-6
    )
    assert bf16["energy_breakdown_uj"]["mac_bf16"] < f32["energy_breakdown_uj"]["mac_f32"]
    assert bf16["energy_breakdown_uj"]["mac_f32"] == 0


def test_special_functions_are_counted_and_charged_apart(report):
    (exp,) = [r for r in report["records"] if r["name"].startswith("exp")]
    assert exp["stats"]["vector_special_elements"] == exp["stats"]["vector_elements"] == 16 * 32
    assert exp["energy_breakdown_uj"]["vector"] == 0
    assert exp["energy_breakdown_uj"]["vector_special"] > 0
    # Timed mode counts the kernel's buffer bytes: the scratchpad's energy is there.
    assert exp["energy_breakdown_uj"]["scratchpad"] > 0


def test_report_carries_the_chip_area_at_its_top_level(report):
    assert report["area_mm2"] == pytest.approx(costs.area_mm2(preset("default")))
    assert report["area_mm2"] == pytest.approx(sum(report["area_breakdown_mm2"].values()))


def test_area_and_power_are_sums_of_their_components():
    for name in npusim._C.presets(npusim.config_dirs()):
        parameters = preset(name)
        assert costs.area_mm2(parameters) == pytest.approx(sum(costs.area_breakdown_mm2(parameters).values()))
        breakdown = costs.peak_power_breakdown_w(parameters)
        assert costs.peak_power_w(parameters) == pytest.approx(sum(breakdown.values()) - breakdown["dram"])


def test_technology_scaling_follows_stillmaker_and_baas():
    assert cost_tables.technology_scale(45) == (1.0, 1.0)
    area, energy = cost_tables.technology_scale(7)
    assert area == 0.059
    # Their energy polynomials at 0.8 V: 7 nm over 45 nm.
    assert energy == pytest.approx((0.1776 * 0.64 - 0.09097 * 0.8 + 0.02447) / (1.103 * 0.64 - 0.362 * 0.8 + 0.2767))
    # Between two nodes, linear: 28 nm lies a third of the way from 32 nm to 20 nm.
    assert cost_tables.technology_scale(28)[0] == pytest.approx(0.46 + (0.21 - 0.46) / 3)
    with pytest.raises(ValueError, match="outside"):
        cost_tables.technology_scale(3)


def test_sram_energy_grows_with_the_bank_and_falls_with_banking():
    # Horowitz's 8 KB point exactly, and the square-root fit through his 32 KB one.
    assert cost_tables.sram_pj_per_byte(8) == pytest.approx(10.0 / 8)
    assert cost_tables.sram_pj_per_byte(32) == pytest.approx(20.0 / 8)
    parameters = dict(preset("default"))
    one_bank = {**parameters, "core.scratchpad_banks": 1}
    assert costs.scratchpad_pj_per_byte(one_bank) == pytest.approx(
        costs.scratchpad_pj_per_byte(parameters) * math.sqrt(parameters["core.scratchpad_banks"])
    )


def test_area_grows_with_the_array_and_shrinks_with_the_node():
    parameters = dict(preset("default"))
    bigger = {**parameters, "core.systolic_rows": 32, "core.systolic_cols": 32}
    breakdown, bigger_breakdown = costs.area_breakdown_mm2(parameters), costs.area_breakdown_mm2(bigger)
    assert bigger_breakdown["systolic_array"] == pytest.approx(4 * breakdown["systolic_array"])
    older = {**parameters, "chip.technology_nm": 45}
    assert costs.area_breakdown_mm2(older)["scratchpad"] == pytest.approx(breakdown["scratchpad"] / 0.059)
    int8 = {**parameters, "core.pe_type": "int8"}
    assert costs.area_breakdown_mm2(int8)["systolic_array"] < breakdown["systolic_array"]


def test_docs_compare_the_presets_with_the_figures_the_model_gives():
    """docs/costs.md's table of presets against published chips quotes costs.py's estimates: it must follow them."""
    table = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "costs.md").read_text()
    presets = npusim._C.presets(npusim.config_dirs())
    rows = {
        line.split("`")[1]: line.split("|")
        for line in table.splitlines()
        if line.startswith("| `") and line.split("`")[1] in presets
    }
    for name in ("tpu_v1", "eyeriss", "datacenter", "default", "edge"):
        parameters = preset(name)
        breakdown = costs.area_breakdown_mm2(parameters)
        row = rows[name]
        area_text, power_text = row[4], row[6]
        core_area = costs.area_mm2(parameters) - breakdown["dram_phy"]
        assert f"{costs.area_mm2(parameters):.1f} mm²" in area_text or f"{core_area:.1f} mm²" in area_text, name
        assert float(power_text.split()[0]) == pytest.approx(costs.peak_power_w(parameters), rel=0.01, abs=0.006), name
