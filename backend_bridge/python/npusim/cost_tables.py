"""The published figures the energy and area model (costs.py) is built from, each with its source (docs/costs.md).

Figures are for 45 nm unless a row says otherwise; ``technology_scale`` carries them to other nodes. A figure marked
"derived" is computed here from the published ones by the rule its comment gives; one marked "estimate" has no
published source in this table yet and says what it rests on.
"""

import math

# Horowitz, "Computing's Energy Problem (and what we can do about it)", ISSCC 2014, 45 nm at 0.9 V: energy (pJ) and
# area (um^2) of one operation.
HOROWITZ_PJ = {
    "int8_add": 0.03,
    "int32_add": 0.1,
    "fp16_add": 0.4,
    "fp32_add": 0.9,
    "int8_mult": 0.2,
    "int32_mult": 3.1,
    "fp16_mult": 1.1,
    "fp32_mult": 3.7,
}
HOROWITZ_UM2 = {
    "int8_add": 36,
    "int32_add": 137,
    "fp16_add": 1360,
    "fp32_add": 4184,
    "int8_mult": 282,
    "int32_mult": 3495,
    "fp16_mult": 1640,
    "fp32_mult": 7700,
}
# Horowitz 2014: a 64-bit read of an 8 KB, 32 KB and 1 MB SRAM (pJ). Energy grows about as the square root of the
# capacity between them (x2 for x4, x5 for x32): sram_pj_per_byte fits that.
HOROWITZ_SRAM_64BIT_PJ = {8: 10.0, 32: 20.0, 1024: 100.0}  # KB -> pJ

# Multiplier energy and area grow with the square of the significand width (an array multiplier's partial products):
# the rule for the multipliers Horowitz does not list.
_INT16_FROM_INT8 = (16 / 8) ** 2  # derived
_BF16_FROM_FP16 = (8 / 11) ** 2  # derived: bf16 has an 8-bit significand, fp16 11 bits


def _mac(mult_pj, add_pj):
    return mult_pj + add_pj


# Energy of one multiply-accumulate by input type (pJ, 45 nm): the multiplier, then the accumulator's adder (int32 for
# integer inputs, fp32 for floating point: npusim accumulates in int32 / fp32).
MAC_PJ = {
    "int8": _mac(HOROWITZ_PJ["int8_mult"], HOROWITZ_PJ["int32_add"]),
    "int16": _mac(HOROWITZ_PJ["int8_mult"] * _INT16_FROM_INT8, HOROWITZ_PJ["int32_add"]),  # derived
    "fp16": _mac(HOROWITZ_PJ["fp16_mult"], HOROWITZ_PJ["fp32_add"]),
    "bf16": _mac(HOROWITZ_PJ["fp16_mult"] * _BF16_FROM_FP16, HOROWITZ_PJ["fp32_add"]),  # derived
    "fp32": _mac(HOROWITZ_PJ["fp32_mult"], HOROWITZ_PJ["fp32_add"]),
}
# Area of one PE's multiplier and accumulating adder by the type it is built for (um^2, 45 nm). Logic only: the PE's
# operand registers and wiring are not in Horowitz's figures (docs/costs.md compares the result with real chips).
PE_UM2 = {
    "int8": HOROWITZ_UM2["int8_mult"] + HOROWITZ_UM2["int32_add"],
    "int16": HOROWITZ_UM2["int8_mult"] * _INT16_FROM_INT8 + HOROWITZ_UM2["int32_add"],  # derived
    "fp16": HOROWITZ_UM2["fp16_mult"] + HOROWITZ_UM2["fp32_add"],
    "bf16": HOROWITZ_UM2["fp16_mult"] * _BF16_FROM_FP16 + HOROWITZ_UM2["fp32_add"],  # derived
    "fp32": HOROWITZ_UM2["fp32_mult"] + HOROWITZ_UM2["fp32_add"],
}
# A vector lane is an fp32 multiplier and adder (Horowitz); an element of ordinary vector work (add, compare, select,
# convert, multiply) costs one fp32 add's energy.
VECTOR_LANE_UM2 = HOROWITZ_UM2["fp32_mult"] + HOROWITZ_UM2["fp32_add"]
VECTOR_ELEMENT_PJ = HOROWITZ_PJ["fp32_add"]
# Division and special functions (exp, log, tanh, rsqrt, ...): derived as 8 fp32 multiply-adds per element, what a
# range reduction and a degree-6 polynomial, or a seed and Newton iterations, take.
SPECIAL_FUNCTION_FMAS = 8
VECTOR_SPECIAL_PJ = SPECIAL_FUNCTION_FMAS * (HOROWITZ_PJ["fp32_mult"] + HOROWITZ_PJ["fp32_add"])

# SRAM area: the 6T bit cell of Intel's 45 nm process, 0.346 um^2 (Mistry et al., IEDM 2007), over an array
# efficiency of 0.7 (estimate: bit cells' share of a macro, periphery the rest; CACTI's macros land near it).
SRAM_BITCELL_UM2 = 0.346
SRAM_ARRAY_EFFICIENCY = 0.7

# DRAM energy per bit moved, activation amortised over the open page as streaming accesses do (pJ/bit). The figure
# for the chip's memory, not scaled by the logic node.
DRAM_PJ_PER_BIT = {
    "ddr3": 20.0,  # Horowitz 2014: 1.3-2.6 nJ per 64-bit DRAM access, its lower end (row hits)
    # Accelergy's DRAM table (Wu, Emer and Sze, ICCAD 2019; its CACTI plug-in, hwcomponents_cacti.py: "LPDDR4": 8)
    "lpddr4": 8.0,
    "lpddr5": 8.0,  # estimate: LPDDR4's carried over (no published per-bit figure for LPDDR5 found; none lower)
    "hbm2": 3.9,  # O'Connor et al., "Fine-Grained DRAM", MICRO 2017: HBM2's energy per bit
    "hbm3": 3.9,  # estimate: HBM2's carried over (no published per-bit figure for HBM3 found; none lower)
}
# Activation's share of those figures (the rest is moving the data across the die and the I/O): used to report it
# apart. O'Connor et al. 2017's HBM2 breakdown at its applications' average row locality: 1.21 of 3.92 pJ/bit is
# activation (the rest on-die data movement 2.24 and I/O 0.30); applied to every kind (an estimate for the others).
DRAM_ACTIVATION_SHARE = 0.3

# DRAM PHY area per channel at the chip's edge (mm^2, 7 nm-class). Estimate: PHYs are sized by their shoreline, and
# Synopsys gives HBM2E "60+ gigabytes per second per millimeter of die edge", LPDDR5 a tenth of that (G. Allan,
# SemiEngineering, "DRAM Tradeoffs: Speed Vs. Energy"): an HBM channel of 128 bits at 3.2 Gb/s takes about 0.85 mm of
# edge, an LPDDR x16 channel about 2 mm; the PHY's depth (about 1 mm for HBM, 0.5 mm for LPDDR) is the estimate, and
# a DDR3 channel (64 bits) is taken as twice an LPDDR one.
DRAM_PHY_MM2_PER_CHANNEL = {"ddr3": 2.0, "lpddr4": 1.0, "lpddr5": 1.0, "hbm2": 0.8, "hbm3": 0.8}
DRAM_PHY_NODE_NM = 7  # PHYs shrink little with the node: analog and bumps; not scaled

# A small in-order scalar core (the command processor; each NPU core's scalar unit), the class of lowRISC's Ibex or an
# ARM Cortex-M0: Ibex's "small" configuration (RV32IMC) is 26.06 kGE (Ibex README, Yosys synthesis), and a gate
# equivalent (NAND2_X1) is 0.57 x 1.4 um in the Nangate 45 nm Open Cell Library: 0.021 mm^2 of logic (derived). Its
# instruction and data memories (estimate: 4 KiB each) are SRAM, by the SRAM rule above.
SCALAR_CORE_LOGIC_MM2 = 26.06e3 * 0.57 * 1.4 * 1e-6
SCALAR_CORE_MEMORY_KIB = 8
# On-chip network: per core, a link of link_bytes_per_cycle bytes with its router, 0.05 mm^2 per 16 bytes of link
# width at 45 nm (derived): OpenPiton's mesh routers (IBM 32 nm) take 0.95-0.98 % of a tile each (Balkind et al.,
# "OpenPiton: An Open Source Hardware Platform For Your Research", CACM 2019, Fig. 6), at most 36 mm^2 / 25 tiles
# (WikiChip, "Piton": a 6 x 6 mm die of 25 cores, 64-bit networks): 0.014 mm^2 per 8-byte router, 0.031 at 45 nm by
# Stillmaker's factor, so at most 0.06 per 16 bytes. Deeply buffered routers are larger (Intel's 80-core chip: 0.34
# mm^2 for 39-bit ports at 65 nm).
NOC_MM2_PER_16_BYTES = 0.05

# Stillmaker and Baas, "Scaling equations for the accurate prediction of CMOS device performance from 180 nm to 7 nm",
# Integration 58 (2017): area relative to 45 nm, and energy as a * Vdd^2 + b * Vdd + c, per node.
STILLMAKER_NODES_NM = [130, 90, 65, 45, 32, 20, 16, 14, 10, 7]
STILLMAKER_AREA_FROM_45 = [6.4, 2.8, 1.5, 1.0, 0.46, 0.21, 0.19, 0.17, 0.1, 0.059]
STILLMAKER_ENERGY_POLYNOMIAL = [
    (7.171, -6.709, 2.904),
    (4.762, -4.781, 2.092),
    (3.755, -4.398, 1.975),
    (1.103, -0.362, 0.2767),
    (0.9559, -0.7823, 0.471),
    (0.373, -0.1582, 0.04104),
    (0.2958, -0.1241, 0.03024),
    (0.2363, -0.09675, 0.02239),
    (0.2068, -0.09311, 0.02375),
    (0.1776, -0.09097, 0.02447),
]
SCALING_VDD = 0.8  # the supply both ends of an energy scaling are evaluated at


def _interpolate(node_nm, values):
    """`values` (one per Stillmaker node) at `node_nm`, linear between the two nodes around it."""
    nodes = STILLMAKER_NODES_NM
    if not nodes[-1] <= node_nm <= nodes[0]:
        raise ValueError(f"technology node {node_nm} nm is outside {nodes[-1]}..{nodes[0]} nm")
    for upper in range(len(nodes) - 1):
        high, low = nodes[upper], nodes[upper + 1]
        if low <= node_nm <= high:
            weight = (high - node_nm) / (high - low)
            return values[upper] * (1 - weight) + values[upper + 1] * weight
    return values[-1]


def technology_scale(node_nm):
    """(area, energy) factors from 45 nm to `node_nm` (Stillmaker and Baas 2017)."""
    energy = [a * SCALING_VDD**2 + b * SCALING_VDD + c for a, b, c in STILLMAKER_ENERGY_POLYNOMIAL]
    area = _interpolate(node_nm, STILLMAKER_AREA_FROM_45)
    return area, _interpolate(node_nm, energy) / _interpolate(45, energy)


def sram_pj_per_byte(bank_kib):
    """Energy to read or write one byte of an SRAM bank of `bank_kib` KiB at 45 nm: Horowitz's 64-bit reads, as the
    square root of the capacity through the 8 KB point (a bank's bit lines and word lines grow with its side)."""
    return HOROWITZ_SRAM_64BIT_PJ[8] / 8 * math.sqrt(max(bank_kib, 1e-3) / 8)
