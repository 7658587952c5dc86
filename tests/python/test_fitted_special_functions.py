"""special.erfcx, special.log_ndtr and special.airy_ai on npusim (fitted_special_functions.cpp, from the polynomials
tools/fit_special_functions.py fits) against the CPU's kernels and against SciPy's double-precision functions, over
arguments that cross every branch and piece boundary, reach where the functions overflow or vanish, and include
zeros, infinities and NaN."""

import numpy as np
import pytest
import torch
from scipy import special

import npusim  # noqa: F401  registers the device

# Where a formula changes branch or fitted piece: erfcx at 1/2 and 50 and its pieces' ends in y = 4 / (4 + x) (x = 4
# / y - 4 for y = 4/54 + k (1 - 4/54) / 4), log_ndtr at -1, Ai at +-2.09.
ERFCX_PIECE_ENDS = [4 / y - 4 for y in np.linspace(4 / 54, 1, 5)[1:-1]]
BRANCH_POINTS = torch.tensor([0.5, 50.0, -1.0, 2.09, -2.09, *ERFCX_PIECE_ENDS], dtype=torch.float32)
ARGUMENTS = torch.cat(
    [
        torch.linspace(-30, 60, 9001),
        BRANCH_POINTS,
        torch.nextafter(BRANCH_POINTS, torch.tensor(-100.0)),
        torch.nextafter(BRANCH_POINTS, torch.tensor(100.0)),
        torch.tensor([0.0, -0.0, 1e-7, 1e-30, 1e3, 1e8, 1e20, -1e20, float("inf"), float("-inf"), float("nan")]),
    ]
)
FUNCTIONS = [torch.special.erfcx, torch.special.log_ndtr, torch.special.airy_ai]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_matches_the_cpu(monkeypatch, function):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    # Ai far left oscillates with a phase of 2/3 |x|^1.5 that float32 rounds (the CPU's as much as npusim's): compared
    # where the phase still has digits to spare.
    arguments = ARGUMENTS[ARGUMENTS.abs() < 1e4] if function is torch.special.airy_ai else ARGUMENTS
    expected = function(arguments)
    actual = function(arguments.to("npusim")).cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=4e-6, atol=2e-5)


def errors_against_scipy(function, exact, arguments):
    actual = function(torch.from_numpy(arguments).to("npusim")).cpu().double().numpy()
    return np.abs(actual - exact(arguments.astype(np.float64)))


def test_erfcx_is_accurate_to_a_few_ulps():
    arguments = np.concatenate([np.linspace(0, 60, 20001), np.geomspace(60, 1e30, 200)]).astype(np.float32)
    exact = special.erfcx(arguments.astype(np.float64))
    assert (errors_against_scipy(torch.special.erfcx, special.erfcx, arguments) / exact).max() < 5e-7  # 4 ulps
    # Left of 0, exp(x^2) carries x^2's float32 rounding: up to x^2 2^-24 relative.
    left = np.linspace(-9, 0, 9001).astype(np.float32)
    bound = (left.astype(np.float64) ** 2 + 4) * 2.0**-24
    assert np.all(errors_against_scipy(torch.special.erfcx, special.erfcx, left) / special.erfcx(left) < bound)


def test_log_ndtr_keeps_its_far_tails():
    arguments = np.linspace(-40, 12, 20001).astype(np.float32)
    exact = special.log_ndtr(arguments.astype(np.float64))
    relative = errors_against_scipy(torch.special.log_ndtr, special.log_ndtr, arguments) / np.abs(exact)
    assert relative.max() < 2e-6
    # 1 - erf(x / sqrt 2) would be 0 out here: the tail comes from erfcx.
    tail = torch.special.log_ndtr(torch.tensor([8.0, 10.0], device="npusim")).cpu().double().numpy()
    np.testing.assert_allclose(tail, special.log_ndtr([8.0, 10.0]), rtol=1e-5)


def test_airy_ai_follows_its_decay_and_its_oscillation():
    right = np.linspace(0, 25, 10001).astype(np.float32)
    exact = special.airy(right.astype(np.float64))[0]
    relative = errors_against_scipy(torch.special.airy_ai, lambda v: special.airy(v)[0], right) / exact
    assert relative.max() < 2e-5  # exp(-zeta) carries zeta's rounding: 2/3 25^1.5 2^-24 = 5e-6 at the far end
    left = np.linspace(-30, 0, 10001).astype(np.float32)
    envelope = np.maximum(np.abs(left.astype(np.float64)), 1e-3) ** -0.25 / np.sqrt(np.pi)
    error = errors_against_scipy(torch.special.airy_ai, lambda v: special.airy(v)[0], left)
    assert (error / np.minimum(envelope, 0.6)).max() < 2e-5


def test_exact_values_and_specials():
    x = torch.tensor([0.0, float("inf"), float("-inf"), float("nan")], device="npusim")
    assert torch.special.erfcx(x).cpu().tolist()[:3] == [1.0, 0.0, float("inf")]
    assert torch.special.log_ndtr(x).cpu().tolist()[1:3] == [0.0, float("-inf")]
    assert torch.special.airy_ai(x).cpu()[1:].isnan().all()  # infinities give NaN, as on the CPU
    assert all(f(x).cpu()[3].isnan() for f in FUNCTIONS)


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_out_and_gradients(monkeypatch, function):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    x = torch.linspace(-3, 5, 48).view(6, 8).t()
    out = torch.empty(0, device="npusim")
    function(x.to("npusim"), out=out)
    assert out.stride() == function(x).stride()
    torch.testing.assert_close(out.cpu(), function(x))
    if function is torch.special.airy_ai:
        return  # PyTorch defines no derivative for Ai
    on_cpu = x.clone().requires_grad_()
    on_device = x.to("npusim").requires_grad_()
    function(on_cpu).sum().backward()
    function(on_device).sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)
