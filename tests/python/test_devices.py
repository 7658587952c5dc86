"""Several npusim devices in one process (system.devices in the configuration; the datacenter preset has 4): each
has its own memory and runs its own work, tensors move between them, and torch.npusim chooses the current one."""

from conftest import run_python


def test_four_devices_of_the_datacenter_preset():
    result = run_python(
        """
        import torch, npusim
        assert torch.npusim.device_count() == 4 and torch.accelerator.device_count() == 4
        a = torch.randn(64, 64)
        results = []
        for index in range(4):
            x = a.to(f"npusim:{index}")
            y = torch.relu(x @ x) + index
            assert y.device == torch.device("npusim", index)
            results.append(y)
        for index, y in enumerate(results):
            torch.testing.assert_close(y.cpu(), torch.relu(a @ a) + index)
        moved = results[1].to("npusim:3")  # between devices, through the host
        assert moved.device.index == 3
        torch.testing.assert_close(moved.cpu(), results[1].cpu())
        assert torch.npusim.memory_allocated(3) > torch.npusim.memory_allocated(2) > 0

        assert torch.npusim.current_device() == 0
        with torch.npusim.device(2):
            assert torch.npusim.current_device() == 2
            z = torch.ones(8, device="npusim")  # the current device
            stream = torch.npusim.current_stream()
        assert z.device.index == 2 and stream.device.index == 2
        assert torch.npusim.current_device() == 0
        torch.npusim.set_device("npusim:1")
        assert torch.npusim.current_device() == 1
        torch.npusim.synchronize(1)
        properties = torch.npusim.get_device_properties(3)
        assert properties.name == "npusim datacenter" and properties.multi_processor_count == 8
        try:
            torch.npusim.set_device(4)
        except RuntimeError as error:
            print(error)
        """,
        NPUSIM_CONFIG="datacenter",
    )
    assert result.returncode == 0, result.stderr
    assert "npusim device 4 does not exist; there are 4" in result.stdout


def test_a_report_covers_every_device_in_timed_mode():
    result = run_python(
        """
        import torch, npusim
        x0, x1 = torch.randn(128, 128, device="npusim:0"), torch.randn(128, 128, device="npusim:1")
        with npusim.profile() as report:
            (x0 @ x0).cpu(), (x1 @ x1 @ x1).cpu()
        matmuls = [r for r in report.records if r.name == "matmul_f32"]
        assert all(r.device_cycles > r.kernel_cycles > 0 and r.op == "aten::mm" for r in matmuls)
        print(sum(r.device == 0 for r in matmuls), sum(r.device == 1 for r in matmuls))
        """,
        NPUSIM_CONFIG="datacenter",
        NPUSIM_MODE="timed",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "2"]
