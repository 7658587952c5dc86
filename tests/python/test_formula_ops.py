"""Elementwise functions declared as formulas (pointwise_formula.h: one fused kernel each) against the CPU: values
across each function's domain plus its special points (zeros of both signs, infinities, NaN, poles, the ends of the
domain), every variant (functional, in-place, out=), half precision and integer inputs, all without CPU fallback."""

import math

import pytest
import torch
import torch.nn.functional as F

import npusim

INF, NAN = math.inf, math.nan


def values(low, high, special, count=4000, seed=0):
    """`count` values uniform in [low, high), then the special ones."""
    generator = torch.Generator().manual_seed(seed)
    spread = torch.rand(count, generator=generator) * (high - low) + low
    return torch.cat([spread, torch.tensor(special, dtype=torch.float32)])


EDGES = [0.0, -0.0, INF, -INF, NAN]

# (name, function of one tensor, low, high, special values, tolerances). The functions' formulas round a few times
# where the CPU calls libm once: a few float32 ulps, or an absolute 1e-6 where a result passes through zero.
UNARY = [
    ("erfc", torch.erfc, -5, 5, EDGES, {"rtol": 1e-6, "atol": 1e-6}),
    ("exp2", torch.exp2, -100, 100, [*EDGES, 127.0, 128.0, -126.0, 1e30, -1e30], {"rtol": 4e-7, "atol": 0}),
    ("log2", torch.log2, 0, 1e6, [*EDGES, 1.0, 8.0, -1.0, 1e-40], {"rtol": 1e-6, "atol": 1e-6}),
    ("log10", torch.log10, 0, 1e6, [*EDGES, 1.0, 1000.0, -1.0], {"rtol": 1e-6, "atol": 1e-6}),
    ("hardshrink", F.hardshrink, -2, 2, [*EDGES, 0.5, -0.5], {"rtol": 0, "atol": 0}),
    ("softshrink", lambda x: F.softshrink(x, 0.75), -2, 2, [*EDGES, 0.75, -0.75], {"rtol": 0, "atol": 0}),
    ("hardsigmoid", F.hardsigmoid, -5, 5, [*EDGES, 3.0, -3.0], {"rtol": 2e-7, "atol": 0}),
    ("threshold", lambda x: F.threshold(x, 0.25, -7.0), -1, 1, [*EDGES, 0.25], {"rtol": 0, "atol": 0}),
    ("isposinf", torch.isposinf, -1, 1, EDGES, {}),
    ("isneginf", torch.isneginf, -1, 1, EDGES, {}),
    ("signbit", torch.signbit, -1, 1, EDGES, {}),
    ("sinc", torch.sinc, -10, 10, [*EDGES, 1.0, -2.0], {"rtol": 1e-6, "atol": 1e-6}),
    ("logit", torch.logit, 0, 1, [*EDGES, 1.0, 0.5, 2.0, -1.0], {"rtol": 1e-6, "atol": 1e-6}),
    ("logit eps", lambda x: torch.logit(x, eps=1e-3), -0.5, 1.5, [*EDGES, 1.0], {"rtol": 1e-6, "atol": 1e-6}),
    ("entr", torch.special.entr, -1, 10, [*EDGES, 1.0], {"rtol": 1e-6, "atol": 1e-6}),
    ("atan", torch.atan, -20, 20, [*EDGES, 0.4142135, 2.4142137, 1e30], {"rtol": 4e-7, "atol": 0}),
    ("asin", torch.asin, -1, 1, [*EDGES, 1.0, -1.0, 1.5, 0.99999], {"rtol": 4e-7, "atol": 1e-7}),
    ("acos", torch.acos, -1, 1, [*EDGES, 1.0, -1.0, 1.5, 0.99999, -0.99999], {"rtol": 4e-7, "atol": 1e-7}),
    ("asinh", torch.asinh, -1e4, 1e4, [*EDGES, 1e-30, -1e-6, 1e20, -3e38], {"rtol": 4e-7, "atol": 0}),
    ("asinh near 0", torch.asinh, -2, 2, [], {"rtol": 4e-7, "atol": 0}),
    ("acosh", torch.acosh, 1, 1e4, [*EDGES, 1.0, 1.0000001, 0.5, 3e38], {"rtol": 4e-7, "atol": 1e-7}),
    ("atanh", torch.atanh, -1, 1, [*EDGES, 1.0, -1.0, 1.5, -2.0, 1e-30], {"rtol": 4e-7, "atol": 1e-7}),
    (
        "erfinv",
        torch.erfinv,
        -0.9999,
        0.9999,
        [*EDGES, 1.0, -1.0, 1.5, 0.7, 0.7000001, 1e-30],
        {"rtol": 1e-6, "atol": 1e-6},
    ),
    # Within 1e-4 of +-1 erf's slope is so small that one float32 step of y moves erfinv by up to 0.06: the CPU's
    # result is the correctly rounded one, npusim's float32 Newton steps stop anywhere within that step (a few 1e-5
    # off).
    ("erfinv near 1", torch.erfinv, 0.9999, 1, [0.9999999, -0.9999999, 0.99999994], {"rtol": 1e-5, "atol": 0}),
    (
        "ndtri",
        torch.special.ndtri,
        0,
        1,
        [*EDGES, 1.0, 0.5, 1.5, -0.5, 0.1353353, 0.8646647, 1e-20, 1e-38, 0.99999994],
        {"rtol": 1e-6, "atol": 1e-6},
    ),
    ("lgamma", torch.lgamma, -20, 40, [*EDGES, 1.0, 2.0, -1.0, -2.5, 1e30, -1e10, 1e-30], {"rtol": 1e-6, "atol": 5e-6}),
    (
        "digamma",
        torch.digamma,
        -20,
        40,
        [*EDGES, 1.0, 1.4616321, -1.0, -2.5, 1e30, 1e-30],
        {"rtol": 1e-6, "atol": 5e-6},
    ),
]


@pytest.mark.parametrize("name, function, low, high, special, tolerance", UNARY, ids=[u[0] for u in UNARY])
def test_unary_formula_matches_cpu(name, function, low, high, special, tolerance, device, no_fallback):
    x = values(low, high, special)
    expected = function(x)
    result = function(x.to(device)).cpu()
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result, expected, equal_nan=True, **tolerance)


BINARY = [
    ("fmax", torch.fmax, {"rtol": 0, "atol": 0}),
    ("fmin", torch.fmin, {"rtol": 0, "atol": 0}),
    ("heaviside", torch.heaviside, {"rtol": 0, "atol": 0}),
    ("copysign", torch.copysign, {"rtol": 0, "atol": 0}),
    ("logaddexp2", torch.logaddexp2, {"rtol": 1e-6, "atol": 1e-6}),
    ("xlog1py", torch.special.xlog1py, {"rtol": 1e-6, "atol": 1e-6}),
    ("atan2", torch.atan2, {"rtol": 4e-7, "atol": 1e-7}),
]


@pytest.mark.parametrize("name, function, tolerance", BINARY, ids=[b[0] for b in BINARY])
def test_binary_formula_matches_cpu_on_every_pair_of_special_values(name, function, tolerance, device, no_fallback):
    special = [*EDGES, 1.0, -1.0, 0.5, -2.5, 1e30]
    a = torch.cat([values(-5, 5, [], count=300, seed=1), torch.tensor(special).repeat_interleave(len(special))])
    b = torch.cat([values(-5, 5, [], count=300, seed=2), torch.tensor(special).repeat(len(special))])
    torch.testing.assert_close(function(a.to(device), b.to(device)).cpu(), function(a, b), equal_nan=True, **tolerance)
    # broadcast: a column against a row
    column, row = a[:40].view(40, 1), b[:30].view(1, 30)
    torch.testing.assert_close(
        function(column.to(device), row.to(device)).cpu(), function(column, row), equal_nan=True, **tolerance
    )


def test_every_variant_and_dtype_takes_the_formula(device, no_fallback):
    """In place, out= (resized, or of a given shape), a strided input, float16 and bfloat16 (widened on the device),
    integers (converted there) and a host scalar operand."""
    x = values(-3, 3, [], count=60).view(6, 10)
    y = x.to(device)
    y.erfc_()
    torch.testing.assert_close(y.cpu(), torch.erfc(x), rtol=1e-6, atol=1e-6)
    out = torch.empty(0, device=device)
    torch.atan(x.t().to(device), out=out)
    torch.testing.assert_close(out.cpu(), torch.atan(x.t()), rtol=4e-7, atol=0)
    strided = x.to(device)[:, ::3]
    torch.testing.assert_close(torch.lgamma(strided).cpu(), torch.lgamma(x[:, ::3]), rtol=1e-6, atol=5e-6)
    for dtype in (torch.float16, torch.bfloat16):
        result = torch.asinh(x.to(device, dtype))
        assert result.dtype == dtype
        torch.testing.assert_close(result.cpu(), torch.asinh(x.to(dtype).float()).to(dtype))
    integers = torch.arange(-5, 5, dtype=torch.int32)
    torch.testing.assert_close(torch.exp2(integers.to(device)).cpu(), torch.exp2(integers), rtol=0, atol=0)
    assert torch.signbit(integers.to(device)).cpu().tolist() == torch.signbit(integers).tolist()
    scalar = torch.tensor(0.5)
    torch.testing.assert_close(torch.heaviside(x.to(device), scalar).cpu(), torch.heaviside(x, scalar))
    first = torch.atan2(scalar, x.to(device))  # a host scalar first: the result still on npusim
    assert first.device.type == "npusim"
    torch.testing.assert_close(first.cpu(), torch.atan2(scalar, x), rtol=4e-7, atol=1e-7)


@pytest.mark.parametrize("n", range(1, 11))
def test_polygamma_matches_the_cpus_double_precision_values(n, device, no_fallback):
    """Orders 1 to 10 natively (0 is digamma): shifted Hurwitz zeta sums, two shifts down to -16. Compared with the
    CPU's float64 values, since its float32 kernel is itself off near the poles; the sum's terms nearly cancel near
    the negative half-integers, so the absolute error there is bounded by the largest term's rounding, n! 2^(n+1)
    ulps-ish. The poles give (-1)^(n+1) infinity."""
    x = torch.cat([torch.linspace(-16, 8.5, 4001), torch.tensor([1e-3, 30.0, 1e4, NAN])])
    x = x[~((x <= 0) & (x == x.round()))]
    result = torch.polygamma(n, x.to(device)).cpu()
    expected = torch.polygamma(n, x.double()).float()  # beyond float32's range: infinity
    torch.testing.assert_close(
        result, expected, rtol=2e-6, atol=1e-6 * math.factorial(n) * 2 ** (n + 1), equal_nan=True
    )
    poles = torch.tensor([0.0, -1.0, -8.0, -12.0])
    assert torch.polygamma(n, poles.to(device)).cpu().tolist() == [(-1) ** (n + 1) * INF] * 4


def test_polygamma_of_order_zero_is_digamma(device, no_fallback):
    x = values(-20, 40, [*EDGES, 1.0, -2.5])
    torch.testing.assert_close(
        torch.polygamma(0, x.to(device)).cpu(), torch.polygamma(0, x), rtol=1e-6, atol=5e-6, equal_nan=True
    )


def test_polygamma_of_higher_orders_falls_back(device):
    x = torch.linspace(0.5, 3, 7)
    npusim._C.reset_fallback_counts()
    torch.testing.assert_close(torch.polygamma(11, x.to(device)).cpu(), torch.polygamma(11, x))
    assert npusim._C.fallback_counts() == {"aten::polygamma.out": 1}


def test_a_formula_op_names_its_kernel(device):
    x = values(-1, 1, [], count=10).to(device)
    with npusim.profile() as report:
        torch.atan2(x, x + 2)
    assert [k.name for k in report.kernels if k.op == "aten::atan2"] == ["atan2_f32"]


def test_in_place_that_would_broadcast_raises_as_on_the_cpu(device):
    x, wide = torch.ones(3, 1), torch.ones(3, 4)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.to(device).atan2_(wide.to(device))
    with pytest.raises(RuntimeError):
        x.atan2_(wide)


def test_pow_of_two_tensors(device, no_fallback):
    """exp(b log |a|) with C's cases: zeros of both signs, negative bases with whole and fractional exponents,
    infinities and NaN (pow(1, NaN) and pow(NaN, 0) are 1). About |b log a| ulps off, so moderate exponents."""
    special = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, INF, -INF, NAN]
    generator = torch.Generator().manual_seed(9)
    a = torch.cat([torch.rand(2000, generator=generator) * 20 - 10, torch.tensor(special).repeat_interleave(10)])
    b = torch.cat([torch.rand(2000, generator=generator) * 30 - 15, torch.tensor(special).repeat(10)])
    b[:500] = b[:500].round()  # negative bases need whole exponents
    tolerance = {}  # the extended-precision log keeps it within a few ulps
    torch.testing.assert_close(
        torch.pow(a.to(device), b.to(device)).cpu(), torch.pow(a, b), equal_nan=True, **tolerance
    )
    in_place = a.to(device)
    in_place.pow_(b.to(device))
    torch.testing.assert_close(in_place.cpu(), torch.pow(a, b), equal_nan=True, **tolerance)


def test_pow_of_integer_tensors_stays_in_integers(device):
    """An integer result is computed in integers (by the fallback), not through the float32 formula."""
    integers = torch.arange(-3, 4)
    result = torch.pow(integers.to(device), integers.abs().to(device))
    assert result.dtype == torch.int64 and torch.equal(result.cpu(), torch.pow(integers, integers.abs()))


GRADIENTS = [
    ("hardshrink", lambda x: F.hardshrink(x, 0.5), [0.5, -0.5]),
    ("softshrink", lambda x: F.softshrink(x, 0.5), [0.5, -0.5]),
    ("hardsigmoid", F.hardsigmoid, [3.0, -3.0]),
    ("threshold", lambda x: F.threshold(x, 0.25, -1.0), [0.25]),
    ("logit", torch.logit, [0.0, 1.0, -0.5, 1.5]),
    ("logit_eps", lambda x: torch.logit(x, eps=0.1), [0.1, 0.9, 0.0, 1.0]),
]


@pytest.mark.parametrize("name, function, edges", GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_activation_gradients_are_formulas(name, function, edges, device, no_fallback):
    """The backward kernels of these activations, at random points and at the edges where they change branch."""
    x = torch.cat([values(-0.5, 1.5, [NAN, INF, -INF], count=400), torch.tensor(edges)])
    on_cpu, on_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    weights = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    (function(on_cpu) * weights).nansum().backward()
    (function(on_device) * weights.to(device)).nansum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad, equal_nan=True)
