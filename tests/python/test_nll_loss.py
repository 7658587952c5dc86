"""nll_loss and cross_entropy on npusim against the CPU: emitted kernels forward and backward for every reduction,
with and without class weights and ignore_index; a target out of range is an IndexError and the device stays usable."""

import pytest
import torch
import torch.nn.functional as F

import npusim


def classification(rows, classes, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, classes, generator=generator) * 3
    targets = torch.randint(0, classes, (rows,), generator=generator)
    return logits, targets


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_and_its_gradient_run_natively_and_match_cpu(reduction, weighted, device):
    logits, targets = classification(37, 11, seed=1)
    targets[[3, 20]] = -100  # ignored rows contribute nothing, not even weight
    weight = torch.rand(11, generator=torch.Generator().manual_seed(2)) + 0.1 if weighted else None
    x = logits.clone().requires_grad_()
    x_device = logits.to(device).requires_grad_()
    with npusim.profile() as report:
        loss = F.cross_entropy(
            x_device, targets.to(device), weight=None if weight is None else weight.to(device), reduction=reduction
        )
        loss.backward(torch.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape).to(device))
    assert report.fallbacks == {}
    assert {"nll_loss_f32", "nll_loss_backward_f32"} <= {k.name for k in report.kernels}
    expected = F.cross_entropy(x, targets, weight=weight, reduction=reduction)
    expected.backward(torch.linspace(0.5, 1.5, expected.numel()).reshape(expected.shape))
    torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    torch.testing.assert_close(x_device.grad.cpu(), x.grad)


def test_single_sample_custom_ignore_index_and_all_ignored(device):
    log_probs = torch.log_softmax(torch.randn(6, generator=torch.Generator().manual_seed(3)), 0)
    target = torch.tensor(4)
    torch.testing.assert_close(F.nll_loss(log_probs.to(device), target.to(device)).cpu(), F.nll_loss(log_probs, target))
    batch, targets = classification(5, 4, seed=4)
    for ignore in (2, 0):
        actual = F.nll_loss(batch.to(device), targets.to(device), ignore_index=ignore, reduction="sum")
        torch.testing.assert_close(actual.cpu(), F.nll_loss(batch, targets, ignore_index=ignore, reduction="sum"))
    every_row_ignored = torch.full((5,), 7)
    actual = F.nll_loss(batch.to(device), every_row_ignored.to(device), ignore_index=7)  # 0 / 0, as on the CPU
    assert torch.isnan(actual.cpu()) and torch.isnan(F.nll_loss(batch, every_row_ignored, ignore_index=7))


@pytest.mark.parametrize("bad_target", [4, -1])
def test_target_out_of_range_is_an_index_error_and_the_device_stays_usable(bad_target, device):
    batch, targets = classification(3, 4, seed=5)
    targets[1] = bad_target
    with pytest.raises(IndexError, match="Target is out of bounds"):
        F.nll_loss(batch.to(device), targets.to(device))
    targets[1] = 3
    torch.testing.assert_close(F.nll_loss(batch.to(device), targets.to(device)).cpu(), F.nll_loss(batch, targets))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_over_images_folds_into_rows(reduction, device):
    """The 2-D loss (nll_loss2d: [N, C, H, W] log-probabilities, [N, H, W] targets) runs as the row kernel over
    N*H*W rows, forward and backward, with weights and ignored pixels."""
    generator = torch.Generator().manual_seed(7)
    logits = torch.randn(2, 5, 3, 4, generator=generator) * 2
    targets = torch.randint(0, 5, (2, 3, 4), generator=generator)
    targets[0, 1, 2] = -100
    weight = torch.rand(5, generator=generator) + 0.5
    x, x_device = logits.clone().requires_grad_(), logits.to(device).requires_grad_()
    with npusim.profile() as report:
        loss = F.cross_entropy(x_device, targets.to(device), weight=weight.to(device), reduction=reduction)
        loss.backward(torch.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape).to(device))
    assert report.fallbacks == {}
    expected = F.cross_entropy(x, targets, weight=weight, reduction=reduction)
    expected.backward(torch.linspace(0.5, 1.5, expected.numel()).reshape(expected.shape))
    assert loss.shape == expected.shape
    torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    torch.testing.assert_close(x_device.grad.cpu(), x.grad)
    with pytest.raises(IndexError):
        F.cross_entropy(x_device, torch.full((2, 3, 4), 9).to(device))
