"""A simulated npusim chip driven directly, without PyTorch: load programs, move bytes, launch, read the results.

    >>> from npusim.chip import Chip
    >>> chip = Chip("default", mode="timed")
    >>> program = chip.load_program("ld r2, 0(r1)\\n li r3, 42\\n st r3, 0(r2)\\n halt\\n")
    >>> out = chip.allocate(8)
    >>> record = chip.launch(program, [out])
    >>> int.from_bytes(chip.read(out, 8), "little"), record["kernel_cycles"]

Both modes run the same firmware and instruction semantics: ``functional`` is the emulator, ``timed`` the SystemC
model, which adds cycles. A process can build one timed chip in all (SystemC elaborates one design per process),
counting the PyTorch device's.
"""

from __future__ import annotations

from npusim import config_dirs
from npusim import isa as _isa
from npusim._native import ConfigError, DeviceError
from npusim._native import Device as _Device

__all__ = ["Chip", "ConfigError", "DeviceError"]


class Chip:
    """One simulated chip of a configuration (preset name or YAML path) in ``functional`` or ``timed`` mode."""

    def __init__(self, config: str = "default", mode: str = "functional"):
        self.config, self.mode = config, mode
        self._device = _Device(config, mode, config_dirs())

    def allocate(self, nbytes: int) -> int:
        """Device memory for ``nbytes``; returns its device address."""
        return self._device.allocate(nbytes)

    def free(self, address: int) -> None:
        self._device.free(address)

    def write(self, address: int, data) -> None:
        """Copies ``data`` (bytes, bytearray, a NumPy array: anything with the buffer protocol) to the device."""
        self._device.write(address, memoryview(data).cast("B"))

    def read(self, address: int, nbytes: int) -> bytes:
        return self._device.read(address, nbytes)

    def load_program(self, program: str | bytes) -> int:
        """Places a program (assembly text, or an image from ``npusim.isa.assemble``) in device memory."""
        image = _isa.assemble(program) if isinstance(program, str) else bytes(program)
        return self._device.load_program(image)

    def launch(self, program: int, arguments=(), cores: int = 1, name: str = "kernel") -> dict:
        """Runs ``program`` on the cores in the bit mask ``cores``, each starting with r1 = address of the 64-bit
        ``arguments``; returns its record: ``kernel_cycles``, ``device_cycles`` (timed mode), ``instructions``,
        ``bytes`` and ``stats`` (every statistic of emulator/include/npusim/emulator/statistics.def). A trap raises
        DeviceError naming the core, PC, instruction and cause; the chip stays usable."""
        return self._device.launch(name, program, [int(a) for a in arguments], cores)

    def registers(self, core: int = 0) -> list[int]:
        """The core's 32 scalar registers as its last kernel left them."""
        return self._device.registers(core)

    @property
    def elapsed_cycles(self) -> int:
        """Simulated cycles since the chip was built (timed mode; 0 in functional mode)."""
        return self._device.elapsed_cycles()
