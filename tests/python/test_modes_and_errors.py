"""Functional and timed modes agree; bad settings and unsupported operators fail clearly."""

import json

from conftest import run_python

import npusim
import npusim.isa

COMPUTE = """
    import json, torch, npusim
    a = torch.linspace(-3, 3, 300).reshape(20, 15)
    b = torch.linspace(1, 2, 15)
    with npusim.profile() as report:
        y = ((a.to("npusim") + b.to("npusim")) * a.to("npusim").t().contiguous().t()).cpu()
    print(json.dumps({"values": y.flatten().tolist(), "cycles": report.total_kernel_cycles,
                      "expected": ((a + b) * a).flatten().tolist(), "mode": npusim.properties()["mode"]}))
"""


def test_timed_and_functional_give_identical_values_and_timed_counts_cycles():
    results = {}
    for mode in ("functional", "timed"):
        process = run_python(COMPUTE, NPUSIM_MODE=mode)
        assert process.returncode == 0, process.stderr
        results[mode] = json.loads(process.stdout.splitlines()[-1])
        assert results[mode]["mode"] == mode
    assert results["functional"]["values"] == results["timed"]["values"] == results["timed"]["expected"]
    assert results["functional"]["cycles"] == 0
    assert results["timed"]["cycles"] > 0


def test_unknown_mode_is_a_clear_error_at_first_use():
    process = run_python("import torch; torch.ones(1, device='npusim')", NPUSIM_MODE="fast")
    assert process.returncode != 0
    assert "NPUSIM_MODE: unknown mode 'fast': expected 'functional' or 'timed'" in process.stderr
    # importing torch alone still works
    assert run_python("import torch", NPUSIM_MODE="fast").returncode == 0


def test_bad_config_key_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("chip:\n  cores: 1\ndram:\n  bandwidth_gbs: 10\n")
    process = run_python("import torch; torch.ones(1, device='npusim')", NPUSIM_CONFIG=bad)
    assert process.returncode != 0
    assert f"{bad}:4: unknown key 'dram.bandwidth_gbs'" in process.stderr


def test_unknown_preset_lists_presets():
    process = run_python("import npusim; npusim.init(config='huge')")
    assert process.returncode != 0
    assert "unknown configuration 'huge'; presets: datacenter, default, edge, eyeriss, tpu_v1" in process.stderr


def test_presets_change_the_timing():
    # A bandwidth-bound add of 1 Mi floats (12 MiB moved): the HBM datacenter chip must beat the LPDDR4 edge chip.
    code = """
        import torch, npusim
        x = torch.ones(1 << 20, device="npusim")
        with npusim.profile() as report:
            x + x
        print(report.seconds(report.total_kernel_cycles))
    """
    seconds = {}
    for preset in ("edge", "datacenter"):
        process = run_python(code, NPUSIM_MODE="timed", NPUSIM_CONFIG=preset)
        assert process.returncode == 0, process.stderr
        seconds[preset] = float(process.stdout.splitlines()[-1])
    # edge: 12 MiB at 12.8 GB/s is about 1 ms; datacenter: 12 MiB at 1600 GB/s is about 8 us plus latencies.
    assert 0.9e-3 < seconds["edge"] < 2e-3
    assert seconds["datacenter"] < seconds["edge"] / 20


def test_the_published_chip_presets_run_a_product():
    # tpu_v1's 256 x 256 int8 array and 24 MiB buffer, eyeriss's 12 x 14 array and 108 KiB buffer: emitted kernels fit
    # both, and the product is the CPU's.
    code = """
        import torch, npusim
        torch.manual_seed(0)
        a, b = torch.randn(37, 45), torch.randn(45, 21)
        print(torch.allclose((a.to("npusim") @ b.to("npusim")).cpu(), a @ b, atol=1e-4))
    """
    for preset in ("tpu_v1", "eyeriss"):
        process = run_python(code, NPUSIM_MODE="timed", NPUSIM_CONFIG=preset)
        assert process.returncode == 0, process.stderr
        assert process.stdout.splitlines()[-1] == "True", preset


def test_products_convolutions_and_long_rows_are_hazard_free_on_every_preset():
    """The timed model reports engines touching the same scratchpad bytes without an order between them: on every
    preset, the kernels of ragged products, a linear layer's gradients (a transposed A), convolutions (implicit GEMMs
    where the chip takes them) and a row longer than the scratchpad (double-buffered chunks) must have none, and agree
    with the CPU. The 1 x 1 convolution's gradient of 8 x 64 x 56 x 56 once raced on the datacenter preset (a GEMM
    block of ragged columns only: docs/kernel_builder.md, "Loop back edges")."""
    code = """
        import json, torch, torch.nn.functional as F, npusim
        g = torch.Generator().manual_seed(0)
        def both(f, *tensors):
            leaves = [t.to("npusim").requires_grad_() for t in tensors]
            out = f(*leaves)
            out.backward(torch.ones_like(out))
            cpu = [t.clone().requires_grad_() for t in tensors]
            expected = f(*cpu)
            expected.backward(torch.ones_like(expected))
            ok = torch.allclose(out.detach().cpu(), expected.detach(), rtol=1e-3, atol=1e-3)
            return ok and all(torch.allclose(a.grad.cpu(), b.grad, rtol=1e-3, atol=1e-2) for a, b in zip(leaves, cpu))
        with npusim.profile() as report:
            checks = [
                both(lambda a, b: a @ b, torch.randn(37, 45, generator=g), torch.randn(45, 21, generator=g)),
                both(lambda a, b: a @ b, torch.randn(300, 64, generator=g), torch.randn(64, 200, generator=g)),
                both(lambda x, w: F.conv2d(x, w), torch.randn(8, 64, 56, 56, generator=g),
                     torch.randn(64, 64, 1, 1, generator=g) * 0.1),
                both(lambda x, w: F.conv2d(x, w, padding=1), torch.randn(2, 48, 16, 14, generator=g),
                     torch.randn(16, 48, 3, 3, generator=g) * 0.1),
                both(lambda x: torch.log_softmax(x, -1), torch.randn(2, 300000, generator=g)),
            ]
            torch.npusim.synchronize()
        hazards = [f"{r.name}: {r.first_hazard}" for r in report.kernels if r.first_hazard]
        print(json.dumps({"checks": checks, "hazards": hazards}))
    """
    for preset in npusim._C.presets(npusim.config_dirs()):
        process = run_python(code, NPUSIM_MODE="timed", NPUSIM_CONFIG=preset)
        assert process.returncode == 0, process.stderr
        result = json.loads(process.stdout.splitlines()[-1])
        assert result["hazards"] == [], (preset, result["hazards"])
        assert all(result["checks"]), (preset, result["checks"])


def test_fallback_warns_once_and_can_be_made_an_error():
    code = """
        import warnings, torch, npusim
        x = torch.ones(4).to("npusim")  # a copy, not a device-side fill
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with npusim.profile() as report:
                torch.igammac(x, x); torch.igammac(x, x)
        print(sum("aten::igammac" in str(w.message) for w in caught), report.fallbacks)
        print(torch.igammac(x, x).cpu().tolist() == torch.igammac(torch.ones(4), torch.ones(4)).tolist())
    """
    process = run_python(code)
    assert process.returncode == 0, process.stderr
    assert process.stdout.splitlines() == ["1 {'aten::igammac.out': 2}", "True"]
    process = run_python(code, NPUSIM_FALLBACK="error")
    assert process.returncode != 0
    assert "aten::igammac" not in process.stdout
    assert "aten::igammac.out has no native npusim kernel and NPUSIM_FALLBACK=error forbids" in process.stderr


def test_dump_kernels_writes_assembly(tmp_path):
    process = run_python(
        "import torch; x = torch.ones(16, device='npusim'); (x + x).cpu()", NPUSIM_DUMP_KERNELS=tmp_path
    )
    assert process.returncode == 0, process.stderr
    dumped = list(tmp_path.glob("add_f32_*.s"))
    assert len(dumped) == 1
    text = dumped[0].read_text()
    assert text.startswith("; add_f32 (cores 1)\n; add_f32: sizes [16]") and "vadd.f32" in text
    # The dump is the built program, disassembled: it assembles back to an image that disassembles to the same code.
    image = npusim.isa.assemble(text)
    instructions = [line for line in text.splitlines() if line.startswith("    ")]
    assert [line for line in npusim.isa.disassemble(image).splitlines() if line.startswith("    ")] == instructions
