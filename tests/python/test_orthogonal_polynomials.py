"""torch.special's orthogonal polynomials on npusim (orthogonal_polynomials.cpp: each one fused kernel running the
recurrence up to the call's largest degree) against the CPU: every degree from -2 to 40 at arguments inside and
outside each polynomial's interval and at its special points, fractional degrees (truncated), scalar operands, and
degrees beyond the kernel's reach taking the counted CPU fallback."""

import pytest
import torch

import npusim

POLYNOMIALS = [
    torch.special.chebyshev_polynomial_t,
    torch.special.chebyshev_polynomial_u,
    torch.special.chebyshev_polynomial_v,
    torch.special.chebyshev_polynomial_w,
    torch.special.shifted_chebyshev_polynomial_t,
    torch.special.shifted_chebyshev_polynomial_u,
    torch.special.shifted_chebyshev_polynomial_v,
    torch.special.shifted_chebyshev_polynomial_w,
    torch.special.hermite_polynomial_h,
    torch.special.hermite_polynomial_he,
    torch.special.laguerre_polynomial_l,
    torch.special.legendre_polynomial_p,
]

X = torch.tensor([-1.5, -1.0, -0.999, -0.7, -0.3, 0.0, 0.2, 0.5, 0.8, 1.0, 1.2, 2.0, float("inf"), float("nan")])
N = torch.cat([torch.arange(-2.0, 41.0), torch.tensor([2.5, 7.9, -0.5])])


@pytest.mark.parametrize("polynomial", POLYNOMIALS, ids=lambda p: p.__name__)
def test_every_degree_matches_the_cpu(polynomial):
    npusim._C.reset_fallback_counts()
    x, n = X.view(-1, 1), N.view(1, -1)
    expected = polynomial(x, n)
    actual = polynomial(x.to("npusim"), n.to("npusim")).cpu()
    assert npusim._C.fallback_counts() == {}
    # The recurrence rounds at each step as the CPU's does; high degrees grow to 1e30 and more (relative tolerance).
    # The trigonometric forms multiply acos(x) by the degree: an ulp of npusim's acos against the C library's (2.4e-7
    # near pi) becomes 1e-5 at degree 40.
    torch.testing.assert_close(actual, expected, rtol=2e-5, atol=3e-5, equal_nan=True)


def test_scalar_operands_and_out_variant():
    x = torch.linspace(-1, 1, 9)
    torch.testing.assert_close(
        torch.special.legendre_polynomial_p(x.to("npusim"), 5).cpu(), torch.special.legendre_polynomial_p(x, 5)
    )
    torch.testing.assert_close(
        torch.special.hermite_polynomial_h(0.5, torch.arange(6.0).to("npusim")).cpu(),
        torch.special.hermite_polynomial_h(0.5, torch.arange(6.0)),
    )
    out = torch.empty(0, device="npusim")
    torch.special.chebyshev_polynomial_t(x.to("npusim"), torch.tensor(4.0).to("npusim"), out=out)
    torch.testing.assert_close(out.cpu(), torch.special.chebyshev_polynomial_t(x, 4.0))


def test_degrees_beyond_the_kernels_reach_take_the_counted_fallback():
    npusim._C.reset_fallback_counts()
    x, n = torch.linspace(-0.9, 0.9, 5), torch.tensor([3.0, 500.0, 7.0, 200.0, 1.0])
    torch.testing.assert_close(
        torch.special.chebyshev_polynomial_t(x.to("npusim"), n.to("npusim")).cpu(),
        torch.special.chebyshev_polynomial_t(x, n),
    )
    assert npusim._C.fallback_counts() == {"aten::special_chebyshev_polynomial_t.out": 1}
