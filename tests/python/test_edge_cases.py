"""Cases where a simulated device most easily goes wrong: aliasing, in-place broadcasting, scalar dtypes, fallback
write-back into views, unsupported layouts and dtypes, zero tensors."""

import pytest
import torch

import npusim


def test_in_place_fallback_on_a_view_writes_back_into_the_view(device):
    base = torch.arange(12.0).reshape(3, 4)
    x = base.to(device)
    # igammac has no native kernel: the CPU fallback, then written back through the strided view
    x[:, 1].igammac_(torch.tensor(2.0, device=device))
    x.t()[0].igammac_(torch.tensor(3.0, device=device))
    expected = base.clone()
    expected[:, 1].igammac_(torch.tensor(2.0))
    expected.t()[0].igammac_(torch.tensor(3.0))
    torch.testing.assert_close(x.cpu(), expected)


def test_device_scalar_of_another_dtype_is_converted(device):
    x = torch.linspace(-1, 1, 6).to(device)
    for scalar in (torch.tensor(2, device=device), torch.tensor(0.5, dtype=torch.float64, device=device)):
        torch.testing.assert_close((x * scalar).cpu(), x.cpu() * scalar.cpu(), rtol=0, atol=0)


def test_alpha_is_not_truncated_to_the_other_operands_dtype(device):
    x = torch.ones(3).to(device)
    torch.testing.assert_close(torch.add(x, 2, alpha=0.5).cpu(), torch.full((3,), 2.0), rtol=0, atol=0)


def test_in_place_op_cannot_grow_self_by_broadcasting(device):
    x = torch.ones(3).to(device)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.add_(torch.ones(2, 3).to(device))
    assert x.cpu().tolist() == [1.0, 1.0, 1.0]


def test_partially_overlapping_operands_raise_like_cpu(device):
    x = torch.arange(10.0).to(device)
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x[1:].add_(x[:-1])
    assert x.cpu().tolist() == torch.arange(10.0).tolist()


def test_overlapping_copy_is_staged(device):
    base = torch.arange(40000.0)
    x = base.to(device)
    x[1:].copy_(x[:-1])  # larger than one tile: a naive tiled copy would smear the first tile
    expected = base.clone()
    expected[1:] = base[:-1].clone()
    torch.testing.assert_close(x.cpu(), expected, rtol=0, atol=0)


def test_matmul_into_its_own_input(device):
    a = torch.randn(8, 8)
    x = a.to(device)
    torch.mm(x, x, out=x)
    torch.testing.assert_close(x.cpu(), a @ a, rtol=1e-5, atol=1e-5)


def test_layouts_beyond_one_dma_run_natively_slice_by_slice(device):
    base = torch.randn(2, 3, 2, 3, 2, 3, 2)
    permuted = base.to(device).permute(6, 4, 2, 0, 1, 3, 5)  # 7 dimensions that do not collapse
    with npusim.profile() as report:
        result = (permuted + permuted.contiguous()).cpu()
    torch.testing.assert_close(result, 2 * base.permute(6, 4, 2, 0, 1, 3, 5))
    assert report.fallbacks == {}
    assert len(report.kernels) > 2  # a launch per slice of the outermost dimension


def test_complex_tensors_fall_back_and_stay_correct(device):
    z = torch.zeros(3, dtype=torch.complex128, device=device)
    assert torch.equal(z.cpu(), torch.zeros(3, dtype=torch.complex128))


def test_memory_statistics_return_to_baseline_after_kernels(device):
    before = torch.npusim.memory_allocated()
    x = torch.randn(64, 64).to(device)
    y = torch.relu(x @ x + x)
    del x, y
    assert torch.npusim.memory_allocated() == before


def test_set_device_accepts_the_device_string():
    torch.npusim.set_device("npusim:0")
    torch.npusim.set_device(0)
    with pytest.raises(RuntimeError, match="device 1 does not exist"):
        torch.npusim.set_device(1)


def test_a_gradient_that_is_zero_everywhere_is_a_zero_tensor_as_on_the_cpu(device, no_fallback):
    x = torch.randn(6, generator=torch.Generator().manual_seed(0))
    (expected,) = torch.autograd.grad(torch.sgn(x.requires_grad_()).sum(), x)
    on_device = x.detach().to(device).requires_grad_()
    (gradient,) = torch.autograd.grad(torch.sgn(on_device).sum(), on_device)
    assert gradient._is_zerotensor() == expected._is_zerotensor()
    assert gradient.device == on_device.device and gradient.shape == (6,)
    assert torch.equal(gradient.cpu(), expected) and torch.equal((gradient + 2).cpu(), expected + 2)
    on_device.sign().sum().backward()  # accumulated into .grad: real zeros there, on the device
    assert torch.equal(on_device.grad.cpu(), torch.zeros(6))
