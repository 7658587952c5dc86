"""Conjugate and negative views (`x.conj()`, its `.imag`) are lazy: a bit on the tensor, the stored values unchanged.
Every copy that crosses npusim — to and from the host, on the device, into a conjugate view — must apply the bits as
the CPU does. Copying a conjugate device tensor used to recurse until the stack overflowed (torch.fft.hfft killed the
process)."""

import torch


def complex_values(shape=(3, 5)):
    generator = torch.Generator().manual_seed(0)
    return torch.complex(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))


def test_conjugate_view_to_host_and_clone_on_device(device):
    x = complex_values()
    y = x.to(device).conj()
    assert y.is_conj()
    torch.testing.assert_close(y.cpu(), x.conj(), rtol=0, atol=0)
    cloned = y.clone()
    torch.testing.assert_close(cloned.cpu(), x.conj(), rtol=0, atol=0)
    torch.testing.assert_close(y.resolve_conj().cpu(), x.conj().resolve_conj(), rtol=0, atol=0)


def test_conjugate_host_tensor_to_device(device):
    x = complex_values()
    torch.testing.assert_close(x.conj().to(device).cpu(), x.conj(), rtol=0, atol=0)
    into = torch.empty(x.shape, dtype=x.dtype, device=device).copy_(x.conj())
    torch.testing.assert_close(into.cpu(), x.conj(), rtol=0, atol=0)


def test_copy_into_a_conjugate_view_stores_the_conjugate(device):
    x = complex_values()
    base = torch.zeros_like(x).to(device)
    base.conj().copy_(x.to(device))
    torch.testing.assert_close(base.cpu(), x.conj(), rtol=0, atol=0)
    base.conj()[1].copy_(x.conj()[1].to(device))  # both conjugate: the stored values are copied as they are
    torch.testing.assert_close(base.cpu()[1], x[1], rtol=0, atol=0)


def test_negative_view_of_an_imaginary_part(device):
    x = complex_values()
    imaginary = x.to(device).conj().imag
    assert imaginary.is_neg()
    torch.testing.assert_close(imaginary.cpu(), -x.imag, rtol=0, atol=0)
    torch.testing.assert_close(imaginary.clone().cpu(), -x.imag, rtol=0, atol=0)
    torch.testing.assert_close((imaginary * 2).cpu(), -2 * x.imag, rtol=0, atol=0)


def test_fft_of_a_real_signal_matches_the_cpu(device):
    signal = torch.randn(16, generator=torch.Generator().manual_seed(1))
    for transform in (torch.fft.hfft, torch.fft.ihfft, torch.fft.ifft, torch.fft.rfft):
        torch.testing.assert_close(transform(signal.to(device)).cpu(), transform(signal), msg=transform.__name__)
