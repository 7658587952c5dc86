"""Operators npusim runs as PyTorch's own decompositions into its native operators (npusim/eager_decompositions.py),
against the same operators on the CPU, with no CPU fallback: grid_sample (every mode, padding and alignment),
multi_margin_loss, 3-D max pooling and unpooling, forward and, where autograd differentiates the decomposition,
backward."""

import pytest
import torch
import torch.nn.functional as F


def generator():
    return torch.Generator().manual_seed(0)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_matches_cpu(mode, padding_mode, align_corners, device, no_fallback):
    x = torch.randn(2, 3, 7, 9, generator=generator())
    grid = torch.rand(2, 5, 6, 2, generator=generator()) * 2.4 - 1.2  # some points outside the input
    expected = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    actual = F.grid_sample(
        x.to(device), grid.to(device), mode=mode, padding_mode=padding_mode, align_corners=align_corners
    )
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_grid_sample_is_the_float32_result_rounded_once(dtype, device, no_fallback):
    x = torch.randn(2, 3, 7, 9, generator=generator()).to(dtype)
    grid = (torch.rand(2, 5, 6, 2, generator=generator()) * 2 - 1).to(dtype)
    actual = F.grid_sample(x.to(device), grid.to(device), align_corners=False)
    assert actual.dtype == dtype
    torch.testing.assert_close(
        actual.cpu(), F.grid_sample(x.float(), grid.float(), align_corners=False).to(dtype), rtol=0, atol=0
    )


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradients_match_cpu(device, no_fallback, padding_mode):
    # Autograd calls grid_sampler_2d's own backward, which differentiates the decomposition: nearest mode's grid gets
    # zeros, not None.
    for mode in ("bilinear", "nearest", "bicubic"):
        x = torch.randn(1, 2, 5, 5, generator=generator(), requires_grad=True)
        grid = (torch.rand(1, 4, 4, 2, generator=generator()) * 2 - 1).requires_grad_()
        F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=True).sum().backward()
        x_d, grid_d = x.detach().to(device).requires_grad_(), grid.detach().to(device).requires_grad_()
        F.grid_sample(x_d, grid_d, mode=mode, padding_mode=padding_mode, align_corners=True).sum().backward()
        torch.testing.assert_close(x_d.grad.cpu(), x.grad)
        torch.testing.assert_close(grid_d.grad.cpu(), grid.grad)


def test_multi_margin_loss_and_its_gradient_match_cpu(device, no_fallback):
    scores = torch.randn(6, 5, generator=generator())
    target = torch.randint(0, 5, (6,), generator=generator())
    weight = torch.rand(5, generator=generator())
    for loss, args in (
        (F.multi_margin_loss, (target,)),
        (lambda s, t: F.multi_margin_loss(s, t, p=2, margin=0.5, weight=weight.to(s.device)), (target,)),
    ):
        cpu = scores.clone().requires_grad_()
        expected = loss(cpu, *args)
        expected.backward()
        on_device = scores.to(device).requires_grad_()
        actual = loss(on_device, *(a.to(device) for a in args))
        actual.backward()
        torch.testing.assert_close(actual.cpu(), expected)
        torch.testing.assert_close(on_device.grad.cpu(), cpu.grad)


def test_max_pool3d_and_its_gradient_match_cpu(device, no_fallback):
    x = torch.randn(2, 3, 6, 7, 8, generator=generator())
    cpu = x.clone().requires_grad_()
    expected, expected_indices = F.max_pool3d(cpu, kernel_size=3, stride=2, padding=1, return_indices=True)
    expected.sum().backward()
    on_device = x.to(device).requires_grad_()
    actual, indices = F.max_pool3d(on_device, kernel_size=3, stride=2, padding=1, return_indices=True)
    actual.sum().backward()
    assert torch.equal(actual.cpu(), expected)
    assert torch.equal(indices.cpu(), expected_indices)
    torch.testing.assert_close(on_device.grad.cpu(), cpu.grad)


def test_multilabel_margin_loss_is_not_decomposed_where_the_decomposition_is_wrong(device):
    # torch 2.13's decomposition of multilabel_margin_loss_forward gives 2.69 here, the CPU's kernel 1.20: npusim
    # runs the CPU's (the fallback), never the wrong decomposition.
    scores = torch.randn(6, 5, generator=generator())
    target = torch.tensor([[3, 0, -1, 1, 2]] * 6)
    torch.testing.assert_close(
        F.multilabel_margin_loss(scores.to(device), target.to(device)).cpu(), F.multilabel_margin_loss(scores, target)
    )


def test_max_unpool3d_and_its_gradient_match_cpu(device, no_fallback):
    x = torch.randn(2, 3, 5, 6, 7, generator=generator())
    pooled, indices = F.max_pool3d(x, 2, stride=(1, 2, 2), return_indices=True)
    results = []
    for where in ("cpu", device):
        values = pooled.detach().to(where).requires_grad_()
        out = F.max_unpool3d(values, indices.to(where), 2, stride=(1, 2, 2), output_size=x.shape[2:])
        out.backward(torch.arange(out.numel(), dtype=torch.float32).view(out.shape).to(where))
        results.append((out.detach().cpu(), values.grad.cpu()))
    (expected, expected_grad), (actual, grad) = results
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=0)
