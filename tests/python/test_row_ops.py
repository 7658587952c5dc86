"""softmax, log_softmax, _safe_softmax, sum and mean on npusim against the CPU: emitted row kernels over the last
dimension, other dimensions moved last for them."""

import pytest
import torch
import torch.nn.functional as F

import npusim

SHAPES = [(1, 1), (4, 10), (3, 5, 7), (2, 1000), (300, 33)]


def random(shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 4


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("function", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_over_the_last_dim_matches_cpu(function, shape, device):
    x = random(shape, 1)
    with npusim.profile() as report:
        result = function(x.to(device), dim=-1)
    torch.testing.assert_close(result.cpu(), function(x, dim=-1), rtol=1e-6, atol=1e-6)
    assert report.fallbacks == {}
    assert [r.name for r in report.kernels] == [f"{function.__name__}_f32"]


@pytest.mark.parametrize("shape", SHAPES)
def test_sum_and_mean_over_the_last_dim_match_cpu(shape, device):
    x = random(shape, 2)
    on_device = x.to(device)
    with npusim.profile() as report:
        sums, kept, means = on_device.sum(-1), on_device.sum(-1, keepdim=True), on_device.mean(-1)
    assert report.fallbacks == {}
    # The device sums each row in order; the CPU's vectorised sum associates differently, hence the tolerance.
    torch.testing.assert_close(sums.cpu(), x.sum(-1), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(kept.cpu(), x.sum(-1, keepdim=True), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(means.cpu(), x.mean(-1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_sum_and_mean_over_any_one_dim_run_natively(dim, device):
    x = random((5, 6, 7), 5)
    with npusim.profile() as report:
        sums, means = x.to(device).sum(dim, keepdim=True), x.to(device).mean(dim)
    assert report.fallbacks == {}
    torch.testing.assert_close(sums.cpu(), x.sum(dim, keepdim=True), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(means.cpu(), x.mean(dim), rtol=1e-6, atol=1e-6)


def test_softmax_is_stable_for_large_values_and_handles_infinities(device):
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-float("inf"), 0.0, 1.0]])
    torch.testing.assert_close(torch.softmax(x.to(device), -1).cpu(), torch.softmax(x, -1))
    torch.testing.assert_close(torch.log_softmax(x.to(device), -1).cpu(), torch.log_softmax(x, -1))


def test_other_dims_and_non_contiguous_inputs_give_the_cpu_results(device):
    x = random((6, 9), 3)
    torch.testing.assert_close(torch.softmax(x.to(device), 0).cpu(), torch.softmax(x, 0))  # dim 0 moved last
    torch.testing.assert_close(
        torch.softmax(x.to(device).t(), -1).cpu(), torch.softmax(x.t(), -1), rtol=1e-6, atol=1e-6
    )
    torch.testing.assert_close(x.to(device).sum().cpu(), x.sum())  # over every dimension
    ints = torch.arange(12).reshape(3, 4)
    assert torch.equal(ints.to(device).sum(-1).cpu(), ints.sum(-1))


def test_cross_entropy_loss_matches_cpu(device):
    logits, target = random((8, 5), 4), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    loss = torch.nn.functional.cross_entropy(logits.to(device), target.to(device))
    torch.testing.assert_close(loss.cpu(), torch.nn.functional.cross_entropy(logits, target), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_and_its_backward_run_natively(reduction, device):
    a, b = random((16, 5), 6), random((16, 5), 7)
    a_device = a.to(device).requires_grad_()
    with npusim.profile() as report:
        loss = torch.nn.functional.mse_loss(a_device, b.to(device), reduction=reduction)
        loss.sum().backward() if reduction == "none" else loss.backward()
    a_cpu = a.clone().requires_grad_()
    expected = torch.nn.functional.mse_loss(a_cpu, b, reduction=reduction)
    expected.sum().backward() if reduction == "none" else expected.backward()
    torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a_device.grad.cpu(), a_cpu.grad, rtol=1e-6, atol=1e-6)
    assert "aten::mse_loss" not in report.fallbacks and "aten::mse_loss_backward" not in report.fallbacks


@pytest.mark.parametrize(
    "shape, normalized", [((4, 10), (10,)), ((2, 3, 64), (64,)), ((5, 6, 7), (6, 7)), ((1, 300), (300,))]
)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_forward_runs_natively_and_matches_cpu(shape, normalized, affine, device):
    x = random(shape, 8) + 3
    layer = torch.nn.LayerNorm(normalized, eps=1e-5, elementwise_affine=affine)
    if affine:
        with torch.no_grad():
            layer.weight.copy_(random(normalized, 9))
            layer.bias.copy_(random(normalized, 10))
    expected = layer(x)
    layer.to(device)
    with npusim.profile() as report, torch.no_grad():
        result = layer(x.to(device))
    assert report.fallbacks == {}
    assert "layer_norm_f32" in [r.name for r in report.kernels]
    torch.testing.assert_close(result.cpu(), expected.detach(), rtol=1e-5, atol=1e-5)


def test_layer_norm_statistics_and_gradients_match_cpu(device):
    x = random((6, 16), 11)
    out, mean, rstd = torch.ops.aten.native_layer_norm(x.to(device), [16], None, None, 1e-5)
    expected = torch.ops.aten.native_layer_norm(x, [16], None, None, 1e-5)
    for got, want in zip((out, mean, rstd), expected, strict=True):
        assert got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    # The backward, from the saved statistics: the input's gradient one row kernel (which also writes x̂ for the
    # weight's gradient), the weight's and bias's gradients native column sums; over two normalised dimensions too.
    for shape, normalized in (((6, 16), [16]), ((3, 4, 5), [4, 5])):
        layer = torch.nn.LayerNorm(normalized)
        with torch.no_grad():
            layer.weight.copy_(random(tuple(normalized), 14) + 1)
            layer.bias.copy_(random(tuple(normalized), 15))
        layer_device = torch.nn.LayerNorm(normalized).to(device)
        layer_device.load_state_dict(layer.state_dict())
        data = random(shape, 16)
        x_cpu, x_device = data.clone().requires_grad_(), data.to(device).requires_grad_()
        layer(x_cpu).square().sum().backward()
        with npusim.profile() as report:
            layer_device(x_device).square().sum().backward()
        assert report.fallbacks == {}
        assert [r.name for r in report.kernels].count("layer_norm_backward_f32") == 1
        torch.testing.assert_close(x_device.grad.cpu(), x_cpu.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(layer_device.weight.grad.cpu(), layer.weight.grad, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(layer_device.bias.grad.cpu(), layer.bias.grad, rtol=1e-4, atol=1e-4)


def test_safe_softmax_gives_zero_for_fully_masked_rows_like_the_cpu(device):
    x = random((5, 9), 17)
    x[1] = float("-inf")  # a fully masked row
    x[3, :4] = float("-inf")
    with npusim.profile() as report:
        result = torch.ops.aten._safe_softmax(x.to(device), -1)
    assert [r.name for r in report.kernels] == ["safe_softmax_f32"]
    expected = torch.ops.aten._safe_softmax(x, -1)
    assert torch.equal(result.cpu()[1], torch.zeros(9))
    torch.testing.assert_close(result.cpu(), expected)
    # Attention with a boolean mask that hides every key from one query: that query's output is 0, as on the CPU.
    q, k, v = (random((1, 2, 6, 8), seed) for seed in (18, 19, 20))
    mask = torch.ones(6, 6, dtype=torch.bool)
    mask[2] = False
    with npusim.profile() as report:
        out = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), attn_mask=mask.to(device))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("function", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(4, 10), (3, 5, 7), (2, 300)])
def test_softmax_backward_runs_natively_and_matches_cpu(function, shape, device):
    x, grad = random(shape, 12), random(shape, 13)
    x_cpu, x_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    function(x_cpu, -1).backward(grad)
    with npusim.profile() as report:
        function(x_device, -1).backward(grad.to(device))
    assert report.fallbacks == {}
    assert f"{function.__name__}_backward_f32" in [r.name for r in report.kernels]
    torch.testing.assert_close(x_device.grad.cpu(), x_cpu.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim", [-1, 1, 0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_safe_softmax_zeroes_fully_masked_rows_and_their_gradients(device, no_fallback, dim, dtype):
    scores = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(4))
    scores.select(dim, 1)[0] = float("-inf")  # a row along `dim` with nothing to attend to
    scores[2, 3, :3] = float("-inf")
    scores = scores.to(dtype)
    weights = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(5)).to(dtype)
    on_device = scores.to(device).requires_grad_()
    result, expected = torch.ops.aten._safe_softmax(on_device, dim), torch.ops.aten._safe_softmax(scores.float(), dim)
    # npusim computes half precision in float32 and rounds once: the CPU's float32 results, rounded
    torch.testing.assert_close(result.cpu(), expected.to(dtype))
    assert result.dtype == dtype and result.stride() == expected.stride() and not result.isnan().any()
    (result * weights.to(device)).sum().backward()
    # softmax's backward from its (rounded) output, in float32, rounded once: zeros, not NaN, in the masked row
    output = result.detach().cpu().float()
    expected_grad = torch._softmax_backward_data(weights.float(), output, dim, torch.float32).to(dtype)
    torch.testing.assert_close(on_device.grad.cpu(), expected_grad)
    assert (on_device.grad.select(dim, 1)[0] == 0).all()
