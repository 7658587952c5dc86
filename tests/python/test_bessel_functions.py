"""The Bessel functions on npusim (formulas in bessel_functions.cpp) against the CPU's kernels, over arguments that
cross each approximation's branch points (2, 5, 8), reach where the functions overflow or vanish, and include
zeros, negative arguments (outside the domain of K and Y), infinities and NaN."""

import pytest
import torch

import npusim  # noqa: F401  registers the device

FUNCTIONS = [
    torch.i0,
    torch.special.i0e,
    torch.special.i1,
    torch.special.i1e,
    torch.special.modified_bessel_i0,
    torch.special.modified_bessel_i1,
    torch.special.modified_bessel_k0,
    torch.special.modified_bessel_k1,
    torch.special.scaled_modified_bessel_k0,
    torch.special.scaled_modified_bessel_k1,
    torch.special.bessel_j0,
    torch.special.bessel_j1,
    torch.special.bessel_y0,
    torch.special.bessel_y1,
    torch.special.spherical_bessel_j0,
]

BRANCH_POINTS = torch.tensor([2.0, 5.0, 8.0])
ARGUMENTS = torch.cat(
    [
        torch.linspace(-30, 30, 2001),
        BRANCH_POINTS,
        torch.nextafter(BRANCH_POINTS, torch.tensor(0.0)),
        torch.nextafter(BRANCH_POINTS, torch.tensor(100.0)),
        torch.tensor([0.0, -0.0, 1e-7, 1e-30, 0.3, 85.0, 95.0, 1e4, float("inf"), float("-inf"), float("nan")]),
    ]
)


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_matches_the_cpu(monkeypatch, function):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    expected = function(ARGUMENTS)
    actual = function(ARGUMENTS.to("npusim")).cpu()
    torch.testing.assert_close(actual, expected, equal_nan=True)  # float32's default tolerance


def test_out_variant_and_a_transposed_operand_keep_pytorchs_layout():
    x = torch.linspace(0.1, 12, 24).view(4, 6).t()
    out = torch.empty(0, device="npusim")
    torch.special.bessel_j0(x.to("npusim"), out=out)
    assert out.stride() == torch.special.bessel_j0(x).stride()
    torch.testing.assert_close(out.cpu(), torch.special.bessel_j0(x))
