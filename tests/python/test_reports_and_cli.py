"""Performance reports, traces and the npusim command."""

import json
import pathlib
import subprocess
import sys
import textwrap

from conftest import run_python

PROFILED_MLP = """
    import json, sys, torch, npusim
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8)).to("npusim")
    with torch.no_grad(), npusim.profile(trace=True) as report:
        model(torch.randn(16, 32).to("npusim")).cpu()
    report.to_json(sys.argv[1])
    report.to_perfetto(sys.argv[2])
"""


def run_profiled(tmp_path, mode):
    report_path, trace_path = tmp_path / "report.json", tmp_path / "trace.json"
    script = tmp_path / "profiled.py"
    script.write_text(textwrap.dedent(PROFILED_MLP))
    process = subprocess.run(
        [sys.executable, str(script), str(report_path), str(trace_path)],
        capture_output=True,
        text=True,
        # NPUSIM_HAZARDS=error: the emitted kernels must fence every engine-to-engine dependency.
        env={**__import__("os").environ, "NPUSIM_MODE": mode, "NPUSIM_HAZARDS": "error"},
        check=False,
    )
    assert process.returncode == 0, process.stderr
    return json.loads(report_path.read_text()), json.loads(trace_path.read_text())


def test_timed_report_figures_are_consistent(tmp_path):
    report, _ = run_profiled(tmp_path, "timed")
    assert report["schema_version"] == 1 and report["mode"] == "timed"
    declared = {row["name"] for row in report["statistics"]}
    kernels = [r for r in report["records"] if not r["name"].startswith("copy_")]
    # Each linear layer is one GEMM kernel with its bias added in the epilogue.
    assert [k["name"] for k in kernels] == ["matmul_f32+bias", "max_f32", "matmul_f32+bias"]
    for kernel in kernels:
        stats = kernel["stats"]
        assert set(stats) == declared
        assert kernel["bytes"] == stats["dram_bytes_read"] + stats["dram_bytes_written"] > 0
        # The scalar unit either issues or waits: its issue cycles and stalls make up the kernel's cycles.
        scalar_time = stats["busy_cycles_scalar"] + sum(v for k, v in stats.items() if k.startswith("stall_cycles"))
        assert abs(scalar_time - kernel["kernel_cycles"]) <= 4, kernel
        for engine in ("dma", "vector", "matrix"):
            assert stats[f"busy_cycles_{engine}"] <= kernel["kernel_cycles"]
        assert kernel["device_cycles"] > kernel["kernel_cycles"] > 0
    assert report["totals"]["kernel_cycles"] == sum(k["kernel_cycles"] for k in kernels)
    assert report["totals"]["busy_cycles_matrix"] == sum(k["stats"]["busy_cycles_matrix"] for k in kernels) > 0


def test_energy_and_roofline_follow_the_counted_work(tmp_path):
    report, _ = run_profiled(tmp_path, "timed")
    kernels = [r for r in report["records"] if not r["name"].startswith("copy_")]
    assert report["totals"]["energy_uj"] == sum(r["energy_uj"] for r in report["records"]) > 0
    matmul = kernels[0]
    # 16 x 32 @ 32 x 48: every multiply-accumulate counted once.
    assert matmul["stats"]["matrix_macs"] == 16 * 32 * 48
    assert matmul["roofline"]["flops"] == 2 * 16 * 32 * 48 + 16 * 48  # and the epilogue's bias adds
    assert 0 < matmul["roofline"]["achieved_gflops"] <= matmul["roofline"]["bound_gflops"]
    relu = kernels[1]
    assert relu["stats"]["vector_elements"] == 16 * 48
    assert relu["roofline"]["bound"] == "memory"


def test_roofline_plot_is_written(tmp_path):
    code = f"""
        import torch, npusim
        a = torch.randn(64, 64).to("npusim")
        with npusim.profile() as report:
            torch.relu(a @ a)
        report.plot_roofline({str(tmp_path / "roofline.png")!r})
    """
    process = run_python(code, NPUSIM_MODE="timed")
    assert process.returncode == 0, process.stderr
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_perfetto_trace_has_command_and_engine_tracks(tmp_path):
    _, trace = run_profiled(tmp_path, "timed")
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert names == {"host operators", "commands", "core0 scalar", "core0 dma", "core0 vector", "core0 matrix"}
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in slices} >= {"matmul_f32+bias", "mx.mac.f32", "dma.ld.b32", "vmax.f32", "aten::addmm"}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in slices)
    traffic = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "DRAM traffic"]
    assert traffic and max(e["args"]["GB/s"] for e in traffic) > 0


def test_functional_report_counts_instructions_without_cycles(tmp_path):
    report, _ = run_profiled(tmp_path, "functional")
    kernels = [r for r in report["records"] if not r["name"].startswith("copy_")]
    matmuls = [k for k in kernels if k["name"].startswith("matmul_f32")]
    assert matmuls and all(k["kernel_cycles"] == 0 and k["stats"]["instructions_matrix"] > 0 for k in matmuls)


CUDA_SCRIPT = """
import sys
import torch

from helper import scale  # a module beside the script

assert torch.cuda.is_available() and torch.cuda.device_count() == 1
print("device name", torch.cuda.get_device_name())
device = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()).cuda()
torch.save(model.state_dict(), sys.argv[2])
model.load_state_dict(torch.load(sys.argv[2], map_location="cuda"))
torch.cuda.manual_seed(0)
with torch.random.fork_rng(device_type="cuda"):
    x = torch.randn(4, 16, device="cuda")  # drawn on the chip, from npusim's generator
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
y = model(x) * scale
end.record()
torch.cuda.synchronize()
assert start.elapsed_time(end) > 0  # simulated milliseconds
assert y.is_cuda and y.device.type == "npusim", y.device
print("script result", tuple(y.shape), sys.argv[1])
"""


def test_npusim_run_maps_a_cuda_script_onto_the_npu(tmp_path):
    script = tmp_path / "cuda_script.py"
    script.write_text(CUDA_SCRIPT)
    (tmp_path / "helper.py").write_text("scale = 2.0\n")
    report_path, checkpoint = tmp_path / "report.json", tmp_path / "model.pt"
    command = ["npusim", "run", "--mode", "timed", "--map-device", "cuda", "--report", str(report_path)]
    process = subprocess.run(
        [*command, str(script), "x", str(checkpoint)], capture_output=True, text=True, check=False, cwd="/"
    )
    assert process.returncode == 0, process.stderr
    assert "device name npusim default" in process.stdout
    assert "script result (4, 16) x" in process.stdout
    assert "npusim report: config default, timed mode" in process.stdout
    report = json.loads(report_path.read_text())
    assert report["fallbacks"] == {}
    assert "matmul_f32+bias" in {r["name"] for r in report["records"]}


def test_npusim_run_returns_the_scripts_exit_code_and_still_reports(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("raise SystemExit(3)\n")
    assert subprocess.run(["npusim", "run", str(script)], capture_output=True, check=False).returncode == 3
    script.write_text("import torch\ntorch.ones(4).to('npusim')\nraise SystemExit('it went wrong')\n")
    process = subprocess.run(["npusim", "run", str(script)], capture_output=True, text=True, check=False)
    assert process.returncode == 1
    assert "it went wrong" in process.stderr
    assert "copy_h2d" in process.stdout  # the report of what ran before the failure


def test_a_scripts_own_profile_does_not_hide_work_from_npusim_run(tmp_path):
    script = tmp_path / "profiles_itself.py"
    script.write_text(
        "import torch, npusim\n"
        "x = torch.ones(8).to('npusim')\n"
        "with npusim.profile() as inner:\n"
        "    x + x\n"
        "assert [r.name for r in inner.kernels] == ['add_f32']\n"
        "x * x\n"
    )
    process = subprocess.run(["npusim", "run", str(script)], capture_output=True, text=True, check=False)
    assert process.returncode == 0, process.stderr
    for command in ("copy_h2d", "add_f32", "mul_f32"):
        assert command in process.stdout


def test_npusim_configs_lists_presets():
    process = run_python("from npusim.cli import main; main(['configs'])")
    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    assert lines[0].split()[0] == "preset"
    rows = lines[1 : lines.index("")]
    assert [line.split()[0] for line in rows] == ["datacenter", "default", "edge", "eyeriss", "tpu_v1"]
    for row in rows:  # every preset has a positive area and peak power (the last columns: mm^2, peak W, DRAM W)
        area, power, _ = map(float, row.split()[-3:])
        assert area > 0 and power > 0


def test_commands_are_attributed_to_the_module_that_issued_them():
    import torch

    import npusim

    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to("npusim")
    x = torch.ones(2, 8).to("npusim")
    with torch.no_grad(), npusim.profile() as report:
        model(x)
        x + x
    scopes = [(r.name, r.scope) for r in report.kernels]
    assert scopes == [
        ("matmul_f32+bias", "Sequential.0 (Linear)"),
        ("max_f32", "Sequential.1 (ReLU)"),
        ("add_f32", ""),
    ]
    totals = report.by_scope()
    assert totals["Sequential.0 (Linear)"]["commands"] == 1
    assert sum(t["device_cycles"] for t in totals.values()) == report.total_device_cycles


def test_long_runs_are_tabled_per_kernel_with_counts_that_add_up():
    import torch

    import npusim

    x = torch.ones(64).to("npusim")
    with npusim.profile() as report:
        for _ in range(30):
            x = x + 1
            x = x * 0.5
    per_kernel = report.by_kernel()
    assert per_kernel["add_f32"]["count"] == 30 and per_kernel["mul_f32"]["count"] == 30
    assert sum(k["count"] for k in per_kernel.values()) == len(report.records)
    assert sum(k["instructions"] for k in per_kernel.values()) == sum(r.instructions for r in report.records)
    assert sum(k["bytes"] for k in per_kernel.values()) == sum(r.bytes for r in report.records)
    table = report.table(max_rows=40)
    assert f"({len(report.records)} commands, totalled per kernel" in table
    assert any(line.split()[:2] == ["add_f32", "30"] for line in table.splitlines())
    assert "totalled per kernel" not in report.table(max_rows=len(report.records))  # short enough: every command


def test_the_readme_demo_trains_the_cnn_natively_in_timed_mode(tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "resnet_training.py"
    report_path = tmp_path / "report.json"
    process = subprocess.run(
        ["npusim", "run", "--mode", "timed", "--map-device", "cuda", "--report", str(report_path), str(example)],
        capture_output=True,
        text=True,
        check=False,
        # Every operator native, and every engine-to-engine dependency of every kernel ordered.
        env={**__import__("os").environ, "NPUSIM_FALLBACK": "error", "NPUSIM_HAZARDS": "error"},
    )
    assert process.returncode == 0, process.stderr
    assert "losses on the device:" in process.stdout
    assert "totalled per kernel" in process.stdout
    report = json.loads(report_path.read_text())
    assert report["fallbacks"] == {}
    assert {"matmul_f32", "nll_loss_f32", "nll_loss_backward_f32"} <= {r["name"] for r in report["records"]}


def test_the_autograd_profiler_shows_each_operators_simulated_time():
    result = run_python(
        """
        import torch, npusim
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("npusim")
        x = torch.randn(32, 64, device="npusim")
        with npusim.profile() as report, torch.autograd.profiler.profile(use_device="npusim") as profiler:
            model(x).sum().backward()
        averages = {e.key: e for e in profiler.key_averages()}
        print(averages["aten::mm"].self_device_time_total, averages["aten::relu"].self_device_time_total)
        profiled_us = sum(e.self_device_time_total for e in averages.values())
        first, last = report.records[0], report.records[-1]
        span = last.start_cycle + last.device_cycles - first.start_cycle
        print(profiled_us, report.seconds(span) * 1e6)
        print(len(averages))
        print("Self NPUSIM" in profiler.key_averages().table(sort_by="self_device_time_total"))
        """,
        NPUSIM_MODE="timed",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    matmul_us, relu_us = map(float, lines[0].split())
    profiled_us, span_us = map(float, lines[1].split())
    assert matmul_us > 0 and relu_us > 0
    # Every operator's device time is the simulated clock between its start and end, so together they cover the
    # span from the first command's start to the last one's end, plus the firmware's work outside any command before
    # the first and after the last (waking and reading the ring; writing the completion and going back to sleep:
    # ten DRAM accesses, about 1.1 us on the default chip). The profiler keeps whole microseconds, so the sum may lose
    # up to 1 us per operator.
    assert span_us - int(lines[2]) <= profiled_us <= span_us + 1.2
    assert lines[3] == "True"


def test_npusim_run_shows_progress_on_long_runs(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(
        "import time, torch\n"
        "x = torch.ones(64, 64, device='npusim')\n"
        "for _ in range(12):\n"
        "    x = x @ x / 64\n"
        "    time.sleep(0.1)\n"
    )
    command = ["npusim", "run", "--mode", "timed", "--progress", "0.25", str(script)]
    process = subprocess.run(command, capture_output=True, text=True, check=False)
    assert process.returncode == 0, process.stderr
    lines = [line for line in process.stderr.splitlines() if line.startswith("npusim: ") and "commands" in line]
    assert len(lines) >= 2, process.stderr
    counts = [int(line.split(", ")[1].split()[0]) for line in lines]
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert all(line.endswith("ms simulated") for line in lines)
    quiet = subprocess.run([*command[:4], "0", str(script)], capture_output=True, text=True, check=False)
    assert "commands" not in quiet.stderr


GOLDEN_PROGRAM = """
import json, torch, npusim
with npusim.profile() as report:
    x = torch.arange(64.0).reshape(8, 8).to("npusim")
    y = torch.relu(x @ x.t() - 100.0).sum(dim=1)
    y.cpu()
print(json.dumps([
    {"name": r.name, "op": r.op, "bytes": r.bytes, "instructions": r.instructions,
     "kernel_cycles": r.kernel_cycles, "device_cycles": r.device_cycles,
     "array_cycles": r.stats.get("array_cycles", 0),
     "energy_breakdown_pj": {k: round(v * 1e6, 3) for k, v in report.energy_breakdown_uj(r).items()}}
    for r in report.records
], indent=1))
"""


def test_golden_report_of_a_small_fixed_program():
    """Every command of a fixed program on the default chip in timed mode, as tests/python/data/golden_report.json
    records it. A deliberate change to the timing model or the kernels regenerates the file (print the program's
    output into it); an accidental one fails here."""
    process = run_python(GOLDEN_PROGRAM, NPUSIM_MODE="timed", NPUSIM_CONFIG="default")
    assert process.returncode == 0, process.stderr
    actual = json.loads(process.stdout[process.stdout.index("[") :])
    golden = json.loads((pathlib.Path(__file__).parent / "data" / "golden_report.json").read_text())
    assert actual == golden


def test_operators_are_totalled_and_fallbacks_charged():
    process = run_python(
        """
        import json, torch, npusim
        x = torch.randn(16, 16, device="npusim", requires_grad=True)
        with npusim.profile() as report:
            (x @ x).relu().sum().backward()
            y = x.detach().abs()
            torch.igammac(y, y)  # no native kernel: the CPU fallback, its copies charged to it
        by_op = report.by_op()
        print(json.dumps({"ops": list(by_op), "op_cycles": sum(t["device_cycles"] for t in by_op.values()),
                          "total": report.total_device_cycles, "fallback": report.fallback_cycles(),
                          "table": "operator" in report.table()}))
        """,
        NPUSIM_MODE="timed",
    )
    assert process.returncode == 0, process.stderr
    figures = json.loads(process.stdout.splitlines()[-1])
    assert {"aten::mm", "aten::relu", "aten::threshold_backward", "aten::igammac"} <= set(figures["ops"])
    assert figures["op_cycles"] == figures["total"] and figures["table"]
    assert figures["fallback"]["aten::igammac.out"] > 0  # the round trip over the host link
