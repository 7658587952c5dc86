"""3-D convolutions (nn.Conv3d, nn.ConvTranspose3d) on npusim against the CPU: forward and every gradient, any stride,
padding, dilation, output padding and groups, half precision, and a small video-style network's training steps, all
without CPU fallback."""

import pytest
import torch
import torch.nn.functional as F
from conftest import train_side_by_side

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def forward_and_backward(function, inputs, where):
    leaves = [t.detach().to(where).requires_grad_() for t in inputs]
    out = function(*leaves)
    out.backward(random(*out.shape, seed=99).to(where))
    return out.detach().cpu(), [leaf.grad.cpu() for leaf in leaves]


# (name, input shape, weight shape, keyword arguments): the weight's depth is its third dimension.
CONVOLUTIONS = [
    ("3x3x3 padded", (2, 3, 5, 6, 7), (4, 3, 3, 3, 3), {"padding": 1}),
    ("strided in depth only", (1, 2, 9, 5, 5), (3, 2, 3, 1, 1), {"stride": (2, 1, 1)}),
    (
        "strided, dilated, grouped",
        (2, 4, 8, 7, 6),
        (6, 2, 2, 3, 2),
        {"stride": (2, 1, 2), "padding": (1, 0, 1), "dilation": (3, 1, 2), "groups": 2},
    ),
    ("depthwise", (1, 4, 4, 5, 5), (4, 1, 3, 3, 3), {"padding": (0, 1, 1), "groups": 4}),
    ("pointwise", (2, 5, 3, 4, 4), (6, 5, 1, 1, 1), {}),
    ("patch embedding", (2, 3, 8, 8, 8), (8, 3, 2, 4, 4), {"stride": (2, 4, 4)}),  # VideoMAE's tubelets
]


@pytest.mark.parametrize("name, input_shape, weight_shape, arguments", CONVOLUTIONS, ids=[c[0] for c in CONVOLUTIONS])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no bias"])
def test_conv3d_and_its_gradients_match_the_cpu(device, no_fallback, name, input_shape, weight_shape, arguments, bias):
    inputs = [random(*input_shape, seed=1), random(*weight_shape, seed=2)]
    if bias:
        inputs.append(random(weight_shape[0], seed=3))
    out, grads = forward_and_backward(lambda *t: F.conv3d(*t, **arguments), inputs, device)
    expected, expected_grads = forward_and_backward(lambda *t: F.conv3d(*t, **arguments), inputs, "cpu")
    torch.testing.assert_close(out, expected, **TOLERANCE)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


TRANSPOSED = [
    ("stride 2", (2, 3, 3, 4, 4), (3, 4, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    (
        "output padding past the stride",  # allowed where the dilation is larger: one more window than input depths
        (1, 4, 3, 3, 4),
        (4, 3, 2, 2, 3),
        {"stride": (1, 2, 1), "dilation": (3, 1, 2), "output_padding": (2, 1, 0), "groups": 2},
    ),
    ("grouped, padded", (1, 4, 4, 5, 3), (4, 2, 3, 3, 2), {"stride": (2, 1, 1), "padding": (1, 1, 0), "groups": 2}),
]


@pytest.mark.parametrize("name, input_shape, weight_shape, arguments", TRANSPOSED, ids=[c[0] for c in TRANSPOSED])
def test_conv_transpose3d_and_its_gradients_match_the_cpu(device, no_fallback, name, input_shape, weight_shape,
                                                          arguments):  # fmt: skip
    out_channels = weight_shape[1] * arguments.get("groups", 1)
    inputs = [random(*input_shape, seed=1), random(*weight_shape, seed=2), random(out_channels, seed=3)]
    out, grads = forward_and_backward(lambda *t: F.conv_transpose3d(*t, **arguments), inputs, device)
    expected, expected_grads = forward_and_backward(lambda *t: F.conv_transpose3d(*t, **arguments), inputs, "cpu")
    torch.testing.assert_close(out, expected, **TOLERANCE)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, **TOLERANCE)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_conv3d_is_the_float32_result_rounded_once(device, no_fallback, dtype):
    x, w, b = random(2, 3, 4, 5, 5, seed=1), random(4, 3, 2, 3, 3, seed=2), random(4, seed=3)
    x, w, b = (t.to(dtype) for t in (x, w, b))
    out = F.conv3d(x.to(device), w.to(device), b.to(device), padding=1)
    assert out.dtype == dtype
    expected = F.conv3d(x.float(), w.float(), b.float(), padding=1).to(dtype)
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)


def test_conv3d_output_is_contiguous_like_the_cpus(device):
    x, w = random(1, 2, 4, 4, 4), random(3, 2, 3, 3, 3)
    out = F.conv3d(x.to(device), w.to(device), stride=(1, 2, 1), padding=1)
    expected = F.conv3d(x, w, stride=(1, 2, 1), padding=1)
    assert out.shape == expected.shape and out.stride() == expected.stride() and out.storage_offset() == 0


def test_a_video_network_trains_like_on_the_cpu(no_fallback):
    def network():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv3d(3, 8, (2, 4, 4), stride=(2, 4, 4)),  # tubelet embedding
            torch.nn.ReLU(),
            torch.nn.Conv3d(8, 8, 3, padding=1, groups=2),
            torch.nn.ReLU(),
            torch.nn.ConvTranspose3d(8, 4, 2, stride=2),
            torch.nn.Flatten(),
            torch.nn.LazyLinear(5),
        )

    reference = network()
    reference(random(1, 3, 4, 8, 8))  # materialises the lazy layer before the weights are copied
    model = network()
    model(random(1, 3, 4, 8, 8))
    model.load_state_dict(reference.state_dict())
    model.to("npusim")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    inputs, targets = random(2, 3, 4, 8, 8, seed=5), torch.tensor([1, 3])
    losses, expected_losses, _ = train_side_by_side(
        model, reference, optimizer, reference_optimizer, lambda net, x, y: F.cross_entropy(net(x), y), inputs,
        targets, steps=3,
    )  # fmt: skip
    torch.testing.assert_close(losses, expected_losses, rtol=1e-4, atol=1e-5)
    assert losses[-1] < losses[0]
