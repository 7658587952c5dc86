"""The npusim instruction set from Python: assemble and disassemble programs with npusim's own toolchain.

    >>> import npusim.isa
    >>> image = npusim.isa.assemble("li r2, 4\\n vadd.f32 r0, r0, r0, r2\\n halt\\n")
    >>> print(npusim.isa.disassemble(image))

A program image is bytes: 64-bit little-endian instruction words (docs/assembly.md). Errors are ``AssemblyError``
(``file:line:col: message`` with a caret line) and ``IllegalInstruction``, both ``ValueError``s.
"""

from __future__ import annotations

import os

from npusim._native import AssemblyError, IllegalInstruction, instruction_table
from npusim._native import assemble as _assemble
from npusim._native import decode as _decode
from npusim._native import disassemble as _disassemble

__all__ = ["AssemblyError", "IllegalInstruction", "assemble", "disassemble", "decode", "instruction_table"]


def assemble(source: str, file_name: str = "<string>", include_dirs: list[str | os.PathLike] | None = None) -> bytes:
    """Assembles npusim assembly text into a program image."""
    return _assemble(source, file_name, [os.fspath(d) for d in include_dirs or []])


def disassemble(image: bytes) -> str:
    """Disassembles a program image (any bytes-like object) into assembly that reassembles to the same bytes."""
    # memoryview, not bytes(): bytes(n) of an int n (an instruction word passed by mistake) is n zero bytes.
    return _disassemble(memoryview(image).tobytes())


def decode(word: int) -> str:
    """The assembly text of one instruction word; raises IllegalInstruction for an undefined encoding."""
    return _decode(word)
