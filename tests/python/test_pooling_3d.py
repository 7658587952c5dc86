"""3-D average pooling (nn.AvgPool3d, nn.AdaptiveAvgPool3d) and adaptive max pooling (nn.AdaptiveMaxPool3d) on npusim
against the CPU: every window argument, the gradients, indices, out= forms, half precision and PyTorch's argument
errors, with no CPU fallback."""

import pytest
import torch
import torch.nn.functional as F

TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def forward_and_backward(function, x, where):
    leaf = x.detach().to(where).requires_grad_()
    out = function(leaf)
    out.backward(random(*out.shape, seed=7).to(where))
    return out.detach().cpu(), leaf.grad.cpu()


AVERAGE_POOLS = [
    ("cube", (2, 3, 4, 6, 6), {"kernel_size": 2}),
    ("unbatched", (3, 5, 4, 6), {"kernel_size": (2, 3, 2), "stride": 1}),
    ("padded, counting the padding", (1, 2, 5, 5, 7), {"kernel_size": 3, "stride": 2, "padding": 1}),
    (
        "padded, padding not counted",
        (1, 2, 5, 5, 7),
        {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    ),
    ("ceil mode", (2, 2, 5, 7, 6), {"kernel_size": (3, 2, 4), "stride": (2, 2, 3), "ceil_mode": True}),
    (
        "ceil mode, padded, not counted",
        (1, 3, 6, 5, 5),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    ),
    ("divisor override", (1, 2, 4, 4, 4), {"kernel_size": 2, "divisor_override": 3}),
]


@pytest.mark.parametrize("name, shape, arguments", AVERAGE_POOLS, ids=[case[0] for case in AVERAGE_POOLS])
def test_avg_pool3d_and_its_gradient_match_the_cpu(device, no_fallback, name, shape, arguments):
    x = random(*shape, seed=1)
    out, grad = forward_and_backward(lambda t: F.avg_pool3d(t, **arguments), x, device)
    expected, expected_grad = forward_and_backward(lambda t: F.avg_pool3d(t, **arguments), x, "cpu")
    torch.testing.assert_close(out, expected, **TOLERANCE)
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


@pytest.mark.parametrize("output_size", [(1, 1, 1), (2, 3, 2), (3, 4, 5), (None, 2, 7)], ids=str)
def test_adaptive_avg_pool3d_and_its_gradient_match_the_cpu(device, no_fallback, output_size):
    x = random(2, 3, 5, 6, 7, seed=2)  # windows that overlap (6 -> 4, 5 -> 3) and that are one input (7 -> 7)
    out, grad = forward_and_backward(lambda t: F.adaptive_avg_pool3d(t, output_size), x, device)
    expected, expected_grad = forward_and_backward(lambda t: F.adaptive_avg_pool3d(t, output_size), x, "cpu")
    torch.testing.assert_close(out, expected, **TOLERANCE)
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


def test_out_forms_write_into_the_given_tensor(device, no_fallback):
    x = random(1, 2, 4, 4, 6, seed=3)
    out = torch.empty(0, device=device)
    returned = torch.ops.aten.avg_pool3d.out(x.to(device), [2, 2, 3], [2, 2, 3], [0, 0, 0], out=out)
    assert returned.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out.cpu(), F.avg_pool3d(x, (2, 2, 3)), **TOLERANCE)
    adaptive = torch.empty(0, device=device)
    torch.ops.aten.adaptive_avg_pool3d.out(x.to(device), [3, 2, 2], out=adaptive)
    torch.testing.assert_close(adaptive.cpu(), F.adaptive_avg_pool3d(x, (3, 2, 2)), **TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_pools_are_the_float32_result_rounded_once(device, no_fallback, dtype):
    x = random(2, 3, 4, 6, 6, seed=4).to(dtype)
    out = F.avg_pool3d(x.to(device), 2, padding=1, count_include_pad=False)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), F.avg_pool3d(x.float(), 2, padding=1, count_include_pad=False).to(dtype))
    adaptive = F.adaptive_avg_pool3d(x.to(device), (3, 4, 5))
    torch.testing.assert_close(adaptive.cpu(), F.adaptive_avg_pool3d(x.float(), (3, 4, 5)).to(dtype))


def test_bad_arguments_raise_pytorchs_errors(device):
    x = random(1, 1, 4, 4, 4)
    for call in (
        lambda t: F.avg_pool3d(t, 2, padding=2),  # padding over half the kernel
        lambda t: F.avg_pool3d(t, 5),  # a window larger than the input
        lambda t: F.avg_pool3d(t, 2, divisor_override=0),
    ):
        with pytest.raises(RuntimeError) as expected:
            call(x)
        with pytest.raises(type(expected.value)):
            call(x.to(device))
    assert F.avg_pool3d(x.to(device), 2).shape == (1, 1, 2, 2, 2)  # the device stays usable


@pytest.mark.parametrize("output_size", [(1, 1, 1), (2, 3, 2), (3, 4, 5), (5, 6, 7)], ids=str)
def test_adaptive_max_pool3d_its_indices_and_gradient_match_the_cpu(device, no_fallback, output_size):
    x = random(2, 3, 5, 6, 7, seed=8)
    x[0, 0, 1, 2, 3] = float("nan")  # NaN wins its windows, as on the CPU
    x[1, 2, :2, :2, :2] = 1.5  # ties keep the first in the window's scan order
    results = []
    for where in (device, "cpu"):
        leaf = x.detach().to(where).requires_grad_()
        out, indices = F.adaptive_max_pool3d(leaf, output_size, return_indices=True)
        out.backward(random(*out.shape, seed=7).to(where))
        results.append((out.detach().cpu(), indices.cpu(), leaf.grad.cpu()))
    (out, indices, grad), (expected, expected_indices, expected_grad) = results
    torch.testing.assert_close(out, expected, equal_nan=True)
    assert torch.equal(indices, expected_indices)
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


def test_adaptive_max_pool3d_of_an_unbatched_input(device, no_fallback):
    x = random(3, 4, 5, 6, seed=9)
    out, indices = F.adaptive_max_pool3d(x.to(device), (2, 2, 3), return_indices=True)
    expected, expected_indices = F.adaptive_max_pool3d(x, (2, 2, 3), return_indices=True)
    torch.testing.assert_close(out.cpu(), expected)
    assert torch.equal(indices.cpu(), expected_indices)
