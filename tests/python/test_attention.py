"""scaled_dot_product_attention on npusim: attention without mask or dropout runs as one fused kernel
(flash-attention style, the score matrix never in DRAM; float16 and bfloat16 computed in float32 and rounded once)
and its backward as two fused kernels that recompute P from the saved log-sum-exp; other cases take PyTorch's math
path, native too. Results and gradients against the CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import npusim


def qkv(shape_q, shape_k, value_dim, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=generator)
    k = torch.randn(shape_k, generator=generator)
    v = torch.randn((*shape_k[:-1], value_dim), generator=generator)
    return q, k, v


SHAPES = {
    "self-attention": ((2, 3, 40, 32), (2, 3, 40, 32), 32),
    "cross-attention, ragged blocks": ((2, 2, 37, 24), (2, 2, 29, 24), 20),
    "3-d, one head dim chunk": ((4, 9, 8), (4, 17, 8), 8),
    "more queries than keys": ((1, 2, 50, 16), (1, 2, 20, 16), 16),
}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", SHAPES)
def test_fused_attention_and_its_gradients_match_cpu(name, causal, device, no_fallback):
    q, k, v = qkv(*SHAPES[name])
    for t in (q, k, v):
        t.requires_grad_()
    on_device = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    with npusim.profile() as report:
        actual = F.scaled_dot_product_attention(*on_device, is_causal=causal, scale=0.3)
    assert [kernel.name for kernel in report.kernels] == ["attention_f32"]
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=0.3)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=2e-6)
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1))
    (expected * weights).sum().backward()
    (actual * weights.to(device)).sum().backward()
    for cpu, npu in zip((q, k, v), on_device, strict=True):
        torch.testing.assert_close(npu.grad.cpu(), cpu.grad, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_heads_of_a_fused_projection_are_read_and_written_in_place(causal, device, no_fallback):
    """Multi-head attention's q, k and v are views of one projection's output ([batch, length, 3, heads, dim]
    permuted to [batch, heads, length, dim]): the forward kernel reads them and writes its output where they are, with
    no copy; the backward copies q, k and v (which both its kernels read) and writes the gradients laid out as the
    inputs, with no copy after."""
    generator = torch.Generator().manual_seed(2)
    projected = torch.randn(2, 19, 3, 4, 8, generator=generator, requires_grad=True)
    weights = torch.randn(2, 4, 19, 8, generator=generator)
    on_device = projected.detach().to(device).requires_grad_()

    def attention(x):
        q, k, v = x.permute(2, 0, 3, 1, 4).unbind(0)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    expected, grad_output = attention(projected), weights.to(device)
    with npusim.profile() as report:
        actual = attention(on_device)
        (gradient,) = torch.autograd.grad(actual, on_device, grad_output)
    attention_records = [record.name for record in report.records if "scaled_dot_product" in record.op]
    assert attention_records == [
        "attention_f32",
        *["copy"] * 3,
        "attention_backward_query_f32",
        "attention_backward_key_value_f32",
    ], attention_records
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=2e-6)
    (expected_gradient,) = torch.autograd.grad(expected, projected, weights)
    torch.testing.assert_close(gradient.cpu(), expected_gradient, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [False, True])
def test_half_precision_attention_is_fused_and_as_close_to_float32_as_the_cpus(dtype, causal, device, no_fallback):
    q, k, v = (t.to(dtype).requires_grad_() for t in qkv(*SHAPES["cross-attention, ragged blocks"]))
    on_device = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    with npusim.profile() as report:
        actual = F.scaled_dot_product_attention(*on_device, is_causal=causal)
    assert [kernel.name for kernel in report.kernels] == [f"attention_{'bf16' if dtype == torch.bfloat16 else 'f16'}"]
    assert actual.dtype == dtype
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    exact = F.scaled_dot_product_attention(*(t.detach().float() for t in (q, k, v)), is_causal=causal)
    ulp = 2**-8 if dtype == torch.bfloat16 else 2**-11
    assert (actual.cpu().float() - exact).abs().max() <= max(ulp * 2, (expected.float() - exact).abs().max())
    weights = torch.randn(expected.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    (expected * weights).sum().backward()
    (actual * weights.to(device)).sum().backward()
    for cpu, npu in zip((q, k, v), on_device, strict=True):
        torch.testing.assert_close(npu.grad.cpu(), cpu.grad, rtol=2e-2, atol=2e-2)


def test_fused_attention_moves_fewer_bytes_than_the_math_path(device, no_fallback):
    """The score matrix stays in the scratchpad: the fused kernel reads Q, K, V and writes O and the log-sum-exp."""
    q, k, v = (t.to(device) for t in qkv((1, 4, 128, 32), (1, 4, 128, 32), 32))
    with npusim.profile() as fused:
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH), npusim.profile() as math:
        reference = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(expected.cpu(), reference.cpu(), rtol=1e-5, atol=1e-6)
    fused_bytes = sum(kernel.bytes for kernel in fused.kernels)
    math_bytes = sum(kernel.bytes for kernel in math.kernels)
    assert [kernel.name for kernel in fused.kernels] == ["attention_f32"]
    assert len(math.kernels) > 3 and fused_bytes < math_bytes


@pytest.mark.parametrize(
    "case",
    ["boolean mask", "additive mask", "dropout"],
)
def test_other_attention_takes_the_native_math_path(case, device, no_fallback):
    q, k, v = qkv((2, 2, 12, 8), (2, 2, 12, 8), 8)
    kwargs = {}
    if case == "boolean mask":
        kwargs["attn_mask"] = torch.rand(12, 12, generator=torch.Generator().manual_seed(2)) > 0.3
    if case == "additive mask":
        kwargs["attn_mask"] = torch.randn(12, 12, generator=torch.Generator().manual_seed(2))
    if case == "dropout":
        torch.manual_seed(0)
        result = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), dropout_p=0.5)
        assert result.shape == q.shape and torch.isfinite(result.cpu()).all()
        return
    with npusim.profile() as report:
        actual = F.scaled_dot_product_attention(
            q.to(device), k.to(device), v.to(device), **{n: t.to(device) for n, t in kwargs.items()}
        )
    assert "attention_f32" not in [kernel.name for kernel in report.kernels]
    expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_fused_attention_lays_results_out_as_the_meta_functions_say():
    """A compiled graph checks each result's strides against the meta function's: the output takes the query's
    layout, each gradient its input's."""
    q, k, v = (torch.randn(2, 6, 4, 8).transpose(1, 2) for _ in range(3))  # [B, H, L, D] views of [B, L, H, D]
    op = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    device_inputs = [t.to("npusim").transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    meta_inputs = [t.to("meta").transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v)]
    out = op(*device_inputs)
    expected = op(*meta_inputs)
    assert out[0].stride() == expected[0].stride()
    for given, promised in zip(out, expected, strict=True):  # None where the meta function gives None
        assert (given is None) == (promised is None)
        if isinstance(given, torch.Tensor):
            assert given.shape == promised.shape and given.dtype == promised.dtype
    torch.testing.assert_close(out[0].cpu(), torch.nn.functional.scaled_dot_product_attention(q, k, v))
    grad = torch.randn(out[0].shape).to("npusim")
    backward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
    arguments = (out[0], out[1], out[2], out[3], out[4], out[5], 0.0, False, out[6], out[7])
    grads = backward(grad, *device_inputs, None, [True, True, True, False], *arguments)
    for gradient, given in zip(grads[:3], device_inputs, strict=True):
        assert gradient.stride() == given.stride()
