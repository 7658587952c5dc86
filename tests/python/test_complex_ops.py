"""Complex tensors made on the device: torch.complex and torch.polar from real parts, and conversions into and out of
complex dtypes (real to complex, complex to complex of another precision, complex to real), each against the CPU,
with no CPU fallback."""

import pytest
import torch

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(monkeypatch):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")


def test_complex_and_polar_broadcast_as_on_the_cpu():
    real, imag = torch.randn(3, 1, 4), torch.randn(5, 1)
    for function in (torch.complex, torch.polar):
        expected = function(real, imag)
        actual = function(real.to("npusim"), imag.to("npusim"))
        assert actual.dtype == torch.complex64 and actual.shape == expected.shape
        torch.testing.assert_close(actual.cpu(), expected)


def test_out_variant_and_half_precision_parts():
    real, imag = torch.randn(6), torch.randn(6)
    out = torch.empty(0, dtype=torch.complex64, device="npusim")
    torch.complex(real.to("npusim"), imag.to("npusim"), out=out)
    torch.testing.assert_close(out.cpu(), torch.complex(real, imag))
    halves = torch.complex(real.half().to("npusim"), imag.half().to("npusim"))
    assert halves.dtype == torch.complex32
    torch.testing.assert_close(
        torch.view_as_real(halves.cpu()), torch.view_as_real(torch.complex(real.half(), imag.half()))
    )


@pytest.mark.parametrize("source", [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("target", [torch.complex64, torch.complex32])
def test_real_to_complex_takes_the_real_parts_and_zero_imaginary_parts(source, target):
    x = (torch.randn(4, 5) * 3).to(source)
    actual = x.to("npusim").to(target)
    assert actual.dtype == target
    torch.testing.assert_close(torch.view_as_real(actual.cpu()), torch.view_as_real(x.to(target)))


def test_complex_to_complex_and_to_real():
    z = torch.complex(torch.randn(7), torch.randn(7))
    on_device = z.to("npusim")
    torch.testing.assert_close(
        torch.view_as_real(on_device.to(torch.complex32).cpu()), torch.view_as_real(z.to(torch.complex32))
    )
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        real = on_device.to(torch.float32)
    torch.testing.assert_close(real.cpu(), z.real)
