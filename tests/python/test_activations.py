"""Activations with scalar arguments on npusim against the same functions on the CPU, forward and backward, over
inputs that include their branch points (0, ±3, 6, the softplus threshold), NaN and infinities: leaky_relu,
hardswish, hardtanh and relu6, elu, selu and celu, softplus and mish. Each runs as one emitted kernel per call."""

import pytest
import torch
import torch.nn.functional as F

import npusim

INPUTS = torch.cat(
    [
        torch.randn(300, generator=torch.Generator().manual_seed(0)) * 4,
        torch.tensor([0.0, -0.0, 3.0, -3.0, 6.0, -6.0, 1.5, -2.0, 10.0, 20.0, 25.0, -100.0, 1.0, -1.0]),
        torch.tensor([float("nan"), float("inf"), float("-inf")]),
    ]
)

# name: (function, whether the CPU's result is reproduced bit for bit; the others go through exp and log, which
# npusim evaluates in binary64 and rounds once, and so may differ from the CPU's float kernels in the last bit)
ACTIVATIONS = {
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.1), True),
    "hardswish": (F.hardswish, True),
    "hardtanh": (lambda t: F.hardtanh(t, -2.0, 1.5), True),
    "relu6": (F.relu6, True),
    "elu": (F.elu, False),
    "selu": (F.selu, False),
    "celu": (lambda t: F.celu(t, 0.7), False),
    "softplus": (F.softplus, False),
    "softplus with beta and threshold": (lambda t: F.softplus(t, 2.0, 10.0), False),
    "mish": (F.mish, False),
}


def compare(actual, expected, exact):
    if exact:
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    else:
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_and_its_gradient_match_cpu(name):
    function, exact = ACTIVATIONS[name]
    npusim._C.reset_fallback_counts()
    on_cpu = INPUTS.clone().requires_grad_()
    on_device = INPUTS.to("npusim").requires_grad_()
    expected, actual = function(on_cpu), function(on_device)
    compare(actual.detach(), expected.detach(), exact)
    gradient = torch.linspace(-1, 1, INPUTS.numel())
    expected.backward(gradient)
    actual.backward(gradient.to("npusim"))
    compare(on_device.grad, on_cpu.grad, exact)
    # mish's backward is the one left to the CPU
    assert set(npusim._C.fallback_counts()) <= ({"aten::mish_backward"} if name == "mish" else set())


@pytest.mark.parametrize("name", ["leaky_relu", "hardswish", "elu", "hardtanh"])
def test_in_place_forms_match_cpu(name):
    in_place = {
        "leaky_relu": lambda t: F.leaky_relu(t, 0.2, inplace=True),
        "hardswish": lambda t: F.hardswish(t, inplace=True),
        "elu": lambda t: F.elu(t, inplace=True),
        "hardtanh": lambda t: F.hardtanh(t, inplace=True),
    }[name]
    on_device = INPUTS.to("npusim")
    in_place(on_device)
    expected = INPUTS.clone()
    in_place(expected)
    compare(on_device, expected, name != "elu")


def test_activations_of_other_dtypes_take_the_fallback_and_stay_correct():
    x = torch.randn(10, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(F.leaky_relu(x.to("npusim"), 0.3).cpu(), F.leaky_relu(x, 0.3))


def test_a_network_of_these_activations_trains_natively_and_follows_cpu():
    from conftest import train_side_by_side

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.LeakyReLU(0.05), torch.nn.Linear(16, 16), torch.nn.Hardswish(),
            torch.nn.Linear(16, 16), torch.nn.ELU(), torch.nn.Linear(16, 16), torch.nn.Softplus(),
            torch.nn.Linear(16, 16), torch.nn.ReLU6(), torch.nn.Linear(16, 2),
        )  # fmt: skip

    model, reference = make().to("npusim"), make()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x = torch.randn(12, 8, generator=torch.Generator().manual_seed(2))
    y = torch.randn(12, 2, generator=torch.Generator().manual_seed(3))
    losses, expected, _ = train_side_by_side(
        model, reference, optimizer, reference_optimizer, lambda net, a, b: F.mse_loss(net(a), b), x, y
    )
    torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-5)
