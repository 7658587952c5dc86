"""The figures of one run, read from its ``npusim run --report`` JSON: what objectives, constraints, the summary CSV
and the plots use."""

ENGINES = ("dma", "vector", "matrix")

# Figures every run has (area_mm2 from the reports' area model, docs/costs.md).
RUN_METRICS = (
    "seconds",
    "kernel_cycles",
    "device_cycles",
    "energy_uj",
    "edp_uj_s",
    "dram_bytes",
    "copy_bytes",
    "scratchpad_bytes",
    "accumulator_bytes",
    "matrix_macs",
    "vector_elements",
    "instructions",
    "kernels",
    "fallbacks",
    "utilisation_dma",
    "utilisation_vector",
    "utilisation_matrix",
    "achieved_gflops",
    "compute_bound_kernels",
    "memory_bound_kernels",
    "compute_bound_cycles",
    "memory_bound_cycles",
    "area_mm2",
)
# Totalled over a point's workloads; the rest (utilisations, area, achieved rate) are per-chip rates or sizes.
ADDITIVE = {
    "seconds",
    "kernel_cycles",
    "device_cycles",
    "energy_uj",
    "dram_bytes",
    "copy_bytes",
    "scratchpad_bytes",
    "accumulator_bytes",
    "matrix_macs",
    "vector_elements",
    "instructions",
    "kernels",
    "fallbacks",
    "compute_bound_kernels",
    "memory_bound_kernels",
    "compute_bound_cycles",
    "memory_bound_cycles",
}


def area_of(report):
    """The chip area a report states (top level or in its totals), or None while reports carry no area."""
    for holder in (report, report.get("totals", {})):
        if holder.get("area_mm2") is not None:
            return float(holder["area_mm2"])
    return None


def run_metrics(report):
    """{metric: value} for one run's report."""
    totals = report["totals"]
    kernels = [r for r in report["records"] if not r["name"].startswith("copy_")]
    core_cycles = sum(r["kernel_cycles"] * max(r["cores"], 1) for r in kernels)
    flops = sum(r.get("roofline", {}).get("flops", 0) for r in kernels)
    figures = {
        "seconds": totals["seconds"],
        "kernel_cycles": totals["kernel_cycles"],
        "device_cycles": totals["device_cycles"],
        "energy_uj": totals["energy_uj"],
        "edp_uj_s": totals["energy_uj"] * totals["seconds"],
        "dram_bytes": totals.get("dram_bytes_read", 0) + totals.get("dram_bytes_written", 0),
        "copy_bytes": totals["copy_bytes"],
        "scratchpad_bytes": totals.get("scratchpad_bytes", 0),
        "accumulator_bytes": totals.get("accumulator_bytes", 0),
        "matrix_macs": totals.get("matrix_macs", 0),
        "vector_elements": totals.get("vector_elements", 0),
        "instructions": sum(totals.get(f"instructions_{unit}", 0) for unit in ("scalar", *ENGINES)),
        "kernels": len(kernels),
        "fallbacks": sum(report.get("fallbacks", {}).values()),
        "achieved_gflops": flops / totals["seconds"] / 1e9 if totals["seconds"] else 0.0,
        "compute_bound_kernels": sum(r.get("roofline", {}).get("bound") == "compute" for r in kernels),
        "memory_bound_kernels": sum(r.get("roofline", {}).get("bound") == "memory" for r in kernels),
        "compute_bound_cycles": sum(
            r["kernel_cycles"] for r in kernels if r.get("roofline", {}).get("bound") == "compute"
        ),
        "memory_bound_cycles": sum(
            r["kernel_cycles"] for r in kernels if r.get("roofline", {}).get("bound") == "memory"
        ),
        "area_mm2": area_of(report),
    }
    for engine in ENGINES:
        busy = totals.get(f"busy_cycles_{engine}", 0)
        figures[f"utilisation_{engine}"] = busy / core_cycles if core_cycles else 0.0
    return figures


def roofline_bound(figures):
    """What bounds a point: 'compute' or 'memory', whichever class of kernels takes more of its kernel cycles (a
    count of kernels would let many short kernels outvote one long one); None without classified kernels."""
    compute, memory = figures.get("compute_bound_cycles") or 0, figures.get("memory_bound_cycles") or 0
    if not compute and not memory:
        return None
    return "compute" if compute >= memory else "memory"


def combine(per_workload):
    """A point's figures from its runs' figures: additive ones summed, rates averaged, area taken as is."""
    combined = {}
    for name in RUN_METRICS:
        values = [figures[name] for figures in per_workload if figures.get(name) is not None]
        if not values:
            combined[name] = None
        elif name in ADDITIVE:
            combined[name] = sum(values)
        else:
            combined[name] = sum(values) / len(values)
    if combined["energy_uj"] is not None and combined["seconds"] is not None:
        combined["edp_uj_s"] = combined["energy_uj"] * combined["seconds"]
    return combined


def kernel_rows(report):
    """One row per kernel (or copy kind) of a report: count, cycles, seconds, energy, bytes, utilisation."""
    clock_hz = report["clock_ghz"] * 1e9
    rows = {}
    for r in report["records"]:
        row = rows.setdefault(
            r["name"],
            {
                "kernel": r["name"],
                "count": 0,
                "kernel_cycles": 0,
                "device_cycles": 0,
                "energy_uj": 0.0,
                "dram_bytes": 0,
                "flops": 0,
                "core_cycles": 0,
                **{f"busy_cycles_{e}": 0 for e in ENGINES},
            },
        )
        row["count"] += 1
        row["kernel_cycles"] += r["kernel_cycles"]
        row["device_cycles"] += r["device_cycles"]
        row["energy_uj"] += r["energy_uj"]
        row["dram_bytes"] += r["bytes"]
        row["flops"] += r.get("roofline", {}).get("flops", 0)
        row["core_cycles"] += r["kernel_cycles"] * max(r["cores"], 1)
        for engine in ENGINES:
            row[f"busy_cycles_{engine}"] += r["stats"].get(f"busy_cycles_{engine}", 0)
    for row in rows.values():
        row["seconds"] = row["device_cycles"] / clock_hz
        available = row.pop("core_cycles")
        for engine in ENGINES:
            row[f"utilisation_{engine}"] = row.pop(f"busy_cycles_{engine}") / available if available else 0.0
    return list(rows.values())
