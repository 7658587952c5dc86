"""The device API a first-class PrivateUse1 backend offers, as PyTorch's reference backend (torch_openreg) tests it,
checked on npusim in our own tests: device initialisation state, index-less devices under fake tensors and
torch.compile, generic torch.Stream objects, the torch.accelerator memory and capability functions, streams of one
device waiting for another's, Tensor.set_ without strides, and autocast's refusal of binary cross entropy. The rest of
that suite's behaviours (device switching, events, RNG, pinned memory, storages, serialisation, profiler, OpInfo
machinery, Inductor) are covered by the other test files; NOT_APPLICABLE lists the parts that test openreg itself."""

import pytest
import torch
from conftest import run_python

import npusim  # noqa: F401  registers the device

# torch_openreg tests that check openreg's own extensions rather than the device API, and why they do not apply.
NOT_APPLICABLE = {
    "openreg's custom operators (torch.ops.openreg.*) and autograd functions": "operators of that extension only",
    "dot on openreg's float32 autocast list": "npusim takes CUDA's autocast lists, where dot runs in float16",
    "openreg's generator refusing set_offset / get_offset": "a limitation of openreg; npusim's generator has both",
    "per-tensor backend metadata (BackendMeta) through save/load, fake tensors and Dynamo": (
        "openreg registers its own BackendMeta (de)serialisers; npusim tensors carry no backend metadata"
    ),
    "a Dynamo backend named after the device": "npusim compiles through Inductor (docs/compile.md)",
    "device tensors shared between processes (IPC)": "PyTorch 2.13 has no device IPC path for PrivateUse1",
    "openreg's dummy collective-communication backend": "a c10d backend of that extension only",
    "quantized tensors on the device": "quantized dtypes have no npusim backend (the device capability says so)",
}


def test_initialisation_state():
    result = run_python(
        """
        import torch, npusim
        assert not torch.npusim.is_initialized()  # importing opens no device
        torch.npusim.init()
        assert torch.npusim.is_initialized()
        """
    )
    assert result.returncode == 0, result.stderr


def test_index_less_device_under_fake_tensors_and_torch_compile():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(4, device="npusim") + 1
    assert fake.device == torch.device("npusim", torch.npusim.current_device())

    @torch.compile
    def made_inside():
        return torch.ones(4) * 3

    with torch.device("npusim"):
        result = made_inside()
    assert result.device.type == "npusim"
    torch.testing.assert_close(result.cpu(), torch.full((4,), 3.0))


def test_generic_streams_on_the_current_device():
    result = run_python(
        """
        import torch, npusim
        stream = torch.Stream(device="npusim")
        assert stream.device_index == 0
        with stream:
            y = torch.ones(3, device="npusim") * 2
        stream.synchronize()
        assert y.cpu().tolist() == [2.0, 2.0, 2.0]
        torch.npusim.set_device(2)
        assert torch.Stream(device="npusim").device_index == 2
        assert torch.Stream(device="npusim:1").device_index == 1
        """,
        NPUSIM_CONFIG="datacenter",
    )
    assert result.returncode == 0, result.stderr


def test_accelerator_memory_functions():
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    torch.accelerator.reset_accumulated_memory_stats()
    before = torch.accelerator.memory_allocated()
    block = torch.empty(1 << 20, device="npusim")  # 4 MiB
    assert torch.accelerator.memory_allocated() - before >= block.nbytes
    assert torch.accelerator.max_memory_allocated() >= torch.accelerator.memory_allocated()
    free, total = torch.accelerator.get_memory_info()
    assert total == torch.accelerator.memory_reserved() and free == total - torch.accelerator.memory_allocated()
    stats = torch.accelerator.memory_stats()
    assert stats["allocation.all.allocated"] >= 1 and stats["allocated_bytes.all.allocated"] >= block.nbytes
    peak = torch.accelerator.max_memory_allocated()
    del block
    assert torch.accelerator.memory_allocated() == before
    assert torch.accelerator.max_memory_allocated() == peak
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == before
    assert torch.accelerator.memory_stats()["allocated_bytes.all.freed"] >= 1 << 22


def test_device_capability_lists_the_stored_dtypes():
    supported = torch.accelerator.get_device_capability("npusim:0")["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64} <= set(supported)
    assert torch.qint8 not in supported


def test_a_stream_waits_for_another_devices_work():
    result = run_python(
        """
        import torch, npusim
        x = torch.randn(256, 256)
        on_zero = x.to("npusim:0")
        producer = torch.Stream(device="npusim:0")
        with producer:
            product = on_zero @ on_zero
        consumer = torch.Stream(device="npusim:1")
        consumer.wait_stream(producer)  # another device's stream: ordered by the host
        with consumer:
            moved = product.to("npusim:1") + 1
        consumer.synchronize()  # the add ran on the consumer stream; the copy to the host below runs on the default one
        torch.testing.assert_close(moved.cpu(), x @ x + 1, rtol=1e-4, atol=1e-4)
        """,
        NPUSIM_CONFIG="datacenter",
    )
    assert result.returncode == 0, result.stderr


def test_set_with_a_storage_and_no_strides_is_contiguous():
    source = torch.arange(6.0, device="npusim")
    target = torch.zeros(2, 3, device="npusim")
    target.set_(source.untyped_storage(), 0, (2, 3))
    assert target.stride() == (3, 1)
    torch.testing.assert_close(target.cpu(), torch.arange(6.0).view(2, 3))
    with pytest.raises(RuntimeError, match="unequal size length"):
        target.set_(source.untyped_storage(), 0, (2, 3), (1,))


def test_autocast_refuses_binary_cross_entropy_as_cuda_does():
    probabilities, targets = torch.rand(4, device="npusim"), torch.rand(4, device="npusim")
    with torch.autocast("npusim"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        torch.nn.functional.binary_cross_entropy(probabilities, targets)
    logits = torch.randn(4, device="npusim")
    with torch.autocast("npusim"):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)  # the safe form runs
    assert torch.isfinite(loss.cpu())
