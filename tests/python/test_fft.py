"""torch.fft on npusim against the CPU: every transform (complex, real-to-complex, complex-to-real, over one or several
dimensions, each normalisation, padded and cropped signals) runs natively, as products with the DFT matrix, and
matches the CPU's FFT to float32 rounding, with the strides the CPU's kernels (and the meta functions) give. Signals
too long for one DFT matrix are split in factors (a transform along each, twiddle factors between them); a length
with no small enough factors (a long prime) and float64 take the CPU fallback and still match."""

import pytest
import torch

import npusim

# A DFT as a matrix product sums N terms per value where the FFT sums log N: they differ by a few units in the last
# place of the largest terms.
TOLERANCE = {"rtol": 1e-5, "atol": 1e-4}


def real_signal(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def complex_signal(*shape):
    return torch.randn(*shape, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))


TRANSFORMS = {
    "fft of a real signal": (lambda t: torch.fft.fft(t), real_signal(4, 6, 8)),
    "fft over the first dim": (lambda t: torch.fft.fft(t, dim=0), complex_signal(4, 6, 8)),
    "fft of a transposed view": (lambda t: torch.fft.fft(t.transpose(0, 2)), complex_signal(4, 6, 8)),
    "fft zero-padded to 11 points": (lambda t: torch.fft.fft(t, n=11), complex_signal(3, 8)),
    "fft cropped to 5 points": (lambda t: torch.fft.fft(t, n=5), complex_signal(3, 8)),
    "ifft, odd length": (lambda t: torch.fft.ifft(t), complex_signal(5, 9)),
    "fft2": (lambda t: torch.fft.fft2(t), complex_signal(4, 6, 8)),
    "fftn over two dims, orthonormal": (lambda t: torch.fft.fftn(t, dim=(0, 2), norm="ortho"), complex_signal(4, 6, 8)),
    "ifftn, normalised forward": (lambda t: torch.fft.ifftn(t, dim=(0, 2), norm="forward"), complex_signal(4, 6, 8)),
    "rfft": (lambda t: torch.fft.rfft(t), real_signal(4, 6, 8)),
    "rfft of an odd length over a middle dim": (lambda t: torch.fft.rfft(t, dim=1), real_signal(4, 7, 8)),
    "rfftn": (lambda t: torch.fft.rfftn(t), real_signal(4, 6, 8)),
    "rfft2 of a permuted view": (lambda t: torch.fft.rfft2(t.permute(2, 0, 1)), real_signal(4, 6, 8)),
    "irfft": (lambda t: torch.fft.irfft(t), complex_signal(4, 6, 5)),
    "irfft to an odd length": (lambda t: torch.fft.irfft(t, n=9), complex_signal(4, 5)),
    "irfft over the first dim": (lambda t: torch.fft.irfft(t, dim=0), complex_signal(4, 6, 8)),
    "irfftn with sizes": (lambda t: torch.fft.irfftn(t, s=(5, 7, 9)), complex_signal(4, 6, 8)),
    "hfft": (lambda t: torch.fft.hfft(t), complex_signal(4, 6, 8)),
    "ihfft": (lambda t: torch.fft.ihfft(t), real_signal(4, 6, 8)),
    "ihfftn": (lambda t: torch.fft.ihfftn(t), real_signal(4, 6, 8)),
    "a one-point signal": (lambda t: torch.fft.fft(t), complex_signal(3, 1)),
}


@pytest.mark.parametrize("name", TRANSFORMS)
def test_transform_matches_the_cpu_natively(name, no_fallback):
    transform, signal = TRANSFORMS[name]
    expected = transform(signal)
    actual = transform(signal.to("npusim"))
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected, **TOLERANCE)


LONG_TRANSFORMS = {
    "fft of 16384 points (128 x 128)": (lambda t: torch.fft.fft(t), complex_signal(2, 16384)),
    "ifft of 8196 points (2 x 2 x 3 x 683), orthonormal": (
        lambda t: torch.fft.ifft(t, norm="ortho"),
        complex_signal(2, 8196),
    ),
    "rfft of a second of 16 kHz audio": (lambda t: torch.fft.rfft(t), real_signal(2, 16000)),
    "irfft to 4097 points": (lambda t: torch.fft.irfft(t, n=4097), complex_signal(2, 2049)),
    "irfft over the first dim to 6000 points": (lambda t: torch.fft.irfft(t, n=6000, dim=0), complex_signal(3001, 2)),
}


@pytest.mark.parametrize("name", LONG_TRANSFORMS)
def test_long_signals_are_split_in_factors_natively(name, no_fallback):
    transform, signal = LONG_TRANSFORMS[name]
    expected = transform(signal)
    actual = transform(signal.to("npusim"))
    assert actual.stride() == expected.stride()
    # Relative to the spectrum's largest value: each step rounds in float32.
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=3e-6 * expected.abs().max().item())


def test_a_spectrogram_as_a_speech_model_computes_it(no_fallback):
    """Whisper's log-mel front end: a 400-point Hann-windowed STFT with a hop of 160."""
    audio = real_signal(2, 4000)
    window = torch.hann_window(400)

    def spectrogram(samples, window):
        return torch.stft(samples, 400, 160, window=window, return_complex=True).abs() ** 2

    expected = spectrogram(audio, window)
    actual = spectrogram(audio.to("npusim"), window.to("npusim"))
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-3)


def test_the_nyquist_terms_of_a_real_signal_are_real(no_fallback):
    spectrum = torch.fft.rfft(real_signal(3, 16).to("npusim")).cpu()
    assert torch.equal(spectrum[:, 0].imag, torch.zeros(3))
    assert torch.equal(spectrum[:, 8].imag, torch.zeros(3))


def test_out_variants_write_into_out(no_fallback):
    signal = complex_signal(4, 8)
    out = torch.empty(0, dtype=torch.complex64, device="npusim")
    result = torch.fft.fft(signal.to("npusim"), out=out)
    assert result is out
    torch.testing.assert_close(out.cpu(), torch.fft.fft(signal), **TOLERANCE)
    real_out = torch.empty(0, device="npusim")
    torch.fft.irfft(signal.to("npusim"), out=real_out)
    torch.testing.assert_close(real_out.cpu(), torch.fft.irfft(signal), **TOLERANCE)


@pytest.mark.parametrize(
    "transform",
    [lambda t: torch.fft.rfft(t).abs().sum(), lambda t: torch.fft.fft2(t * 1j).real.square().sum()],
    ids=["rfft", "fft2"],
)
def test_gradients_match_the_cpu(transform):
    signal = real_signal(4, 8)
    signal.requires_grad_(True)
    transform(signal).backward()
    on_device = signal.detach().to("npusim").requires_grad_(True)
    transform(on_device).backward()
    torch.testing.assert_close(on_device.grad.cpu(), signal.grad, **TOLERANCE)


def test_conj_physical_of_complex64_negates_the_imaginary_parts(no_fallback):
    signal = complex_signal(5, 3)
    assert torch.equal(torch.conj_physical(signal.to("npusim")).cpu(), torch.conj_physical(signal))


@pytest.mark.parametrize(
    "transform, signal",
    [
        (lambda t: torch.fft.fft(t), complex_signal(2, 4099)),  # a prime too long for one DFT matrix
        (lambda t: torch.fft.rfft(t), real_signal(3, 8).double()),
    ],
    ids=["a long prime length", "float64"],
)
def test_what_is_not_native_falls_back_and_still_matches(transform, signal):
    npusim._C.reset_fallback_counts()
    actual = transform(signal.to("npusim"))
    assert any("_fft" in name for name in npusim._C.fallback_counts())
    torch.testing.assert_close(actual.cpu(), transform(signal))


def test_abs_of_complex64_is_a_float32_magnitude(no_fallback):
    signal = complex_signal(4, 5)
    signal[0, 0] = complex(3e30, 4e30)  # the parts' squares would overflow float32; their hypotenuse does not
    magnitude = signal.to("npusim").abs()
    assert magnitude.dtype == torch.float32
    torch.testing.assert_close(magnitude.cpu(), signal.abs())
    torch.testing.assert_close(signal.to("npusim").conj().abs().cpu(), signal.abs())
