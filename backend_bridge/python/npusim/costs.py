"""Energy, area and peak power of a configured chip, from the published figures of cost_tables.py scaled to the
chip's node (docs/costs.md). ``parameters`` is a configuration as ``npusim._C.configuration`` gives it."""

from . import cost_tables as t

MAC_TYPES = ("i8", "f16", "bf16", "f32")
_MAC_TABLE_TYPE = {"i8": "int8", "f16": "fp16", "bf16": "bf16", "f32": "fp32"}


def _scale(parameters):
    return t.technology_scale(parameters["chip.technology_nm"])


def _bank_kib(capacity_kib, banks):
    return capacity_kib / max(banks, 1)


def scratchpad_pj_per_byte(parameters):
    """One byte into or out of the scratchpad: one bank's access, at the chip's node."""
    bank = _bank_kib(parameters["core.scratchpad_kib"], parameters["core.scratchpad_banks"])
    return t.sram_pj_per_byte(bank) * _scale(parameters)[1]


def accumulator_pj_per_byte(parameters):
    """One byte of the accumulator buffer: banked one bank per array column, as each column writes its own results."""
    bank = _bank_kib(parameters["core.accumulator_kib"], parameters["core.systolic_cols"])
    return t.sram_pj_per_byte(bank) * _scale(parameters)[1]


def energy_breakdown_pj(parameters, stats, dram_bytes, cores, seconds, is_copy=False):
    """A command's energy by component (pJ): its MACs by input type, vector work, scratchpad and accumulator bytes,
    DRAM transfer and activation, and static power while it runs. Copies move DRAM bytes only."""
    energy_scale = _scale(parameters)[1]
    dram_pj = dram_bytes * 8 * t.DRAM_PJ_PER_BIT[parameters["dram.kind"]]
    parts = {
        "dram_transfer": dram_pj * (1 - t.DRAM_ACTIVATION_SHARE),
        "dram_activation": dram_pj * t.DRAM_ACTIVATION_SHARE,
    }
    if is_copy:
        return parts
    for kind in MAC_TYPES:
        parts[f"mac_{kind}"] = stats.get(f"matrix_macs_{kind}", 0) * t.MAC_PJ[_MAC_TABLE_TYPE[kind]] * energy_scale
    special = stats.get("vector_special_elements", 0)
    parts["vector"] = (stats.get("vector_elements", 0) - special) * t.VECTOR_ELEMENT_PJ * energy_scale
    parts["vector_special"] = special * t.VECTOR_SPECIAL_PJ * energy_scale
    parts["scratchpad"] = stats.get("scratchpad_bytes", 0) * scratchpad_pj_per_byte(parameters)
    parts["accumulator"] = stats.get("accumulator_bytes", 0) * accumulator_pj_per_byte(parameters)
    parts["static"] = parameters["energy.static_mw_per_core"] * 1e-3 * cores * seconds * 1e12
    return parts


def _sram_mm2(capacity_kib, area_scale):
    return capacity_kib * 1024 * 8 * t.SRAM_BITCELL_UM2 / t.SRAM_ARRAY_EFFICIENCY * 1e-6 * area_scale


def area_breakdown_mm2(parameters):
    """The chip's area by component (mm^2)."""
    area_scale = _scale(parameters)[0]
    cores = parameters["chip.cores"]
    um2 = 1e-6 * area_scale
    pes = parameters["core.systolic_rows"] * parameters["core.systolic_cols"]
    return {
        "systolic_array": cores * pes * t.PE_UM2[parameters["core.pe_type"]] * um2,
        "vector_lanes": cores * parameters["core.vector_lanes"] * t.VECTOR_LANE_UM2 * um2,
        "scratchpad": cores * _sram_mm2(parameters["core.scratchpad_kib"], area_scale),
        "accumulator": cores * _sram_mm2(parameters["core.accumulator_kib"], area_scale),
        "scalar_units": (cores + 1)  # each core's, and the command processor
        * (t.SCALAR_CORE_LOGIC_MM2 * area_scale + _sram_mm2(t.SCALAR_CORE_MEMORY_KIB, area_scale)),
        "network": (cores + 1)
        * parameters["interconnect.link_bytes_per_cycle"]
        / 16
        * t.NOC_MM2_PER_16_BYTES
        * area_scale,
        "dram_phy": parameters["dram.channels"] * t.DRAM_PHY_MM2_PER_CHANNEL[parameters["dram.kind"]],
    }


def area_mm2(parameters):
    return sum(area_breakdown_mm2(parameters).values())


def peak_power_breakdown_w(parameters):
    """Power (W) with every engine busy every cycle: the array's MACs in its PE type, each with an input element read
    from the scratchpad and an accumulator word written per column, every vector lane, and static power; and apart,
    the DRAM devices at their peak bandwidth ("dram")."""
    energy_scale = _scale(parameters)[1]
    hertz = parameters["chip.clock_ghz"] * 1e9
    cores = parameters["chip.cores"]
    rows, cols = parameters["core.systolic_rows"], parameters["core.systolic_cols"]
    pe_type = parameters["core.pe_type"]
    input_bytes = {"int8": 1, "int16": 2, "fp16": 2, "bf16": 2, "fp32": 4}[pe_type]
    per_cycle_pj = {
        "systolic_array": rows * cols * t.MAC_PJ[pe_type] * energy_scale,
        "vector_lanes": parameters["core.vector_lanes"] * t.VECTOR_ELEMENT_PJ * energy_scale,
        "scratchpad": rows * input_bytes * scratchpad_pj_per_byte(parameters),
        "accumulator": cols * 4 * accumulator_pj_per_byte(parameters),
    }
    watts = {name: pj * 1e-12 * hertz * cores for name, pj in per_cycle_pj.items()}
    watts["dram"] = parameters["dram.bandwidth_gbps"] * 1e9 * 8 * t.DRAM_PJ_PER_BIT[parameters["dram.kind"]] * 1e-12
    watts["static"] = parameters["energy.static_mw_per_core"] * 1e-3 * cores
    return watts


def peak_power_w(parameters):
    """The chip's peak power (W): every component of peak_power_breakdown_w but the DRAM devices."""
    return sum(watts for name, watts in peak_power_breakdown_w(parameters).items() if name != "dram")


def peak_tops(parameters):
    """Peak multiply-accumulate throughput, 2 operations per MAC (TOPS, or TFLOPS for floating-point PEs)."""
    return (
        2
        * parameters["core.systolic_rows"]
        * parameters["core.systolic_cols"]
        * parameters["chip.clock_ghz"]
        * parameters["chip.cores"]
        / 1e3
    )
