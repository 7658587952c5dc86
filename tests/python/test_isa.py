"""npusim.isa: the assembler and disassembler from Python."""

import pytest

import npusim.isa as isa


def test_assemble_and_disassemble_round_trip():
    source = "top:\n li r2, 4\n vadd.bf16 r0, r0, r0, r2, 1\n vcvt.f32.bf16 r3, r0, r2\n bne r2, r0, top\n halt\n"
    image = isa.assemble(source)
    assert len(image) == 5 * 8
    listing = isa.disassemble(image)
    assert "vadd.bf16 r0, r0, r0, r2, 1" in listing
    assert "vcvt.f32.bf16 r3, r0, r2" in listing
    assert isa.assemble(listing) == image


def test_assembly_errors_name_file_line_and_column():
    with pytest.raises(isa.AssemblyError) as error:
        isa.assemble("halt\n vexp.i32 r1, r2, r3\n", "kernel.s")
    assert str(error.value).startswith("kernel.s:2:2: 'vexp' does not take type i32; it takes f32 f16 bf16")
    assert str(error.value).endswith("\n ^")
    assert isinstance(error.value, ValueError)


def test_decode_rejects_undefined_encodings():
    assert isa.decode(int.from_bytes(isa.assemble("halt\n"), "little")) == "halt"
    with pytest.raises(isa.IllegalInstruction, match="undefined opcode 0xff"):
        isa.decode(0xFF)
    with pytest.raises(ValueError, match="whole number of 8-byte words"):
        isa.disassemble(b"\x00" * 12)
    with pytest.raises(TypeError):  # a word is decode's; bytes(word) would have been `word` zero bytes
        isa.disassemble(0x1800002420)
    assert isa.disassemble(bytearray(isa.assemble("halt\n"))).strip() == "halt"


def test_instruction_table_lists_every_instruction_with_its_types():
    table = {row["mnemonic"]: row for row in isa.instruction_table()}
    assert table["vexp"]["types"] == ["f32", "f16", "bf16"]
    assert table["add"]["types"] == []
    assert len({row["opcode"] for row in table.values()}) == len(table)
