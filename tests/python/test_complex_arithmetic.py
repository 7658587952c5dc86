"""Complex64 arithmetic on the device, against the CPU with no CPU fallback: add, sub (with alpha), mul, div, neg,
reciprocal and exp with broadcasting, real and scalar operands, conjugate views, in place and out=; sums, means,
running sums and products, vector norms, variances; rsub, lerp, addcmul, addcdiv; matrix products (mm, bmm, matmul,
dot, vdot, einsum, and addmm and its relatives); and two places models use them: rotary position embeddings written
with complex numbers (Meta's Llama reference code) and a Fourier neural operator's spectral convolution, forward and
backward."""

import operator

import pytest
import torch

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(no_fallback):
    pass


def complex_randn(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, dtype=torch.complex64, generator=generator)


def assert_matches(actual, expected, **tolerance):
    assert actual.device.type == "npusim"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, **tolerance)


ARITHMETIC = [operator.add, operator.sub, operator.mul, operator.truediv]


@pytest.mark.parametrize("function", ARITHMETIC, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "shapes",
    [((5, 7), (5, 7)), ((3, 1, 4), (5, 1)), ((), (6,)), ((0, 3), (3,))],
    ids=["same", "broadcast", "0-dim", "empty"],
)
def test_complex_arithmetic_broadcasts_as_on_the_cpu(function, shapes):
    a, b = complex_randn(*shapes[0], seed=1), complex_randn(*shapes[1], seed=2)
    assert_matches(function(a.to("npusim"), b.to("npusim")), function(a, b))


@pytest.mark.parametrize("function", ARITHMETIC, ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    "other",
    [torch.randn(4, 6), torch.randint(-3, 4, (6,)), torch.randn(4, 6).half(), 2.5, -3, 0.5 - 2j],
    ids=["float32", "int64", "float16", "float", "int", "complex"],
)
def test_a_real_or_scalar_operand_is_promoted_as_on_the_cpu(function, other):
    a = complex_randn(4, 6)
    device_other = other.to("npusim") if isinstance(other, torch.Tensor) else other
    assert_matches(function(a.to("npusim"), device_other), function(a, other))
    assert_matches(function(device_other, a.to("npusim")), function(other, a))


@pytest.mark.parametrize("alpha", [2, -0.5, 1.5 + 2j])
def test_add_and_sub_scale_the_other_operand_by_alpha(alpha):
    a, b = complex_randn(3, 5, seed=1), complex_randn(3, 5, seed=2)
    for function in (torch.add, torch.sub):
        assert_matches(function(a.to("npusim"), b.to("npusim"), alpha=alpha), function(a, b, alpha=alpha))


def test_conjugate_views_are_read_as_their_values():
    a, b = complex_randn(4, 4, seed=1), complex_randn(4, 4, seed=2)
    x, y = a.to("npusim"), b.to("npusim")
    assert_matches(x.conj() * y, a.conj() * b)
    assert_matches(x / y.conj(), a / b.conj())
    assert_matches(-x.conj(), -a.conj())


def test_in_place_and_out_variants_including_strided_and_overlapping_results():
    a, b = complex_randn(6, 8, seed=1), complex_randn(6, 8, seed=2)
    x, y = a.to("npusim"), b.to("npusim")
    for name in ("add_", "sub_", "mul_", "div_"):
        expected, actual = getattr(a.clone(), name)(b), getattr(x.clone(), name)(y)
        assert_matches(actual, expected)
    out = torch.empty(8, 6, dtype=torch.complex64, device="npusim").t()  # a transposed result
    torch.mul(x, y, out=out)
    assert_matches(out, a * b)
    # A result overlapping an operand in another layout (x's transpose written over x itself) is refused, as the
    # CPU refuses it.
    square = x[:, :6].clone()
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        torch.mul(square, square.t(), out=square)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x[:1].mul_(y)


def test_exponentials_including_the_unit_circle_rotary_code_builds():
    a = complex_randn(40) * 3
    assert_matches(torch.exp(a.to("npusim")), torch.exp(a))
    angles = torch.randn(16)
    assert_matches(torch.exp(1j * angles.to("npusim")), torch.exp(1j * angles))


def test_negation_and_sums():
    a = complex_randn(3, 4, 5)
    x = a.to("npusim")
    assert_matches(-x, -a)
    assert_matches(x.sum(), a.sum(), rtol=1e-5, atol=1e-5)
    for dims, keepdim in [((1,), False), ((0, 2), True), ((-1,), False)]:
        assert_matches(x.sum(dims, keepdim=keepdim), a.sum(dims, keepdim=keepdim), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ord", [2, 1, float("inf"), 3])
def test_vector_norms_are_the_magnitudes_norms(ord):
    a = complex_randn(4, 6)
    x = a.to("npusim")
    assert_matches(torch.linalg.vector_norm(x, ord), torch.linalg.vector_norm(a, ord), rtol=1e-5, atol=1e-5)
    along_rows = {"dim": 1, "keepdim": True}
    assert_matches(torch.linalg.vector_norm(x, ord, **along_rows), torch.linalg.vector_norm(a, ord, **along_rows))


def test_variance_and_standard_deviation_are_real_and_the_mean_complex():
    a = complex_randn(5, 7)
    x = a.to("npusim")
    for function in (torch.var, torch.std):
        assert_matches(function(x), function(a), rtol=1e-5, atol=1e-6)
        assert_matches(function(x, dim=0, correction=0), function(a, dim=0, correction=0), rtol=1e-5, atol=1e-6)
    for function in (torch.var_mean, torch.std_mean):
        for actual, expected in zip(function(x, dim=1, keepdim=True), function(a, dim=1, keepdim=True), strict=True):
            assert_matches(actual, expected, rtol=1e-5, atol=1e-6)


PRODUCT_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}


def test_matrix_products():
    a, b = complex_randn(6, 9, seed=1), complex_randn(9, 5, seed=2)
    x, y = a.to("npusim"), b.to("npusim")
    assert_matches(x @ y, a @ b, **PRODUCT_TOLERANCE)
    assert_matches(x.mH @ x, a.mH @ a, **PRODUCT_TOLERANCE)  # a conjugate transposed operand
    batch_a, batch_b = complex_randn(3, 4, 7, seed=3), complex_randn(3, 7, 2, seed=4)
    batched = torch.bmm(batch_a.to("npusim"), batch_b.to("npusim"))
    assert_matches(batched, torch.bmm(batch_a, batch_b), **PRODUCT_TOLERANCE)
    assert_matches(batch_a.to("npusim") @ y[:7], batch_a @ b[:7], **PRODUCT_TOLERANCE)  # broadcast batch
    u, v = complex_randn(11, seed=5), complex_randn(11, seed=6)
    assert_matches(torch.dot(u.to("npusim"), v.to("npusim")), torch.dot(u, v), **PRODUCT_TOLERANCE)
    assert_matches(torch.vdot(u.to("npusim"), v.to("npusim")), torch.vdot(u, v), **PRODUCT_TOLERANCE)
    w = complex_randn(2, 3, 4, 5, seed=7)
    weights = complex_randn(3, 6, 4, 5, seed=8)
    assert_matches(
        torch.einsum("bixy,ioxy->boxy", w.to("npusim"), weights.to("npusim")),
        torch.einsum("bixy,ioxy->boxy", w, weights),
        **PRODUCT_TOLERANCE,
    )


def rotary_frequencies(head_dim, positions, theta=10000.0):
    """Meta's Llama reference: e^(i m theta_k) for each position m and pair k, made with torch.polar."""
    inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(positions).float(), inverse)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary(x, frequencies):
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = torch.view_as_real(pairs * frequencies[None, :, None, :]).flatten(3)
    return rotated.type_as(x)


def test_rotary_embeddings_written_with_complex_numbers_forward_and_backward():
    batch, positions, heads, head_dim = 2, 16, 4, 8
    x = torch.randn(batch, positions, heads, head_dim, requires_grad=True)
    frequencies = rotary_frequencies(head_dim, positions)
    weight = torch.randn(batch, positions, heads, head_dim)
    expected = apply_rotary(x, frequencies)
    (expected * weight).sum().backward()
    device_x = x.detach().to("npusim").requires_grad_()
    actual = apply_rotary(device_x, frequencies.to("npusim"))
    (actual * weight.to("npusim")).sum().backward()
    assert_matches(actual.detach(), expected.detach())
    assert_matches(device_x.grad, x.grad)


class SpectralConvolution(torch.nn.Module):
    """A Fourier neural operator's layer: the lowest modes of the input's 2-D Fourier transform, multiplied by
    complex weights per mode, transformed back."""

    def __init__(self, channels, modes):
        super().__init__()
        self.modes = modes
        self.weights = torch.nn.Parameter(torch.randn(channels, channels, modes, modes, dtype=torch.cfloat) / channels)

    def forward(self, x):
        spectrum = torch.fft.rfft2(x)
        low = torch.einsum("bixy,ioxy->boxy", spectrum[:, :, : self.modes, : self.modes], self.weights)
        mixed = torch.zeros_like(spectrum)
        mixed[:, :, : self.modes, : self.modes] = low
        return torch.fft.irfft2(mixed, s=x.shape[-2:])


def test_a_fourier_neural_operator_trains_as_on_the_cpu():
    torch.manual_seed(0)
    model = SpectralConvolution(channels=4, modes=3)
    inputs, targets = torch.randn(2, 4, 8, 8), torch.randn(2, 4, 8, 8)
    device_model = SpectralConvolution(channels=4, modes=3).to("npusim")
    device_model.load_state_dict(model.state_dict())
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (model, device_model)]
    for _ in range(3):
        losses = []
        for m, optimizer, x, y in [
            (model, optimizers[0], inputs, targets),
            (device_model, optimizers[1], inputs.to("npusim"), targets.to("npusim")),
        ]:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    torch.testing.assert_close(device_model.weights.detach().cpu(), model.weights.detach(), rtol=1e-5, atol=1e-6)


def test_arithmetic_composites():
    a, b, c = (complex_randn(5, 6, seed=k) for k in (1, 2, 3))
    x, y, w = a.to("npusim"), b.to("npusim"), c.to("npusim")
    assert_matches(torch.rsub(x, y, alpha=2), torch.rsub(a, b, alpha=2))
    for weight in (0.3, 0.8, 0.25 + 0.5j):
        assert_matches(torch.lerp(x, y, weight), torch.lerp(a, b, weight))
    assert_matches(torch.addcmul(x, y, w, value=0.5 - 1j), torch.addcmul(a, b, c, value=0.5 - 1j))
    assert_matches(torch.addcdiv(x, y, w, value=2), torch.addcdiv(a, b, c, value=2))
    assert_matches(x.mean(1), a.mean(1))
    assert_matches(x.mean(), a.mean())
    assert_matches(x.cumsum(0), a.cumsum(0), rtol=1e-5, atol=1e-5)
    out = torch.empty(0, dtype=torch.complex64, device="npusim")
    assert_matches(torch.cumsum(x.t(), 1, out=out), a.t().cumsum(1), rtol=1e-5, atol=1e-5)
    # running products by doubling, where the CPU multiplies in sequence: a few units in the last place apart
    for dim in (0, 1):
        assert_matches(x.cumprod(dim), a.cumprod(dim), rtol=1e-5, atol=1e-6)
        assert_matches(x.prod(dim, keepdim=True), a.prod(dim, keepdim=True), rtol=1e-5, atol=1e-6)
    assert_matches(x.conj().cumprod(1), a.conj().cumprod(1), rtol=1e-5, atol=1e-6)
    assert_matches(x.prod(), a.prod(), rtol=1e-5, atol=1e-9)
    assert_matches(x[0, 0].cumprod(0), a[0, 0].cumprod(0))


def test_products_with_a_bias():
    bias, m1, m2 = complex_randn(4, 5, seed=1), complex_randn(4, 3, seed=2), complex_randn(3, 5, seed=3)
    for beta, alpha in ((1, 1), (0.5, 2 - 1j), (0, 1)):
        expected = torch.addmm(bias, m1, m2, beta=beta, alpha=alpha)
        actual = torch.addmm(bias.to("npusim"), m1.to("npusim"), m2.to("npusim"), beta=beta, alpha=alpha)
        assert_matches(actual, expected, rtol=1e-5, atol=1e-5)
    batch1, batch2 = complex_randn(2, 4, 3, seed=4), complex_randn(2, 3, 5, seed=5)
    device = [t.to("npusim") for t in (bias, batch1, batch2)]
    assert_matches(
        torch.baddbmm(*device, alpha=0.5), torch.baddbmm(bias, batch1, batch2, alpha=0.5), rtol=1e-5, atol=1e-5
    )
    assert_matches(torch.addbmm(*device, beta=2), torch.addbmm(bias, batch1, batch2, beta=2), rtol=1e-5, atol=1e-5)
    vector = complex_randn(3, seed=6)
    assert_matches(m1.to("npusim") @ vector.to("npusim"), m1 @ vector, rtol=1e-5, atol=1e-5)
    assert_matches(
        torch.addmv(bias[:, 0].to("npusim"), m1.to("npusim"), vector.to("npusim"), beta=-1),
        torch.addmv(bias[:, 0], m1, vector, beta=-1),
        rtol=1e-5,
        atol=1e-5,
    )
