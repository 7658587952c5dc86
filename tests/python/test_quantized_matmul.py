"""Quantised inference on npusim against the CPU: torch._int_mm (int8 x int8 summed exactly in int32 on the matrix
engine) with per-tensor scales, and torch._weight_int8pack_mm (int8 weights with per-channel scales, float
activations, float32 accumulation)."""

import pytest
import torch

import npusim


def int8(*shape, seed):
    return torch.randint(-128, 128, shape, dtype=torch.int8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (5, 70, 17), (64, 256, 48), (3, 1000, 9)])
def test_int_mm_sums_exactly_in_int32(m, k, n, device, no_fallback):
    a, b = int8(m, k, seed=1), int8(k, n, seed=2)
    with npusim.profile() as report:
        result = torch._int_mm(a.to(device), b.to(device))
    assert result.dtype == torch.int32
    assert torch.equal(result.cpu(), torch._int_mm(a, b))
    assert [kernel.name for kernel in report.kernels] == ["matmul_i8"]
    out = torch.empty(0, dtype=torch.int32).to(device)
    torch._int_mm(a.to(device).t().contiguous().t(), b.to(device), out=out)  # a column-major A as well
    assert torch.equal(out.cpu(), torch._int_mm(a, b))


def test_int_mm_rejects_other_dtypes(device):
    a = torch.ones(4, 4).to(device)
    with pytest.raises(RuntimeError, match="expected int8 operands"):
        torch._int_mm(a, a)


def test_per_tensor_quantised_linear_layer_matches_cpu(device, no_fallback):
    """y = relu(_int_mm(xq, wq) * (sx * sw) + bias): integer product, then float scaling on the device."""
    x, w = torch.randn(8, 96), torch.randn(96, 40)
    sx, sw = x.abs().max() / 127, w.abs().max() / 127
    xq, wq = (x / sx).round().to(torch.int8), (w / sw).round().to(torch.int8)
    bias = torch.randn(40)

    def layer(xq, wq, bias):
        return torch.relu(torch._int_mm(xq, wq) * (sx * sw).item() + bias)

    expected = layer(xq, wq, bias)
    actual = layer(xq.to(device), wq.to(device), bias.to(device))
    assert torch.equal(actual.cpu(), expected)
    exact = torch.relu(x @ w + bias)
    assert (expected - exact).abs().max() < 0.05 * exact.abs().max()  # and it approximates the float layer


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_weight_int8pack_mm_with_per_channel_scales_matches_cpu(dtype, device, no_fallback):
    # The CPU kernel wants N a multiple of 16 and K of 32 (it crashes otherwise); npusim takes any shape.
    x = torch.randn(6, 64, generator=torch.Generator().manual_seed(3)).to(dtype)
    w = int8(32, 64, seed=4)
    scales = (torch.rand(32, generator=torch.Generator().manual_seed(5)) / 100).to(dtype)
    expected = torch._weight_int8pack_mm(x, w, scales)
    actual = torch._weight_int8pack_mm(x.to(device), w.to(device), scales.to(device))
    assert actual.dtype == dtype
    # float32 sums in another order than the CPU's vectorised ones: a few units in the last place of the terms.
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5 if dtype == torch.float32 else 0)
    odd = torch._weight_int8pack_mm(x[:, :50].to(device), w[:17, :50].to(device), scales[:17].to(device))
    reference = (x[:, :50].float() @ w[:17, :50].float().t() * scales[:17].float()).to(dtype)
    torch.testing.assert_close(odd.cpu(), reference, rtol=1e-5, atol=1e-5)
