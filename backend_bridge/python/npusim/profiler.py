"""Performance reports: what the simulated device did while a ``profile()`` block ran.

The statistics of each kernel are declared once in C++ (``emulator/include/npusim/emulator/statistics.def``);
:func:`statistics` lists them with their units and descriptions.
"""

import json
from dataclasses import asdict, dataclass, field

from . import _C, costs

SCHEMA_VERSION = 1
_ENGINES = ("dma", "vector", "matrix")  # the engines whose utilisation the table shows


def statistics():
    """Every per-kernel statistic as ``(name, unit, description)``."""
    return [tuple(row) for row in _C.statistics()]


@dataclass
class KernelRecord:
    """One command the device executed: a kernel launch or a copy. Cycles are at the chip's clock."""

    name: str
    scope: str  # the nn.Module (path from the outermost module) that issued the command, or ""
    op: str  # the PyTorch operator (aten::mm, ...) that issued the command, or ""
    bytes: int
    start_cycle: int
    cores: int
    kernel_cycles: int
    device_cycles: int
    stats: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)
    first_hazard: str = ""  # timed mode: engines touching the same buffer bytes without a fence between
    stream: int = 0  # the stream the command ran on (0: the default stream)
    device: int = 0  # the npusim device (npusim:0, npusim:1, ...) it ran on

    @property
    def is_copy(self):
        return self.name.startswith("copy_")

    @property
    def instructions(self):
        return sum(value for name, value in self.stats.items() if name.startswith("instructions_"))

    def utilisation(self, engine):
        """Fraction of the kernel's cycles the engine was busy, averaged over the cores it ran on (timed mode)."""
        available = self.kernel_cycles * max(self.cores, 1)
        return self.stats.get(f"busy_cycles_{engine}", 0) / available if available else 0.0


@dataclass
class Report:
    """Per-command records, totals and CPU-fallback counts for one profiled region."""

    mode: str
    config: str
    clock_ghz: float
    parameters: dict = field(default_factory=dict)  # the chip's configuration, "section.key" -> value
    records: list = field(default_factory=list)
    fallbacks: dict = field(default_factory=dict)

    @property
    def kernels(self):
        return [r for r in self.records if not r.is_copy]

    @property
    def total_device_cycles(self):
        return sum(r.device_cycles for r in self.records)

    @property
    def total_kernel_cycles(self):
        return sum(r.kernel_cycles for r in self.kernels)

    def seconds(self, cycles):
        return cycles / (self.clock_ghz * 1e9)

    def energy_breakdown_uj(self, record):
        """Energy of one command by component in microjoules (costs.py, docs/costs.md): MACs by input type, vector
        work, scratchpad and accumulator bytes, DRAM transfer and activation, static power while the kernel runs."""
        parts = costs.energy_breakdown_pj(
            self.parameters,
            record.stats,
            record.bytes,
            record.cores,
            self.seconds(record.kernel_cycles),
            is_copy=record.is_copy,
        )
        return {name: picojoules * 1e-6 for name, picojoules in parts.items()}

    def energy_uj(self, record):
        """Energy of one command in microjoules: the sum of its components (energy_breakdown_uj)."""
        return sum(self.energy_breakdown_uj(record).values())

    def area_mm2(self):
        """The chip's area estimate (costs.py), by component and in total."""
        return costs.area_breakdown_mm2(self.parameters)

    def peak_gflops(self):
        p = self.parameters
        return 2 * p["core.systolic_rows"] * p["core.systolic_cols"] * p["chip.clock_ghz"] * p["chip.cores"]

    def roofline(self, record):
        """Where a kernel sits on the chip's roofline: its work (2 x MACs + vector elements), arithmetic intensity
        against DRAM traffic, the bound (compute or memory) and the fraction of it achieved (timed mode)."""
        flops = 2 * record.stats.get("matrix_macs", 0) + record.stats.get("vector_elements", 0)
        intensity = flops / record.bytes if record.bytes else float("inf")
        bandwidth = self.parameters["dram.bandwidth_gbps"]
        bound = min(self.peak_gflops(), bandwidth * intensity)
        seconds = self.seconds(record.kernel_cycles)
        achieved = flops / seconds / 1e9 if seconds else 0.0
        return {
            "flops": flops,
            "intensity_flops_per_byte": intensity,
            "bound": "compute" if bound == self.peak_gflops() else "memory",
            "bound_gflops": bound,
            "achieved_gflops": achieved,
            "fraction_of_bound": achieved / bound if bound else 0.0,
        }

    def plot_roofline(self, path):
        """Writes a roofline plot (PNG) with one point per kernel (timed mode)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        peak, bandwidth = self.peak_gflops(), self.parameters["dram.bandwidth_gbps"]
        points = [(self.roofline(r), r.name) for r in self.kernels if r.kernel_cycles and r.bytes]
        intensities = [p["intensity_flops_per_byte"] for p, _ in points] or [1.0]
        low, high = min(min(intensities) / 4, peak / bandwidth / 4), max(max(intensities) * 4, peak / bandwidth * 4)
        figure, axes = plt.subplots(figsize=(7, 4.5))
        xs = [low * (high / low) ** (k / 200) for k in range(201)]
        axes.loglog(xs, [min(peak, bandwidth * x) for x in xs], color="black", label="roofline")
        for name in sorted({name for _, name in points}):
            chosen = [p for p, n in points if n == name]
            intensity = [p["intensity_flops_per_byte"] for p in chosen]
            axes.scatter(intensity, [p["achieved_gflops"] for p in chosen], label=name)
        axes.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
        axes.set_ylabel("GFLOP/s")
        axes.set_title(f"npusim {self.config}: {peak:g} GFLOP/s, {bandwidth:g} GB/s")
        axes.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)

    def totals(self):
        """Every statistic summed over the kernels, plus cycle and byte totals."""
        summed = {name: sum(r.stats.get(name, 0) for r in self.kernels) for name, _, _ in statistics()}
        summed.update(
            kernel_cycles=self.total_kernel_cycles,
            device_cycles=self.total_device_cycles,
            copy_bytes=sum(r.bytes for r in self.records if r.is_copy),
            seconds=self.seconds(self.total_device_cycles),
            energy_uj=sum(self.energy_uj(r) for r in self.records),
        )
        breakdown = {}
        for record in self.records:
            for name, microjoules in self.energy_breakdown_uj(record).items():
                breakdown[name] = breakdown.get(name, 0.0) + microjoules
        summed["energy_breakdown_uj"] = breakdown
        return summed

    def _totals_by(self, key, unnamed):
        """Commands, bytes, kernel and device cycles per value of key(record), most device time first."""
        groups = {}
        for r in self.records:
            fields = ("commands", "bytes", "kernel_cycles", "device_cycles")
            entry = groups.setdefault(key(r) or unnamed, dict.fromkeys(fields, 0))
            entry["commands"] += 1
            entry["bytes"] += r.bytes
            entry["kernel_cycles"] += r.kernel_cycles
            entry["device_cycles"] += r.device_cycles
        return dict(sorted(groups.items(), key=lambda item: -item[1]["device_cycles"]))

    def by_scope(self):
        """Totals per module path: commands, bytes, kernel and device cycles, most device time first."""
        return self._totals_by(lambda r: r.scope, "(outside any module)")

    def by_op(self):
        """Totals per PyTorch operator (as the dispatcher saw it, after autograd: backward ops included): commands,
        bytes, kernel and device cycles, most device time first."""
        return self._totals_by(lambda r: r.op, "(outside any operator)")

    def fallback_cycles(self):
        """Device cycles charged to each CPU-fallback operator: the copies that moved its data over the host link
        (and any kernels the operator ran besides), keyed like :attr:`fallbacks`."""
        charged = {}
        for name in self.fallbacks:
            base = name.split(".")[0]
            charged[name] = sum(r.device_cycles for r in self.records if r.op.split(".")[0] == base)
        return charged

    def by_kernel(self):
        """Totals per command name (a kernel, or a copy kind): count, bytes, instructions, kernel and device cycles,
        energy, and each engine's utilisation over those kernels; most device time first."""
        groups = {}
        for r in self.records:
            fields = ("count", "bytes", "instructions", "kernel_cycles", "device_cycles", "energy_uj", "core_cycles")
            entry = groups.setdefault(r.name, {**dict.fromkeys(fields, 0), "busy": dict.fromkeys(_ENGINES, 0)})
            entry["count"] += 1
            entry["bytes"] += r.bytes
            entry["instructions"] += r.instructions
            entry["kernel_cycles"] += r.kernel_cycles
            entry["device_cycles"] += r.device_cycles
            entry["energy_uj"] += self.energy_uj(r)
            entry["core_cycles"] += r.kernel_cycles * max(r.cores, 1)
            for engine in _ENGINES:
                entry["busy"][engine] += r.stats.get(f"busy_cycles_{engine}", 0)
        for entry in groups.values():
            busy, available = entry.pop("busy"), entry.pop("core_cycles")
            entry["utilisation"] = {engine: busy[engine] / available if available else 0.0 for engine in _ENGINES}
        return dict(sorted(groups.items(), key=lambda item: -item[1]["device_cycles"]))

    def table(self, max_rows=40):
        """A text table: one line per command with engine utilisation (or, past ``max_rows`` commands, one line per
        kernel with its count), then totals and totals per module."""
        per_kernel = len(self.records) > max_rows
        width = max([14] + [len(r.name) + 1 for r in self.records])
        header = (
            f"{'kernel' if per_kernel else 'command':<{width}}{'count' if per_kernel else '':>7}"
            f"{'bytes':>11}{'instr':>9}{'kernel cyc':>12}{'device cyc':>12}{'time us':>10}"
            f"{'dma%':>6}{'vec%':>6}{'mat%':>6}{'uJ':>9}"
        )
        lines = [f"npusim report: config {self.config}, {self.mode} mode, {self.clock_ghz:g} GHz", header]
        rows = self.by_kernel().items() if per_kernel else [(r.name, self._row(r)) for r in self.records]
        for name, row in rows:
            utilisation = "".join(
                f"{100 * row['utilisation'][engine]:>6.0f}" if row["kernel_cycles"] else f"{'':>6}"
                for engine in _ENGINES
            )
            lines.append(
                f"{name:<{width}}{row['count'] if per_kernel else '':>7}{row['bytes']:>11}{row['instructions']:>9}"
                f"{row['kernel_cycles']:>12}{row['device_cycles']:>12}{self.seconds(row['device_cycles']) * 1e6:>10.2f}"
                f"{utilisation}{row['energy_uj']:>9.2f}"
            )
        lines.append(
            f"{'total':<{width}}{len(self.records) if per_kernel else '':>7}{sum(r.bytes for r in self.records):>11}"
            f"{sum(r.instructions for r in self.records):>9}"
            f"{self.total_kernel_cycles:>12}{self.total_device_cycles:>12}"
            f"{self.seconds(self.total_device_cycles) * 1e6:>10.2f}{'':>18}"
            f"{sum(map(self.energy_uj, self.records)):>9.2f}"
        )
        flops = sum(self.roofline(r)["flops"] for r in self.kernels)
        kernel_seconds = self.seconds(self.total_kernel_cycles)
        if kernel_seconds:
            lines.append(
                f"device time {self.seconds(self.total_device_cycles) * 1e6:.2f} us"
                f" (kernels {kernel_seconds * 1e6:.2f} us)"
                f", {flops / 1e6:.1f} MFLOP at {flops / kernel_seconds / 1e9:.1f} GFLOP/s"
                f" of {self.peak_gflops():g} peak, energy {sum(map(self.energy_uj, self.records)):.1f} uJ"
            )
        if any(r.scope for r in self.records):
            lines.append(f"\n{'module':<40}{'commands':>9}{'bytes':>12}{'device cyc':>12}{'time us':>10}")
            for scope, totals in self.by_scope().items():
                lines.append(
                    f"{scope[-40:]:<40}{totals['commands']:>9}{totals['bytes']:>12}{totals['device_cycles']:>12}"
                    f"{self.seconds(totals['device_cycles']) * 1e6:>10.2f}"
                )
        if any(r.op for r in self.records):
            lines.append(f"\n{'operator':<40}{'commands':>9}{'bytes':>12}{'device cyc':>12}{'time us':>10}")
            for op, totals in list(self.by_op().items())[:max_rows]:
                lines.append(
                    f"{op[-40:]:<40}{totals['commands']:>9}{totals['bytes']:>12}{totals['device_cycles']:>12}"
                    f"{self.seconds(totals['device_cycles']) * 1e6:>10.2f}"
                )
        if per_kernel:
            lines.append(
                f"({len(self.records)} commands, totalled per kernel; Report.records and to_json have each one)"
            )
        if self.mode == "functional":
            lines.append("(functional mode computes results only; run with NPUSIM_MODE=timed for cycles)")
        charged = self.fallback_cycles()
        for name, count in sorted(self.fallbacks.items()):
            lines.append(
                f"CPU fallback: {name} x{count}, {self.seconds(charged[name]) * 1e6:.2f} us of device time charged"
                " (its data over the host link)"
            )
        for r in self.kernels:
            if r.first_hazard:
                lines.append(f"hazard in {r.name}: {r.first_hazard}")
        return "\n".join(lines)

    def _row(self, r):
        """One command's figures in by_kernel()'s form."""
        return {
            "bytes": r.bytes,
            "instructions": r.instructions,
            "kernel_cycles": r.kernel_cycles,
            "device_cycles": r.device_cycles,
            "energy_uj": self.energy_uj(r),
            "utilisation": {engine: r.utilisation(engine) for engine in _ENGINES},
        }

    def to_json(self, path):
        """Writes the report as JSON (schema: docs/reports.md)."""
        document = {
            "schema_version": SCHEMA_VERSION,
            "config": self.config,
            "mode": self.mode,
            "clock_ghz": self.clock_ghz,
            "area_mm2": sum(self.area_mm2().values()),
            "area_breakdown_mm2": self.area_mm2(),
            "statistics": [{"name": n, "unit": u, "description": d} for n, u, d in statistics()],
            "records": [
                {
                    **{k: v for k, v in asdict(r).items() if k != "trace"},
                    "energy_uj": self.energy_uj(r),
                    "energy_breakdown_uj": self.energy_breakdown_uj(r),
                    **({} if r.is_copy else {"roofline": self.roofline(r)}),
                }
                for r in self.records
            ],
            "totals": self.totals(),
            "by_op": self.by_op(),
            "by_module": self.by_scope(),
            "fallbacks": self.fallbacks,
            "fallback_cycles": self.fallback_cycles(),
        }
        with open(path, "w") as file:
            json.dump(document, file, indent=1)

    def to_perfetto(self, path):
        """Writes a Chrome trace-event JSON file that Perfetto (ui.perfetto.dev) and chrome://tracing open: a track
        of the PyTorch operators that issued the work, one of the commands the command processor ran, a counter of
        DRAM traffic, and with ``profile(trace=True)`` one track per core engine (DMA, vector, matrix, scalar)."""
        microseconds_per_cycle = 1e-3 / self.clock_ghz
        operators_track = -1
        events = [
            {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": f"npusim:0 ({self.config}, {self.mode})"}},
            {"ph": "M", "pid": 0, "tid": 0, "name": "thread_name", "args": {"name": "commands"}},
            {"ph": "M", "pid": 0, "tid": operators_track, "name": "thread_name", "args": {"name": "host operators"}},
        ]
        # Each run of commands one operator issued becomes one slice on the operators' track.
        run = None
        for r in self.records + [None]:
            if run and (r is None or r.op != run["name"]):
                events.append({"ph": "X", "pid": 0, "tid": operators_track, **run})
                run = None
            if r is not None and r.op:
                start, end = (
                    r.start_cycle * microseconds_per_cycle,
                    (r.start_cycle + r.device_cycles) * microseconds_per_cycle,
                )
                if run is None:
                    run = {"name": r.op, "ts": start, "dur": end - start}
                else:
                    run["dur"] = end - run["ts"]
        tracks = {}
        for r in self.records:
            # DRAM traffic as a counter: the command's bytes over its device time, back to 0 when it ends.
            seconds = self.seconds(r.device_cycles)
            for ts, rate in (
                (r.start_cycle, r.bytes / seconds / 1e9 if seconds else 0.0),
                (r.start_cycle + r.device_cycles, 0.0),
            ):
                events.append(
                    {
                        "ph": "C",
                        "pid": 0,
                        "name": "DRAM traffic",
                        "ts": ts * microseconds_per_cycle,
                        "args": {"GB/s": rate},
                    }
                )
            events.append(
                {
                    "ph": "X",
                    "pid": 0,
                    "tid": 0,
                    "name": r.name,
                    "ts": r.start_cycle * microseconds_per_cycle,
                    "dur": r.device_cycles * microseconds_per_cycle,
                    "args": {"module": r.scope, "bytes": r.bytes, "kernel_cycles": r.kernel_cycles, **r.stats},
                }
            )
            for core, engine, pc, mnemonic, start_ns, end_ns in r.trace:
                track = tracks.setdefault((core, engine), 1 + len(tracks))
                name = r.name if engine == "scalar" else mnemonic
                events.append(
                    {
                        "ph": "X",
                        "pid": 0,
                        "tid": track,
                        "name": name,
                        "ts": start_ns / 1e3,
                        "dur": (end_ns - start_ns) / 1e3,
                        "args": {"pc": hex(pc)},
                    }
                )
        for (core, engine), track in tracks.items():
            name = {"name": f"core{core} {engine}"}
            events.append({"ph": "M", "pid": 0, "tid": track, "name": "thread_name", "args": name})
        with open(path, "w") as file:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, file)


class _ModuleScopes:
    """Stamps each device command with the path of the nn.Module that was running when it was issued."""

    def __init__(self):
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self.stack, self.names = [], {}
        self.handles = [
            register_module_forward_pre_hook(self.enter),
            register_module_forward_hook(self.leave, always_call=True),
        ]

    def enter(self, module, args):
        if not self.stack:  # an outermost module: name everything below it
            root = type(module).__name__
            self.names = {
                id(m): f"{root}.{name} ({type(m).__name__})" if name else root for name, m in module.named_modules()
            }
        self.stack.append(self.names.get(id(module), type(module).__name__))
        _on_every_device(_C.set_scope, self.stack[-1])

    def leave(self, module, args, output):
        if self.stack:
            self.stack.pop()
        _on_every_device(_C.set_scope, self.stack[-1] if self.stack else "")

    def remove(self):
        for handle in self.handles:
            handle.remove()
        _on_every_device(_C.set_scope, "")


def _on_every_device(setter, value):
    for index in range(_C.device_count()):
        setter(value, index)


_open_profiles = []  # innermost last
_module_scopes = None


def _collect():
    """Hands what the device did since the last collection to every open report."""
    records = [
        KernelRecord(**record, device=index) for index in range(_C.device_count()) for record in _C.take_records(index)
    ]
    fallbacks = dict(_C.fallback_counts())
    _C.reset_fallback_counts()
    for open_profile in _open_profiles:
        open_profile.report.records.extend(records)
        for name, count in fallbacks.items():
            open_profile.report.fallbacks[name] = open_profile.report.fallbacks.get(name, 0) + count


class profile:
    """Context manager collecting a :class:`Report` of everything the device does inside the block. Blocks nest: an
    outer report also gets what inner ones saw.

    ``trace=True`` also records every tile instruction's engine activity (timed mode) for :meth:`Report.to_perfetto`.
    """

    def __init__(self, trace=False):
        self.trace = trace

    def __enter__(self):
        props = _C.properties(0)
        if _open_profiles:
            _collect()
        else:
            for index in range(_C.device_count()):
                _C.take_records(index)  # nothing was recording; drop leftovers
            _C.reset_fallback_counts()
        self.report = Report(props["mode"], props["config"], props["clock_ghz"], dict(_C.device_configuration(0)))
        _open_profiles.append(self)
        self._update_device()
        return self.report

    def __exit__(self, exc_type, exc, traceback):
        import torch

        try:
            if exc_type is None:  # an exception leaving the block (Ctrl-C, say) goes first; device errors wait
                for index in range(_C.device_count()):
                    torch.npusim.synchronize(index)  # raises the error of a kernel that failed inside the block
        finally:  # the report keeps what ran, whatever ended the block
            _collect()
            _open_profiles.remove(self)
            self._update_device()
        return False

    @staticmethod
    def _update_device():
        global _module_scopes
        _on_every_device(_C.set_recording, bool(_open_profiles))
        _on_every_device(_C.set_tracing, any(p.trace for p in _open_profiles))
        if _open_profiles and _module_scopes is None:
            _module_scopes = _ModuleScopes()
            _C.set_operator_naming(True)
        elif not _open_profiles and _module_scopes is not None:
            _module_scopes.remove()
            _module_scopes = None
            _C.set_operator_naming(False)
