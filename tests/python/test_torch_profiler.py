"""torch.profiler with ProfilerActivity.PrivateUse1 (shown as NPUSIM) on npusim: every kernel and copy appears as a
device activity lasting its simulated time, linked to the operator that issued it, in the profiler's table and in
its exported Chrome trace. Run in timed mode, in a fresh process (the mode is chosen once per process)."""

import json

import torch
from conftest import run_python


def test_private_use1_is_a_supported_profiler_activity():
    assert torch.profiler.ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()


def test_kernels_appear_with_their_simulated_time_linked_to_their_operators(tmp_path):
    trace_path = tmp_path / "trace.json"
    process = run_python(
        f"""
        import json, torch, npusim
        from torch.profiler import profile, ProfilerActivity
        x = torch.randn(64, 64, device="npusim")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            with npusim.profile() as report:
                (x @ x).relu().sum().cpu()
        events = {{e.key: e for e in prof.key_averages()}}
        clock_ghz = torch.npusim.get_device_properties().clock_ghz
        (matmul,) = [r for r in report.records if r.name == "matmul_f32"]
        print(json.dumps({{
            "kernel_us": events["matmul_f32"].self_device_time_total,
            "mm_us": events["aten::mm"].self_device_time_total,
            "matmul_total_us": events["aten::matmul"].device_time_total,
            "simulated_us": matmul.device_cycles / clock_ghz / 1e3,
            "table": "NPUSIM" in prof.key_averages().table(row_limit=3),
        }}))
        prof.export_chrome_trace({str(trace_path)!r})
        """,
        NPUSIM_MODE="timed",
    )
    assert process.returncode == 0, process.stderr
    figures = json.loads(process.stdout.splitlines()[-1])
    assert figures["table"]
    assert abs(figures["kernel_us"] - figures["simulated_us"]) < 1e-3  # the simulated duration, not host time
    assert figures["mm_us"] == figures["kernel_us"] == figures["matmul_total_us"]  # linked to aten::mm
    events = json.loads(trace_path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {"matmul_f32", "max_f32", "row_sum_f32"} <= {e["name"] for e in kernels}
    assert all(e["dur"] > 0 for e in kernels)
    assert {e["name"] for e in events if e.get("cat") == "gpu_memcpy"} >= {"copy_d2h"}
