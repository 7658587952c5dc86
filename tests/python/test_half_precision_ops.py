"""bfloat16 and float16 throughout: each op family the kernels issue covers runs on half-precision npusim tensors with
no CPU fallback, forward and backward, and matches the CPU in the same dtype. Ops whose kernels compute in float32
widen their operands on the device and round once at the end, as the CPU's half-precision kernels do."""

import pytest
import torch
import torch.nn.functional as F

import npusim


def index(*values, device):
    return torch.tensor(values, device=device)


# name -> f(x, device) for an 8 x 8 input x; the result's float sum is differentiated.
CASES = {
    "mm": lambda x, d: x @ x.t(),
    "bmm": lambda x, d: torch.bmm(x.view(2, 4, 8), x.view(2, 8, 4)),
    "linear": lambda x, d: F.linear(x, x[:3], x[0, :3]),
    "conv2d": lambda x, d: F.conv2d(x.reshape(1, 4, 4, 4), x.reshape(4, 4, 2, 2), x[0, :4], padding=1),
    "conv1d": lambda x, d: F.conv1d(x.reshape(2, 4, 8), x[:3].reshape(2, 4, 3) * 0.5, stride=2),
    "add_mul": lambda x, d: x + 2 * x * x,
    "where": lambda x, d: torch.where(x > 0, x, -x),
    "clamp": lambda x, d: x.clamp(-0.5, 0.5),
    "pow": lambda x, d: x.abs().pow(1.5),
    "relu": lambda x, d: F.relu(x),
    "gelu": lambda x, d: F.gelu(x),
    "gelu_tanh": lambda x, d: F.gelu(x, approximate="tanh"),
    "silu": lambda x, d: F.silu(x),
    "sigmoid": lambda x, d: torch.sigmoid(x),
    "tanh": lambda x, d: torch.tanh(x),
    "softplus": lambda x, d: F.softplus(x),
    "leaky_relu": lambda x, d: F.leaky_relu(x, 0.1),
    "hardswish": lambda x, d: F.hardswish(x),
    "elu": lambda x, d: F.elu(x),
    "sum_mean": lambda x, d: x.sum(0) + x.mean(1),
    "max_min": lambda x, d: x.max(1)[0] + x.min(0)[0],
    "var_std": lambda x, d: x.var(1) + x.std(0),
    "norm": lambda x, d: x.norm(dim=1),
    "logsumexp": lambda x, d: x.logsumexp(1),
    "softmax": lambda x, d: x.softmax(1),
    "log_softmax": lambda x, d: x.log_softmax(1),
    "layer_norm": lambda x, d: F.layer_norm(x, (8,), x[0], x[1]),
    "batch_norm": lambda x, d: F.batch_norm(x.view(2, 4, 8), None, None, x[0, :4], x[1, :4], training=True),
    "group_norm": lambda x, d: F.group_norm(x.view(2, 4, 8), 2),
    "rms_norm": lambda x, d: F.rms_norm(x, (8,)),
    "embedding": lambda x, d: F.embedding(index(1, 3, 1, device=d), x),
    "index_select": lambda x, d: x.index_select(0, index(2, 0, device=d)),
    "gather": lambda x, d: x.gather(1, index(*[[0, 1]] * 8, device=d)),
    "scatter_add": lambda x, d: torch.zeros(8, 8, dtype=x.dtype, device=d).scatter_add(
        1, index(*[[0, 1]] * 8, device=d), x[:, :2]
    ),
    "index_put": lambda x, d: x.index_put((index(1, 2, device=d),), x[:2] * 2),
    "cat_stack": lambda x, d: torch.cat([x, x * 2]) + torch.stack([x, x]).sum(0).repeat(2, 1),
    "permute": lambda x, d: x.t().contiguous(),
    "max_pool2d": lambda x, d: F.max_pool2d(x.view(1, 4, 4, 4), 2),
    "avg_pool2d": lambda x, d: F.avg_pool2d(x.view(1, 4, 4, 4), 2),
    "adaptive_avg_pool2d": lambda x, d: F.adaptive_avg_pool2d(x.view(1, 4, 4, 4), 3),
    "cross_entropy": lambda x, d: F.cross_entropy(x, index(*range(8), device=d)),
    "nll_loss": lambda x, d: F.nll_loss(x.log_softmax(1), index(*range(8), device=d)),
    "mse_loss": lambda x, d: F.mse_loss(x, x.detach() * 0.5),
    "attention": lambda x, d: F.scaled_dot_product_attention(*[x.view(1, 1, 8, 8)] * 3, is_causal=True),
    "cumsum": lambda x, d: x.cumsum(1),
    "logical": lambda x, d: x * torch.logical_and(x > 0, x).to(x.dtype) + torch.logical_not(x).to(x.dtype),
}
# A few units in the last place: a gradient sums several terms in the tensor's dtype, in autograd's order.
TOLERANCE = {torch.bfloat16: {"atol": 3e-2, "rtol": 3e-2}, torch.float16: {"atol": 5e-3, "rtol": 1e-2}}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", list(CASES))
def test_op_runs_natively_in_half_precision_and_matches_cpu(name, dtype, device):
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(0)).to(dtype)
    results = []
    for where in (device, "cpu"):
        leaf = x.to(where).requires_grad_()
        with npusim.profile() as report:
            y = CASES[name](leaf, where)
            y.float().sum().backward()
        results.append((y.detach().cpu(), leaf.grad.cpu(), report))
    (y, grad, report), (expected, expected_grad, _) = results
    assert report.fallbacks == {}
    assert y.dtype == expected.dtype and grad.dtype == dtype
    torch.testing.assert_close(y, expected, **TOLERANCE[dtype])
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE[dtype])


def test_widened_operators_write_in_place_and_out_arguments_back(device):
    """An in-place or out= operator computed in float32 leaves its result in the original half-precision tensor."""
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    on_device = x.to(device)
    with npusim.profile() as report:
        on_device.sigmoid_()  # in place
        out = torch.empty(0, dtype=torch.bfloat16, device=device)
        torch.logsumexp(on_device, 1, out=out)
    assert report.fallbacks == {}
    expected = x.clone().sigmoid_()
    torch.testing.assert_close(on_device.cpu(), expected, **TOLERANCE[torch.bfloat16])
    assert out.dtype == torch.bfloat16 and out.shape == (4,)
    torch.testing.assert_close(out.cpu(), torch.logsumexp(expected, 1), **TOLERANCE[torch.bfloat16])


def test_batch_norm_in_half_precision_updates_its_running_statistics(device):
    """native_batch_norm writes running_mean and running_var without its schema saying so: the float32 run's
    statistics still reach the bfloat16 tensors."""
    generator = torch.Generator().manual_seed(2)
    x, mean, var = torch.randn(6, 3, 4, generator=generator), torch.zeros(3), torch.ones(3)
    results = []
    for where in (device, "cpu"):
        stats = [mean.to(torch.bfloat16).to(where), var.to(torch.bfloat16).to(where)]
        F.batch_norm(x.to(torch.bfloat16).to(where), *stats, training=True, momentum=0.5)
        results.append([s.cpu() for s in stats])
    for actual, expected in zip(*results, strict=True):
        assert actual.dtype == torch.bfloat16
        torch.testing.assert_close(actual, expected, **TOLERANCE[torch.bfloat16])
    assert not torch.equal(results[0][0], mean.to(torch.bfloat16))  # the statistics moved


def test_widened_results_take_the_dtype_each_call_asks_for(device, no_fallback):
    # The widened run learns its results' dtypes from a meta run once per operator, argument dtypes and other
    # argument values (float32_compute.cpp): calls that differ only there must still get their own dtypes.
    x = torch.randn(4, 6)
    for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
        on_device = x.to(dtype).to(device)
        for call in (
            lambda t: torch.cumsum(t, 1),
            lambda t: torch.cumsum(t, 1, dtype=torch.float32),
            lambda t: F.layer_norm(t, (6,)),
            lambda t: F.max_pool1d(t.unsqueeze(0), 2),
            lambda t: F.interpolate(t.view(1, 1, 4, 6), scale_factor=2, mode="bicubic"),
        ):
            actual, expected = call(on_device), call(x.to(dtype))
            assert actual.dtype == expected.dtype and actual.shape == expected.shape
            torch.testing.assert_close(actual.cpu(), expected, rtol=2e-2, atol=2e-2)
