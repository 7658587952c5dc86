"""nextafter and frexp of float32 on npusim, computed from the values' bits on the device, against the CPU bit for bit:
zeros of both signs, subnormals, the largest finite value, infinities and NaN, broadcasting, in-place and out=."""

import torch

INF, NAN = float("inf"), float("nan")
EDGES = torch.tensor([0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-40, 3e38, 3.4028235e38, INF, -INF, NAN, 2.5, -7.0])


def same_bits(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.cpu().view(torch.int32), expected.view(torch.int32))


def test_nextafter_steps_one_float_toward_the_other(no_fallback):
    x = EDGES.repeat_interleave(len(EDGES))
    y = EDGES.repeat(len(EDGES))  # every pair
    actual = torch.nextafter(x.to("npusim"), y.to("npusim"))
    expected = torch.nextafter(x, y)
    nan = expected.isnan()
    assert torch.equal(actual.cpu().isnan(), nan)
    same_bits(actual[~nan.to("npusim")], expected[~nan])


def test_nextafter_broadcasts_and_writes_in_place_and_into_out(no_fallback):
    x = torch.randn(4, 1, 3)
    y = torch.randn(5, 3)
    same_bits(torch.nextafter(x.to("npusim"), y.to("npusim")), torch.nextafter(x, y))
    out = torch.empty(0, device="npusim")
    torch.nextafter(x.to("npusim"), y.to("npusim"), out=out)
    same_bits(out, torch.nextafter(x, y))
    z = torch.randn(5, 3)
    on_device = z.to("npusim")
    on_device.nextafter_(y.to("npusim"))
    same_bits(on_device, z.nextafter(y))


def test_frexp_splits_mantissa_and_exponent(no_fallback):
    values = torch.cat([EDGES, torch.randn(100) * 1e10, torch.rand(50) * 1e-39])
    mantissa, exponent = torch.frexp(values.to("npusim"))
    expected_mantissa, expected_exponent = torch.frexp(values)
    finite = values.isfinite()
    same_bits(mantissa[finite.to("npusim")], expected_mantissa[finite])
    assert torch.equal(mantissa.cpu().isnan(), expected_mantissa.isnan())
    assert torch.equal(exponent.cpu()[finite], expected_exponent[finite])
    assert exponent.dtype == torch.int32


def test_other_dtypes_take_the_cpu_fallback():
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    torch.testing.assert_close(torch.nextafter(x.to("npusim"), x.to("npusim") * 2).cpu(), torch.nextafter(x, x * 2))
