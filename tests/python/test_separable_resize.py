"""Bicubic and antialiased resizing (F.interpolate(mode="bicubic"), antialias=True) on npusim against the CPU: up and
down, any sizes and scale factors, align_corners or not, the gradient, half precision, and a vision transformer's
position embeddings resized to another image size, with no CPU fallback."""

import pytest
import torch
import torch.nn.functional as F

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def forward_and_backward(x, where, mode="bicubic", **arguments):
    leaf = x.detach().to(where).requires_grad_()
    out = F.interpolate(leaf, mode=mode, **arguments)
    out.backward(random(*out.shape, seed=5).to(where))
    return out.detach().cpu(), leaf.grad.cpu()


RESIZES = [
    {"size": (9, 13)},
    {"size": (3, 4)},  # down: taps far apart, the edge clamped
    {"size": (1, 1)},
    {"scale_factor": 2.0},
    {"scale_factor": (0.7, 1.6)},
    {"scale_factor": (1.5, 2.5), "recompute_scale_factor": True},
]


@pytest.mark.parametrize("arguments", RESIZES, ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_resize_and_its_gradient_match_the_cpu(device, no_fallback, arguments, align_corners):
    x = random(2, 3, 6, 7, seed=1)
    out, grad = forward_and_backward(x, device, align_corners=align_corners, **arguments)
    expected, expected_grad = forward_and_backward(x, "cpu", align_corners=align_corners, **arguments)
    torch.testing.assert_close(out, expected, **TOLERANCE)
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


@pytest.mark.parametrize("size", [(8, 9), (30, 40), (5, 23), (1, 1)], ids=str)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialiased_resize_and_its_gradient_match_the_cpu(device, no_fallback, size, mode, align_corners):
    x = random(2, 3, 17, 23, seed=6)  # shrinking widens each output's window by the scale; growing does not
    arguments = {"size": size, "mode": mode, "antialias": True, "align_corners": align_corners}
    out, grad = forward_and_backward(x, device, **arguments)
    expected, expected_grad = forward_and_backward(x, "cpu", **arguments)
    torch.testing.assert_close(out, expected, **TOLERANCE)
    torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_the_float32_result_rounded_once(device, no_fallback, dtype):
    x = random(1, 2, 5, 5, seed=2).to(dtype)
    out = F.interpolate(x.to(device), size=(8, 11), mode="bicubic")
    assert out.dtype == dtype
    expected = F.interpolate(x.float(), size=(8, 11), mode="bicubic").to(dtype)
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


def test_out_form_writes_into_the_given_tensor(device, no_fallback):
    x = random(1, 1, 4, 4, seed=3)
    out = torch.empty(0, device=device)
    torch.ops.aten.upsample_bicubic2d.out(x.to(device), [6, 5], False, None, None, out=out)
    torch.testing.assert_close(out.cpu(), F.interpolate(x, size=(6, 5), mode="bicubic"), **TOLERANCE)


def test_position_embeddings_resized_for_another_image_size(device, no_fallback):
    # As ViT-style models interpolate their learned patch-position grid (14 x 14 for 224-pixel images) to 384 pixels.
    grid = random(1, 14 * 14, 32, seed=4).reshape(1, 14, 14, 32).permute(0, 3, 1, 2)
    resized = F.interpolate(grid.to(device), size=(24, 24), mode="bicubic", align_corners=False)
    expected = F.interpolate(grid, size=(24, 24), mode="bicubic", align_corners=False)
    torch.testing.assert_close(resized.cpu(), expected, **TOLERANCE)


def test_bad_sizes_raise_pytorchs_error_and_the_device_stays_usable(device):
    x = random(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match="sizes should be greater than 0"):
        F.interpolate(x, size=(0, 3), mode="bicubic")
    with pytest.raises(RuntimeError, match="sizes should be greater than 0"):
        F.interpolate(x.to(device), size=(0, 3), mode="bicubic")
    assert F.interpolate(x.to(device), size=(2, 3), mode="bicubic").shape == (1, 1, 2, 3)
