"""Performance reports: what the simulated device did while a ``profile()`` block ran."""

from dataclasses import dataclass, field

from . import _C


@dataclass
class KernelRecord:
    """One command the device executed: a kernel launch or a copy."""

    name: str
    bytes: int
    instructions: int
    kernel_cycles: int
    device_cycles: int


@dataclass
class Report:
    """Per-command records, totals and CPU-fallback counts for one profiled region."""

    mode: str
    config: str
    clock_ghz: float
    records: list = field(default_factory=list)
    fallbacks: dict = field(default_factory=dict)

    @property
    def kernels(self):
        return [r for r in self.records if not r.name.startswith("copy_")]

    @property
    def total_device_cycles(self):
        return sum(r.device_cycles for r in self.records)

    @property
    def total_kernel_cycles(self):
        return sum(r.kernel_cycles for r in self.kernels)

    def seconds(self, cycles):
        return cycles / (self.clock_ghz * 1e9)

    def table(self):
        """A text table: one line per command, then totals."""
        lines = [
            f"npusim report: config {self.config}, {self.mode} mode, {self.clock_ghz:g} GHz",
            f"{'command':<16}{'bytes':>12}{'instructions':>14}{'kernel cycles':>15}{'device cycles':>15}"
            f"{'time (us)':>12}",
        ]
        for r in self.records:
            lines.append(
                f"{r.name:<16}{r.bytes:>12}{r.instructions:>14}{r.kernel_cycles:>15}{r.device_cycles:>15}"
                f"{self.seconds(r.device_cycles) * 1e6:>12.3f}"
            )
        lines.append(
            f"{'total':<16}{sum(r.bytes for r in self.records):>12}"
            f"{sum(r.instructions for r in self.records):>14}{self.total_kernel_cycles:>15}"
            f"{self.total_device_cycles:>15}{self.seconds(self.total_device_cycles) * 1e6:>12.3f}"
        )
        if self.mode == "functional":
            lines.append("(functional mode computes results only; run with NPUSIM_MODE=timed for cycles)")
        for name, count in sorted(self.fallbacks.items()):
            lines.append(f"CPU fallback: {name} x{count}")
        return "\n".join(lines)


class profile:
    """Context manager collecting a :class:`Report` of everything the device does inside the block."""

    def __enter__(self):
        props = _C.properties(0)
        _C.take_records(0)  # drop what happened before the block
        _C.reset_fallback_counts()
        self.report = Report(props["mode"], props["config"], props["clock_ghz"])
        return self.report

    def __exit__(self, *exc):
        self.report.records = [KernelRecord(**r) for r in _C.take_records(0)]
        self.report.fallbacks = dict(_C.fallback_counts())
        return False
