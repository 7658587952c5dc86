"""Random and malformed calls into npusim's Python-facing entry points that need no PyTorch — `npusim.isa`
(assemble, disassemble, decode) and `npusim.chip.Chip` (allocate, free, write, read, load_program, launch, registers)
— each end in a result or a Python exception, never a crash or a hang, and the chip stays usable. The calls run in a
child interpreter with a fixed seed, so a crash fails the test with the call that caused it;
NPUSIM_FUZZ_CALLS=1000000 runs a longer campaign."""

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import random, sys, tempfile
    from pathlib import Path
    from npusim import isa
    from npusim.chip import Chip

    seed, calls, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    # The default chip with a small watchdog, so that a random program that loops traps quickly.
    config = Path(tempfile.mkdtemp()) / "fuzz.yaml"
    config.write_text(
        "name: fuzz\\nchip:\\n  cores: 2\\ndram:\\n  capacity_mib: 64\\nruntime:\\n  watchdog_instructions: 20000\\n"
    )
    chip = Chip(str(config), mode=mode)

    SEEDS = [
        "ld r2, 0(r1)\\nli r3, 42\\nst r3, 0(r2)\\nhalt\\n",
        "li r2, 16\\nvfill.f32 r0, r2, r0\\nhalt\\n",
        "loop:\\n addi r2, r2, 1\\n jal r0, loop\\n",
        "ld r2, 0(r1)\\nld r3, 8(r1)\\ndma.ld r0, r2, r3\\nfence\\nhalt\\n",
        "csrr r2, coreid\\nbarrier\\nhalt\\n",
    ]
    EDGES = [0, 1, 7, 8, 63, 64, 255, 256, 4095, 4096, 1 << 20, (1 << 31) - 1, 1 << 31, 1 << 32, (1 << 63) - 1,
             1 << 63, (1 << 64) - 1, -1, -(1 << 63), 1 << 64]
    TOKENS = ["r", "r31", "r32", "r-1", ",", "(", ")", ":", ".", "0x", "-", "halt", "li", "vadd.f32", "dma.ld",
              ".word", ".include", "\\n", " ", "#", "999999999999999999999", "\\0", "\\xff", "é", "label"]
    live, programs = [], []
    # Loaded first (program images stay for the chip's life, and a long run fills their region); random writes may
    # land on it, so it is written again before it runs at the end.
    known_image = isa.assemble(SEEDS[0])
    known = chip.load_program(known_image)
    ALLOWED = (ValueError, RuntimeError, OverflowError, MemoryError, TypeError, IndexError)

    def number():
        return rng.choice(EDGES) if rng.random() < 0.4 else rng.getrandbits(rng.choice([4, 8, 16, 32, 64]))

    def address():
        if live and rng.random() < 0.6:
            return rng.choice(live) + rng.choice([0, 0, 0, 8, -8, 256, 1 << 20])
        return number()

    def mutated_source():
        text = rng.choice(SEEDS)
        for _ in range(rng.randint(0, 6)):
            at = rng.randint(0, len(text))
            action = rng.random()
            if action < 0.4:
                text = text[:at] + rng.choice(TOKENS) + text[at:]
            elif action < 0.7:
                text = text[:at] + text[at + rng.randint(1, 4):]
            else:
                text = text[:at] + chr(rng.randint(1, 0x2FF)) + text[at + 1:]
        return text

    def random_bytes():
        return bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 7, 8, 16, 64, 200])))

    def call():
        kind = rng.randrange(10)
        if kind == 0:
            return "assemble", isa.assemble, (mutated_source(),)
        if kind == 1:
            return "disassemble", isa.disassemble, (random_bytes(),)
        if kind == 2:
            return "decode", isa.decode, (number(),)
        if kind == 3:
            return "allocate", chip.allocate, (rng.choice([number(), rng.randint(1, 4096)]),)
        if kind == 4:
            return "free", chip.free, (address(),)
        if kind == 5:
            return "write", chip.write, (address(), random_bytes())
        if kind == 6:
            return "read", chip.read, (address(), rng.choice([rng.randint(0, 512), number()]))
        if kind == 7:
            program = mutated_source() if rng.random() < 0.7 else random_bytes()
            return "load_program", chip.load_program, (program,)
        if kind == 8:
            program = rng.choice(programs) if programs and rng.random() < 0.8 else number()
            arguments = [address() for _ in range(rng.randint(0, 4))]
            return "launch", chip.launch, (program, arguments, rng.choice([1, 2, 3, number()]))
        return "registers", chip.registers, (rng.choice([0, 1, 2, -1, number()]),)

    for index in range(calls):
        name, function, arguments = call()
        print(index, name, repr(arguments)[:300], flush=True)
        try:
            result = function(*arguments)
        except ALLOWED:
            continue
        if name == "allocate":
            live.append(result)
        elif name == "free":
            live.remove(arguments[0])
        elif name == "load_program":
            programs.append(result)

    # Still usable: a known program runs and its result reads back.
    out = chip.allocate(8)
    chip.write(known, known_image)
    chip.launch(known, [out])
    assert int.from_bytes(chip.read(out, 8), "little") == 42
    print("done", flush=True)
    """
)


def run_campaign(seed, calls, mode):
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(seed), str(calls), mode], capture_output=True, text=True, timeout=900
    )
    lines = child.stdout.splitlines()
    assert child.returncode == 0 and lines[-1:] == ["done"], (
        f"exit status {child.returncode} after call {lines[-1] if lines else '(none)'}\n{child.stderr[-3000:]}"
    )


@pytest.mark.parametrize("mode", ["functional", "timed"])
def test_random_calls_end_in_a_result_or_an_exception(mode):
    run_campaign(seed=2026, calls=int(os.environ.get("NPUSIM_FUZZ_CALLS", "3000")), mode=mode)
