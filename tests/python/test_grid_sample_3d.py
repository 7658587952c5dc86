"""F.grid_sample of 5-D inputs (grid_sampler_3d) on the device, against the CPU with no CPU fallback: trilinear and
nearest sampling with every padding mode and either alignment, bit for bit, and a volumetric spatial transformer's
sampling step (F.affine_grid then F.grid_sample). Its backward takes the CPU fallback (README)."""

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
