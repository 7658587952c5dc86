"""Complex64 elementwise functions on the device (complex_functions.cpp), against the CPU with no CPU fallback: the
exponential and logarithmic, trigonometric and hyperbolic functions, square roots, sigmoid, sgn, powers (of a tensor,
a scalar, and the exponents the CPU takes shortcuts for), angle, isnan and equality; over values of every size and
quadrant, zeros of either sign, infinities and NaN; in place, out= and through autograd. Also logaddexp and
logcumsumexp (the CPU's helper), cross, renorm, norms with a complex dtype and scatter sums (composed_functions.cpp,
prefix_scans.cpp, composed_tensor_ops.cpp, distance_ops.cpp, norm_ops.cpp, scatter_reduce_ops.cpp)."""

import math

import pytest
import torch

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(no_fallback):
    pass


def values():
    """Random values at three scales, and the edges each formula treats apart."""
    generator = torch.Generator().manual_seed(0)
    random = torch.cat(
        [torch.randn(400, dtype=torch.complex64, generator=generator) * scale for scale in (1e-3, 1.0, 8.0)]
    )
    inf, nan = math.inf, math.nan
    edges = [0j, complex(-0.0, 0.0), complex(0.0, -0.0), 1j, -1j, -1 + 0j, complex(-2, -0.0), complex(-2, 0.0)]
    edges += [1e-20 + 1e-20j, 30 + 1j, -30 + 1j, 1 + 30j, 1 - 30j, 1e30 + 1e30j, -1e-30 + 1e30j, 0.5 + 0.5j]
    edges += [complex(inf, 1), complex(-inf, 1), complex(1, inf), complex(nan, 0), complex(0, nan)]
    return torch.cat([random, torch.tensor(edges, dtype=torch.complex64)])


def assert_matches(actual, expected, **tolerance):
    assert actual.device.type == "npusim"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # within float32 rounding relative to |f(z)| (assert_close compares complex values by their distance)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tolerance)


# e^(w log z) in float32 carries log z's rounding times |w| into the result: the CPU's own powers (glibc's cpowf, in
# float32 too) are off by up to 2e-6 of |z^w| against float64 on these values, and npusim's by as much.
POWER_TOLERANCE = {"rtol": 6e-6, "atol": 1e-5}


FUNCTIONS = [
    torch.exp, torch.exp2, torch.expm1, torch.log, torch.log2, torch.log10, torch.log1p, torch.sqrt, torch.sin,
    torch.cos, torch.tan, torch.sinh, torch.cosh, torch.tanh, torch.asin, torch.acos, torch.atan, torch.asinh,
    torch.acosh, torch.atanh, torch.sgn, torch.reciprocal, torch.neg,
]  # fmt: skip


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_functions_match_the_cpu(function):
    z = values()
    assert_matches(function(z.to("npusim")), function(z))


# Where the CPU's 1 / (1 + e^-z) overflows to NaN (e^-z infinite) npusim gives the limit, 0, where 1 / sqrt(z)
# divides by an infinite sqrt(z) it gives a NaN part, and where sin(pi z) overflows, sinc's infinite quotient differs
# in the sign of an infinity; compared away from those.
@pytest.mark.parametrize(
    "function", [torch.rsqrt, torch.sigmoid, torch.nn.functional.silu, torch.sinc], ids=lambda f: f.__name__
)
def test_functions_with_overflowing_intermediates_match_the_cpu(function):
    z = values()
    z = z[z.isfinite() & (z.real > -80) & (z.imag.abs() < 20)]
    assert_matches(function(z.to("npusim")), function(z))


@pytest.mark.parametrize("exponent", [2, 3, -2, 0.5, -0.5, -1, 0, 1, 2.5, -1.5, 1 + 1j, 0.5j])
def test_powers_of_a_scalar_follow_the_cpus_shortcuts(exponent):
    z = values()[:1200]
    shortcut = exponent in (2, 3, -2, 0.5, -0.5, -1, 0, 1)
    assert_matches(z.to("npusim") ** exponent, z**exponent, **({} if shortcut else POWER_TOLERANCE))


def test_powers_of_tensors_and_of_zero():
    z = values()[:1200]
    w = torch.randn(1200, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    assert_matches(torch.pow(z.to("npusim"), w.to("npusim")), torch.pow(z, w), **POWER_TOLERANCE)
    real = torch.linspace(-2, 2, 1200)
    assert_matches(torch.pow(z.to("npusim"), real.to("npusim")), torch.pow(z, real), **POWER_TOLERANCE)
    zeros = torch.zeros(6, dtype=torch.complex64)
    exponents = torch.tensor([2.5, 1 + 1j, -1 + 1j, 1j, -2, 0], dtype=torch.complex64)
    assert_matches(torch.pow(zeros.to("npusim"), exponents.to("npusim")), torch.pow(zeros, exponents))


def test_angle_isnan_equality_and_truth():
    z = values()
    device = z.to("npusim")
    assert torch.equal(device, device) == torch.equal(z, z)  # False: NaN equals nothing
    finite = z[z.isfinite()]
    assert torch.equal(finite.to("npusim"), finite.to("npusim").clone())
    zeros = torch.tensor([0j, complex(-0.0, 0.0), 1j, 0j], dtype=torch.complex64).view(2, 2)
    for reduce in (torch.any, torch.all, torch.count_nonzero):
        assert torch.equal(reduce(zeros.to("npusim")).cpu(), reduce(zeros))
        assert torch.equal(reduce(zeros.to("npusim"), 1).cpu(), reduce(zeros, 1))
    assert_matches(torch.angle(device), torch.angle(z))
    assert torch.equal(torch.isnan(device).cpu(), torch.isnan(z))
    other = torch.where(torch.arange(len(z)) % 3 == 0, z, z + 1j)
    assert torch.equal((device == other.to("npusim")).cpu(), z == other)
    assert torch.equal((device != other.to("npusim")).cpu(), z != other)
    assert torch.equal((device == 1j).cpu(), z == 1j)
    reals = z.real.contiguous()
    assert torch.equal((device == reals.to("npusim")).cpu(), z == reals)


def test_in_place_out_and_conjugate_views():
    z = values()[:1200].view(30, 40)
    device = z.to("npusim")
    torch.testing.assert_close(device.clone().tanh_().cpu(), z.tanh())
    out = torch.empty(0, dtype=torch.complex64, device="npusim")
    torch.log(device.t(), out=out)
    assert out.stride() == torch.log(z.t()).stride()
    assert_matches(out, torch.log(z.t()))
    assert_matches(torch.sqrt(device.conj()), torch.sqrt(z.conj()))
    angle_out = torch.empty(0, device="npusim")
    torch.angle(device, out=angle_out)
    assert_matches(angle_out, torch.angle(z))


def test_gradients_match_the_cpu():
    z = values()[:400].view(20, 20)

    def loss(t):
        return (torch.log(t) * torch.sin(t) + torch.sqrt(t).tanh() + t**2.5).abs().sum()

    on_cpu = z.clone().requires_grad_()
    on_device = z.to("npusim").requires_grad_()
    loss(on_cpu).backward()
    loss(on_device).backward()
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad, rtol=1e-4, atol=1e-4)


def test_logaddexp_and_logcumsumexp_follow_the_cpus_helper():
    z = values()
    w = z.flip(0) * 0.5
    assert_matches(torch.logaddexp(z.to("npusim"), w.to("npusim")), torch.logaddexp(z, w))
    inf, nan = math.inf, math.nan  # NaN in either part, both real parts -inf, both +inf, a real operand
    a = torch.tensor(
        [complex(nan, 1), complex(1, nan), complex(-inf, 2), complex(inf, 0.5), 3 + 4j], dtype=torch.complex64
    )
    b = torch.tensor([1 + 1j, 2 + 0j, complex(-inf, -1), complex(inf, 0.25), complex(-inf, 0)], dtype=torch.complex64)
    assert_matches(torch.logaddexp(a.to("npusim"), b.to("npusim")), torch.logaddexp(a, b))
    real = torch.randn(5)
    assert_matches(torch.logaddexp(a.to("npusim"), real.to("npusim")), torch.logaddexp(a, real))
    # the running sums' angles are the CPU's: added one after another, not only equal up to whole turns
    rows = torch.randn(6, 9, dtype=torch.complex64, generator=torch.Generator().manual_seed(5)) * 4
    for dim in (0, 1):
        assert_matches(torch.logcumsumexp(rows.to("npusim"), dim), torch.logcumsumexp(rows, dim), atol=1e-5, rtol=1e-5)


def test_cross_renorm_norms_and_scatter_sums_of_complex_tensors():
    generator = torch.Generator().manual_seed(6)
    a, b = (torch.randn(4, 3, 5, dtype=torch.complex64, generator=generator) for _ in range(2))
    assert_matches(torch.linalg.cross(a.to("npusim"), b.to("npusim"), dim=1), torch.linalg.cross(a, b, dim=1))
    assert_matches(torch.renorm(a.to("npusim"), 2, 0, 1.5), torch.renorm(a, 2, 0, 1.5))
    norm = torch.linalg.vector_norm(a.to("npusim"), 2, (1, 2), dtype=torch.complex64)
    assert_matches(norm, torch.linalg.vector_norm(a, 2, (1, 2), dtype=torch.complex64))
    index = torch.randint(0, 4, (3, 5), generator=generator)
    target, source = (
        torch.zeros(4, 5, dtype=torch.complex64),
        torch.randn(3, 5, dtype=torch.complex64, generator=generator),
    )
    expected = target.scatter(0, index, source, reduce="add")
    assert_matches(target.to("npusim").scatter(0, index.to("npusim"), source.to("npusim"), reduce="add"), expected)
    summed = target.to("npusim").scatter_reduce(0, index.to("npusim"), source.to("npusim"), "sum")
    assert_matches(summed, target.scatter_reduce(0, index, source, "sum"))
