"""Rows longer than the scratchpad holds: a softmax over GPT-2's vocabulary, layer norm over wide features, batch norm
over large images. Each is still one native kernel, walked over the row in chunks (docs/kernel_builder.md, "Rows
longer than the scratchpad"), and matches the CPU."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import npusim

VOCAB = 50257  # GPT-2's vocabulary: a float32 row of 201 KB, beside the default chip's 256 KiB scratchpad


def random(shape, seed=0, scale=4.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def kernel_names(report):
    return [record.name for record in report.kernels]


@pytest.mark.parametrize("function", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_over_a_vocabulary_is_one_kernel(function, device):
    x = random((3, VOCAB), 1)
    with npusim.profile() as report:
        result = function(x.to(device), dim=-1)
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    assert kernel_names(report) == [f"{function.__name__}_f32"]
    # The device sums in order (each chunk, then the chunks' sums), the CPU pairwise: over 50257 terms the ordered
    # float32 sum drifts by up to about 5e-5 of itself (measured against float64), the CPU's by under 1e-5.
    torch.testing.assert_close(result.cpu(), function(x, dim=-1), rtol=1e-4, atol=1e-5)


def test_cross_entropy_over_a_vocabulary_trains_natively(device):
    logits = random((4, VOCAB), 2).requires_grad_()
    targets = torch.tensor([0, 17, 50256, 31337])
    on_device = logits.detach().to(device).requires_grad_()
    with npusim.profile() as report:
        loss = F.cross_entropy(on_device, targets.to(device))
        loss.backward()
        torch.npusim.synchronize()
    reference = F.cross_entropy(logits, targets)
    reference.backward()
    assert report.fallbacks == {}
    torch.testing.assert_close(loss.cpu(), reference, rtol=1e-5, atol=1e-5)
    # The softmax's ordered sum, as above.
    torch.testing.assert_close(on_device.grad.cpu(), logits.grad, rtol=1e-4, atol=1e-8)


def test_layer_norm_over_wide_features_matches_cpu_forward_and_backward(device):
    width = 70000  # 280 KB a row
    x = random((3, width), 3).requires_grad_()
    norm = torch.nn.LayerNorm(width)
    with torch.no_grad():
        norm.weight.copy_(random(width, 4, 1.0))
        norm.bias.copy_(random(width, 5, 1.0))
    norm_on_device = torch.nn.LayerNorm(width).to(device)
    norm_on_device.load_state_dict(norm.state_dict())
    x_on_device = x.detach().to(device).requires_grad_()
    gradient = random((3, width), 6)
    with npusim.profile() as report:
        y = norm_on_device(x_on_device)
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    assert len(report.kernels) == 1
    with npusim.profile() as report:
        y.backward(gradient.to(device))
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    expected = norm(x)
    expected.backward(gradient)
    # The statistics are ordered float32 sums of 70000 terms (see the softmax above).
    torch.testing.assert_close(y.cpu(), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x_on_device.grad.cpu(), x.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(norm_on_device.weight.grad.cpu(), norm.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm_on_device.bias.grad.cpu(), norm.bias.grad, rtol=1e-4, atol=1e-4)


def test_batch_norm_over_large_images_is_one_kernel_each_way(device):
    # 4 x 160 x 160 elements a channel: 400 KB, a pass over the batch and the image per chunk.
    x = random((4, 3, 160, 160), 7, 1.0) + 2
    norm = torch.nn.BatchNorm2d(3)
    norm_on_device = torch.nn.BatchNorm2d(3).to(device)
    x_cpu = x.clone().requires_grad_()
    x_on_device = x.to(device).requires_grad_()
    with npusim.profile() as forward:
        y = norm_on_device(x_on_device)
        torch.npusim.synchronize()
    loss = y.sum()
    with npusim.profile() as backward:
        loss.backward()  # an expanded gradient: copied once, then the fused backward
        torch.npusim.synchronize()
    expected = norm(x_cpu)
    expected.sum().backward()
    assert forward.fallbacks == {} and backward.fallbacks == {}
    assert kernel_names(forward) == ["add_i64", "batch_norm_f32"]  # num_batches_tracked += 1, then batch norm
    assert kernel_names(backward) == ["copy", "batch_norm_backward_f32"]
    torch.testing.assert_close(y.cpu(), expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x_on_device.grad.cpu(), x_cpu.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm_on_device.running_mean.cpu(), norm.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(norm_on_device.running_var.cpu(), norm.running_var, rtol=1e-5, atol=1e-6)


def test_argmax_over_a_vocabulary_is_one_kernel_with_the_cpus_ties_and_nan(device):
    """Greedy decoding's step: the first index of the maximum, a tie keeping the earlier one and the first NaN winning,
    exactly as the CPU."""
    x = random((4, VOCAB), 8)
    x[0, 40000] = x[0, 7] = 100.0  # a tie across chunks
    x[1, 30000] = x[1, 45000] = float("nan")
    x[2] = float("-inf")
    with npusim.profile() as report:
        indices = x.to(device).argmax(-1)
        values, positions = x.to(device).max(-1)
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    torch.testing.assert_close(indices.cpu(), x.argmax(-1), rtol=0, atol=0)
    expected_values, expected_positions = x.max(-1)
    torch.testing.assert_close(values.cpu(), expected_values, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(positions.cpu(), expected_positions, rtol=0, atol=0)
    with npusim.profile() as report:
        top = torch.topk(x.nan_to_num(0).to(device), 5, -1)
    assert report.fallbacks == {}
    torch.testing.assert_close(top.values.cpu(), torch.topk(x.nan_to_num(0), 5, -1).values, rtol=0, atol=0)


def test_cumsum_and_cumprod_over_a_vocabulary_run_natively(device):
    """Top-p sampling's running sum over sorted probabilities: rows longer than the scratchpad, scanned in chunks of
    columns, each element with the same sequence of adds as in one pass."""
    probabilities = torch.softmax(random((3, VOCAB), 9), -1).sort(-1, descending=True).values
    with npusim.profile() as report:
        sums = torch.cumsum(probabilities.to(device), -1)
        products = torch.cumprod((1 + probabilities / 4).to(device), -1)
        integers = torch.cumsum(torch.arange(3 * VOCAB).reshape(3, VOCAB).to(device), -1)
        torch.npusim.synchronize()
    assert report.fallbacks == {}
    # The device accumulates in float32 in order, exactly as a sequential float32 scan (numpy's); the CPU's kernel
    # accumulates in float64, so over 50257 terms the two drift apart by up to about 1e-4.
    sequential_sums = torch.from_numpy(np.cumsum(probabilities.numpy(), axis=-1, dtype=np.float32))
    sequential_products = torch.from_numpy(np.cumprod((1 + probabilities / 4).numpy(), axis=-1, dtype=np.float32))
    torch.testing.assert_close(sums.cpu(), sequential_sums, rtol=0, atol=0)
    torch.testing.assert_close(products.cpu(), sequential_products, rtol=0, atol=0)
    torch.testing.assert_close(sums.cpu(), torch.cumsum(probabilities, -1), rtol=2e-4, atol=1e-6)
    torch.testing.assert_close(integers.cpu(), torch.cumsum(torch.arange(3 * VOCAB).reshape(3, VOCAB), -1))
