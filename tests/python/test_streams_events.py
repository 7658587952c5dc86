"""Streams and events on npusim, with torch.cuda's interface: streams become current in `with` blocks and order work,
events mark points in it, and Event.elapsed_time is the simulated time between them (timed mode)."""

import pytest
import torch
from conftest import run_python

import npusim  # noqa: F401


def test_streams_become_current_within_with_blocks_and_run_work():
    default = torch.npusim.default_stream()
    assert torch.npusim.current_stream() == default and default.device.type == "npusim"
    side, other = torch.npusim.Stream(), torch.npusim.Stream()
    assert side != other != default
    a = torch.randn(8, 8)
    with torch.npusim.stream(side):
        assert torch.npusim.current_stream() == side
        with other:  # a torch.Stream is a context manager too
            assert torch.npusim.current_stream() == other
        assert torch.npusim.current_stream() == side
        product = a.to("npusim") @ a.to("npusim")
    assert torch.npusim.current_stream() == default
    side.synchronize()  # as with CUDA: the default stream does not wait for the side stream by itself
    assert side.query()
    torch.testing.assert_close(product.cpu(), a @ a)


def test_events_mark_completed_work_and_streams_wait_on_them():
    side = torch.npusim.Stream()
    event = torch.npusim.Event()
    x = torch.ones(1000, device="npusim") * 3
    event.record()
    side.wait_event(event)
    with torch.npusim.stream(side):
        y = x * 2  # on the side stream, after the default stream's work up to the event
    side.wait_stream(torch.npusim.current_stream())
    event.synchronize()
    assert event.query()
    recorded = side.record_event()
    recorded.synchronize()
    assert recorded.query() and side.query()
    assert x.sum().item() == 3000 and y.sum().item() == 6000


def test_the_accelerator_api_sees_npusim():
    assert torch.accelerator.current_accelerator().type == "npusim"
    assert torch.accelerator.device_count() == 1
    torch.accelerator.synchronize()


def test_elapsed_time_is_the_simulated_time_of_the_work_between_the_events():
    result = run_python(
        """
        import torch, npusim
        a, b = torch.randn(256, 256, device="npusim"), torch.randn(256, 256, device="npusim")
        start, end = torch.npusim.Event(enable_timing=True), torch.npusim.Event(enable_timing=True)
        with npusim.profile() as report:
            start.record()
            for _ in range(3):
                a = a @ b
            end.record()
        end.synchronize()
        first, last = report.records[0], report.records[-1]
        span = last.start_cycle + last.device_cycles - first.start_cycle
        clock_ghz = torch.npusim.get_device_properties().clock_ghz
        print(start.elapsed_time(end) * clock_ghz * 1e6, span, len(report.records))
        """,
        NPUSIM_MODE="timed",
    )
    assert result.returncode == 0, result.stderr
    elapsed_cycles, span, commands = map(float, result.stdout.split())
    assert commands == 3
    # The firmware stamps each event while it executes the event's command: the elapsed time is the three kernels'
    # span plus, on each side, the firmware's work between the event command and the nearest kernel: waking for the
    # command, reading its slot, writing its completion and sleeping, some 15 DRAM accesses of about 110 ns on the
    # default chip. So at most 2 x 1750 cycles more.
    assert span <= elapsed_cycles <= span + 3500


def test_elapsed_time_explains_what_it_needs():
    with pytest.raises(RuntimeError, match="timed mode"):
        start, end = torch.npusim.Event(enable_timing=True), torch.npusim.Event(enable_timing=True)
        start.record()
        end.record()
        end.synchronize()  # as with CUDA, both events must have completed
        start.elapsed_time(end)  # this suite runs in functional mode: no clock
    untimed = torch.npusim.Event()
    untimed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):  # PyTorch's own check
        untimed.elapsed_time(untimed)
    with pytest.raises(ValueError, match="must be recorded"):
        torch.npusim.Event(enable_timing=True).elapsed_time(torch.npusim.Event(enable_timing=True))


def test_a_kernel_error_is_raised_by_the_next_synchronising_call():
    a = torch.arange(1, 9).to("npusim")
    broken = a % torch.zeros_like(a)  # returns at once: the kernel traps on the device thread
    with pytest.raises(RuntimeError, match=r"kernel '.*' failed: core \d+, pc 0x[0-9a-f]+ \(.*\): integer division"):
        torch.npusim.synchronize()
    torch.npusim.synchronize()  # reported once
    assert (a % 3).cpu().tolist() == [1, 2, 0, 1, 2, 0, 1, 2], "the device stays usable"
    del broken


def test_launch_blocking_raises_at_the_operator():
    result = run_python(
        """
        import torch, npusim
        a = torch.arange(1, 9).to("npusim")
        try:
            a % torch.zeros_like(a)
        except RuntimeError as error:
            print("raised at the operator:", "integer division by zero" in str(error))
        """,
        NPUSIM_LAUNCH_BLOCKING="1",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "raised at the operator: True"
