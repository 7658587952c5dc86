"""npusim.chip: a simulated chip driven from Python without PyTorch, in both modes."""

import struct
import subprocess
import sys
import textwrap

import pytest

from npusim.chip import Chip, ConfigError, DeviceError

# out[k] = exp(in[k]) for 64 floats, then the sum of the row: a typed vector program.
PROGRAM = """
    ld r2, 0(r1)          ; output
    ld r3, 8(r1)          ; input
    li r4, 64
    dma.ld.b32 r0, r3, r4, 4
    fence
    vexp.f32 r0, r0, r4
    li r5, 1
    li r6, 256
    vrsum.f32 r6, r0, r5, r4
    fence
    dma.st.b32 r2, r0, r4, 4
    addi r7, r2, 256
    dma.st.b32 r7, r6, r5, 4
    fence
    li r9, 1234
    halt
"""


def run(mode):
    chip = Chip("default", mode=mode)
    program = chip.load_program(PROGRAM)
    out, data = chip.allocate(260), chip.allocate(256)
    values = [0.125 * k - 4 for k in range(64)]
    chip.write(data, struct.pack("64f", *values))
    record = chip.launch(program, [out, data])
    return chip, record, chip.read(out, 260)


def test_functional_chip_runs_a_program_and_reports_statistics():
    chip, record, result = run("functional")
    exps = struct.unpack("64f", result[:256])
    assert exps[32] == 1.0  # exp(0)
    assert struct.unpack("f", result[256:])[0] == pytest.approx(sum(exps), rel=1e-6)
    assert record["stats"]["instructions_vector"] == 2
    assert record["stats"]["vector_elements"] == 128
    assert record["kernel_cycles"] == 0
    assert chip.registers(0)[9] == 1234


def test_timed_chip_gives_identical_results_with_cycles():
    # A separate process: SystemC builds one timed chip per process.
    here = str(__import__("pathlib").Path(__file__).parent)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {here!r})
        from test_chip import run
        _, functional_record, functional = run("functional")
        _, record, timed = run("timed")
        assert timed == functional
        assert record["kernel_cycles"] > 0 and record["device_cycles"] > record["kernel_cycles"]
        assert record["stats"]["busy_cycles_vector"] > 0
        print("ok")
        """
    )
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == "ok"


def test_trap_names_core_pc_and_instruction_and_the_chip_stays_usable():
    chip = Chip("edge")
    bad = chip.load_program("li r2, 1\n div r3, r2, r0\n halt\n")
    with pytest.raises(DeviceError, match=r"core 0, pc 0x[0-9a-f]+ \(div r3, r2, r0\): integer division by zero"):
        chip.launch(bad, name="divide")
    good = chip.load_program("li r3, 7\n halt\n")
    chip.launch(good)
    assert chip.registers()[3] == 7
    with pytest.raises(IndexError, match="core 1 does not exist"):
        chip.registers(1)


def test_unknown_configuration_is_a_clear_error():
    with pytest.raises(ConfigError, match="no-such-chip"):
        Chip("no-such-chip")
