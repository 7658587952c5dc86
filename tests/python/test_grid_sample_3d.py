"""F.grid_sample of 5-D inputs (grid_sampler_3d) on the device, against the CPU with no CPU fallback: trilinear and
nearest sampling with every padding mode and either alignment, bit for bit, and a volumetric spatial transformer's
sampling step (F.affine_grid then F.grid_sample), and the gradients of the volume and the grid (autograd over the
same composition, composition_gradients.h)."""

import pytest
import torch
import torch.nn.functional as F

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(no_fallback):
    pass


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_sampling_is_the_cpus_bit_for_bit(mode, padding_mode, align_corners):
    generator = torch.Generator().manual_seed(0)
    volume = torch.randn(2, 3, 4, 5, 6, generator=generator)
    grid = torch.rand(2, 3, 4, 5, 3, generator=generator) * 2.4 - 1.2  # some points outside the volume
    arguments = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    expected = F.grid_sample(volume, grid, **arguments)
    actual = F.grid_sample(volume.to("npusim"), grid.to("npusim"), **arguments)
    assert actual.shape == expected.shape and torch.equal(actual.cpu(), expected)


def test_a_volumetric_spatial_transformer_samples_as_on_the_cpu():
    volume = torch.randn(2, 4, 8, 8, 8)
    angle = torch.tensor(0.3)
    rotation = torch.tensor(
        [
            [torch.cos(angle), -torch.sin(angle), 0.0, 0.1],
            [torch.sin(angle), torch.cos(angle), 0.0, 0.0],
            [0, 0, 1, -0.2],
        ]
    )
    theta = rotation.expand(2, 3, 4)
    expected = F.grid_sample(volume, F.affine_grid(theta, [2, 4, 6, 6, 6], align_corners=False), align_corners=False)
    grid = F.affine_grid(theta.to("npusim"), [2, 4, 6, 6, 6], align_corners=False)
    actual = F.grid_sample(volume.to("npusim"), grid, align_corners=False)
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_gradients_of_the_volume_and_the_grid_match_the_cpu(mode, padding_mode, align_corners):
    generator = torch.Generator().manual_seed(1)
    volume = torch.randn(2, 3, 4, 5, 6, generator=generator)
    grid = torch.rand(2, 3, 4, 5, 3, generator=generator) * 2.4 - 1.2
    weights = torch.randn(2, 3, 3, 4, 5, generator=generator)
    arguments = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    on_cpu = [volume.clone().requires_grad_(), grid.clone().requires_grad_()]
    on_device = [volume.to("npusim").requires_grad_(), grid.to("npusim").requires_grad_()]
    expected = torch.autograd.grad(F.grid_sample(*on_cpu, **arguments), on_cpu, weights)
    actual = torch.autograd.grad(F.grid_sample(*on_device, **arguments), on_device, weights.to("npusim"))
    for got, want in zip(actual, expected, strict=True):
        assert got.device.type == "npusim"
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)  # sums in another order than the CPU's
    if mode == "nearest":
        assert torch.equal(actual[1].cpu(), torch.zeros_like(grid))  # rounding: the grid's gradient is zero


def test_only_the_gradient_asked_for_is_computed():
    volume = torch.randn(1, 2, 3, 3, 3, device="npusim", requires_grad=True)
    grid = torch.rand(1, 2, 2, 2, 3, device="npusim") * 2 - 1
    F.grid_sample(volume, grid, align_corners=True).sum().backward()
    assert volume.grad.shape == volume.shape and grid.grad is None
    # the volume's gradient: each grid point's weights sum to 1 at every channel, when no corner is outside
    torch.testing.assert_close(volume.grad.sum().cpu(), torch.tensor(2.0 * 8))
