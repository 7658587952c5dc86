"""sub, div and the unary functions and activations on npusim against the same ops on CPU: emitted kernels for
float32 (no CPU fallback; integer inputs of float functions converted to float32 first), correct dtypes and fallbacks
otherwise."""

import pytest
import torch
import torch.nn.functional as F

import npusim

SHAPES = [(1,), (3, 4), (7, 33, 9), (5000,)]


def random(shape, seed=0, low=-3.0, high=3.0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=generator) * (high - low) + low


# (name, function, input range, relative tolerance): 0 for exact ops, about 1 ulp for special functions (the ISA
# rounds the exact value; PyTorch's CPU kernels are within an ulp or two), more for compositions, which cancel
# near zero (gelu's 1 + erf(x / sqrt 2) for negative x) and so also get an absolute tolerance of 1e-6.
UNARY = [
    ("neg", torch.neg, (-3, 3), 0),
    ("abs", torch.abs, (-3, 3), 0),
    ("exp", torch.exp, (-10, 10), 2e-7),
    ("log", torch.log, (1e-3, 100), 2e-7),
    ("tanh", torch.tanh, (-5, 5), 2e-7),
    ("sigmoid", torch.sigmoid, (-10, 10), 2e-7),
    ("sqrt", torch.sqrt, (0, 100), 2e-7),
    ("rsqrt", torch.rsqrt, (1e-3, 100), 2e-7),
    ("reciprocal", torch.reciprocal, (0.1, 10), 2e-7),
    ("silu", F.silu, (-6, 6), 1e-5),
    ("gelu", F.gelu, (-6, 6), 1e-5),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), (-6, 6), 1e-5),
    ("sin", torch.sin, (-20, 20), 2e-7),
    ("cos", torch.cos, (-20, 20), 2e-7),
    ("log1p", torch.log1p, (-0.99, 10), 2e-7),
    ("expm1", torch.expm1, (-10, 10), 2e-7),
    ("sinh", torch.sinh, (-30, 30), 5e-7),
    ("cosh", torch.cosh, (-30, 30), 5e-7),
    ("tan", torch.tan, (-1.57, 1.57), 5e-7),
    ("floor", torch.floor, (-5, 5), 0),
    ("ceil", torch.ceil, (-5, 5), 0),
    ("round", torch.round, (-5, 5), 0),
    ("trunc", torch.trunc, (-5, 5), 0),
    ("frac", torch.frac, (-5, 5), 0),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name, function, bounds, rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_cpu(name, function, bounds, rtol, shape, device):
    x = random(shape, 3, *bounds)
    result = function(x.to(device))
    assert result.device.type == "npusim" and result.dtype == torch.float32
    atol = 0 if rtol == 0 else 1e-6 if rtol > 1e-6 else 1e-7
    torch.testing.assert_close(result.cpu(), function(x), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name, function, bounds, rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_runs_as_emitted_kernel_without_fallback(name, function, bounds, rtol, device):
    x = random((300,), 4, *bounds).to(device)
    with npusim.profile() as report:
        function(x)
    assert [r.name for r in report.kernels] == [f"{name}_f32"]
    assert report.fallbacks == {}


def test_hyperbolic_functions_and_tan_at_their_edges(device):
    """Near 0 (no cancellation), across the switch at |x| = 20, up to and past overflow (sinh and cosh stay finite
    as far as float32 holds them), at the poles of tan, and for the special values. Against float64 rounded to
    float32: the CPU's own float32 sinh and cosh overflow from 89 with its AVX2 kernels, but not with AVX-512."""
    x = torch.tensor(
        [0.0, -0.0, 1e-30, -3e-8, 1e-4, 19.999, 20.0, 20.001, -20.5, 88.5, 89.0, 89.4, -89.4, 89.5, 100.0, -100.0]
        + [float("inf"), float("-inf"), float("nan"), 1.5707963, -1.5707964, 3.1415927, 1e6]
    )
    for function in (torch.sinh, torch.cosh, torch.tan):
        expected = function(x.double()).float()
        actual = function(x.to(device)).cpu()
        torch.testing.assert_close(actual, expected, rtol=5e-7, atol=0, equal_nan=True)
        assert torch.equal(actual.signbit(), expected.signbit()), function


@pytest.mark.parametrize("shape", SHAPES)
def test_xlogy_and_hypot_match_cpu(shape, device, no_fallback):
    a, b = random(shape, 11), random(shape, 12, 0.001, 5)
    a.view(-1)[::3] = 0  # xlogy's zeros
    torch.testing.assert_close(torch.xlogy(a.to(device), b.to(device)).cpu(), torch.xlogy(a, b), rtol=3e-7, atol=1e-7)
    torch.testing.assert_close(torch.hypot(a.to(device), b.to(device)).cpu(), torch.hypot(a, b), rtol=3e-7, atol=0)


def test_xlogy_and_hypot_special_values_scalars_broadcasts_and_in_place(device, no_fallback):
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([0.0, -0.0, 0.0, 0.0, 2.0, inf, nan, 3e38, 1e-30, -1e-45, 0.0, -4.0])
    b = torch.tensor([0.0, 5.0, nan, inf, 0.0, nan, inf, 3e38, 1e-30, 2e-45, -0.0, 3.0])
    for function in (torch.xlogy, torch.hypot):
        actual = function(a.to(device), b.to(device)).cpu()
        torch.testing.assert_close(actual, function(a, b), rtol=3e-7, atol=0, equal_nan=True)
        assert torch.equal(actual.signbit(), function(a, b).signbit()), function
    x, row = random((4, 5), 13, 0.1, 3), random((5,), 14, 0.1, 3)
    torch.testing.assert_close(torch.xlogy(2.0, x.to(device)).cpu(), torch.xlogy(2.0, x), rtol=3e-7, atol=0)
    torch.testing.assert_close(torch.xlogy(x.to(device), 3).cpu(), torch.xlogy(x, 3), rtol=3e-7, atol=0)
    torch.testing.assert_close(torch.hypot(x.to(device), row.to(device)).cpu(), torch.hypot(x, row), rtol=3e-7, atol=0)
    on_device = x.to(device)
    on_device.hypot_(row.to(device))
    torch.testing.assert_close(on_device.cpu(), torch.hypot(x, row), rtol=3e-7, atol=0)
    out = torch.empty(4, 5, device=device)
    torch.xlogy(x.to(device), row.to(device), out=out)
    torch.testing.assert_close(out.cpu(), torch.xlogy(x, row), rtol=3e-7, atol=0)


def test_xlogy_of_integers_is_float_and_hypot_of_integers_raises_pytorchs_error(device):
    i = torch.tensor([0, 1, 2, 3])
    result = torch.xlogy(i.to(device), i.to(device))
    assert result.dtype == torch.float32
    torch.testing.assert_close(result.cpu(), torch.xlogy(i, i))
    with pytest.raises(RuntimeError, match="hypot"):
        torch.hypot(i.to(device), i.to(device))


def test_in_place_out_and_strided_variants(device):
    x = random((6, 8), 5)
    on_device = x.to(device)
    on_device.t().exp_()  # in place through a transposed view
    torch.testing.assert_close(on_device.cpu(), x.exp(), rtol=2e-7, atol=0)
    out = torch.empty(3, 8, device=device)
    torch.tanh(x.to(device)[::2], out=out)
    torch.testing.assert_close(out.cpu(), torch.tanh(x[::2]), rtol=2e-7, atol=0)
    y = x.to(device)
    F.gelu(y, approximate="tanh")  # the functional form leaves its input alone
    torch.testing.assert_close(y.cpu(), x)


@pytest.mark.parametrize("shape", SHAPES)
def test_sub_and_div_match_cpu(shape, device):
    a, b = random(shape, 6), random(shape, 7, 0.5, 4)
    torch.testing.assert_close(
        torch.sub(a.to(device), b.to(device), alpha=2).cpu(), torch.sub(a, b, alpha=2), rtol=0, atol=0
    )
    torch.testing.assert_close((a.to(device) / b.to(device)).cpu(), a / b, rtol=0, atol=0)
    torch.testing.assert_close((a.to(device) - 1.5).cpu(), a - 1.5, rtol=0, atol=0)
    torch.testing.assert_close((2.0 / b.to(device)).cpu(), 2.0 / b, rtol=0, atol=0)


def test_integer_inputs_promote_like_the_cpu(device):
    ints = torch.arange(1, 7)
    assert torch.exp(ints.to(device)).dtype == torch.exp(ints).dtype == torch.float32
    torch.testing.assert_close(torch.exp(ints.to(device)).cpu(), torch.exp(ints))
    assert (ints.to(device) / 2).dtype == torch.float32
    torch.testing.assert_close((ints.to(device) / 4).cpu(), ints / 4)
    assert torch.neg(ints.to(device)).dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.bool])
def test_float_functions_of_integers_run_natively_in_float32(device, no_fallback, dtype):
    # The CPU converts the input to the float result's type first: int64 beyond 2^24 rounds to the nearest float32.
    values = torch.tensor([-3, 0, 1, 2, 7, 100, 2**25 + 1])
    ints = (values.clamp(0, 255) if dtype == torch.uint8 else values).to(dtype)  # bool: nonzero; int16: wrapped
    for function in (torch.exp, torch.cos, torch.tanh, torch.erf, torch.expm1, torch.reciprocal, torch.log, torch.sqrt):
        result, expected = function(ints.to(device)), function(ints)
        assert result.dtype == expected.dtype == torch.float32, function
        torch.testing.assert_close(result.cpu(), expected, equal_nan=True)
    out = torch.empty(0, device=device)
    torch.sigmoid(ints.to(device), out=out)
    torch.testing.assert_close(out.cpu(), torch.sigmoid(ints))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool])
def test_sign_of_integers_keeps_their_dtype(device, no_fallback, dtype):
    values = torch.tensor([-128, -3, 0, 1, 5, 127])
    x = (values.clamp(0, 255) if dtype == torch.uint8 else values).to(dtype)
    for function in (torch.sign, torch.sgn):
        result = function(x.to(device))
        assert result.dtype == dtype and torch.equal(result.cpu(), function(x)), function
    in_place = x.to(device)
    in_place.sign_()
    assert torch.equal(in_place.cpu(), torch.sign(x))


def test_special_values_follow_ieee_like_the_cpu(device):
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.0, 1e-40])
    for function in (torch.exp, torch.log, torch.sqrt, torch.rsqrt, torch.reciprocal, torch.tanh, torch.sigmoid):
        torch.testing.assert_close(function(x.to(device)).cpu(), function(x), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("replacements", [{}, {"nan": 2.5, "posinf": 1e3, "neginf": -7.0}, {"posinf": 1e30}])
def test_nan_to_num_runs_natively_and_matches_cpu(dtype, replacements, device):
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), -1.5, 3e4] * 50, dtype=dtype).view(7, 50)
    expected = torch.nan_to_num(x, **replacements)
    with npusim.profile() as report:
        out = torch.nan_to_num(x.to(device), **replacements)
        in_place = x.to(device).nan_to_num_(**replacements)
        into = torch.empty(7, 50, dtype=dtype, device=device)
        torch.nan_to_num(x.to(device), out=into, **replacements)
    assert report.fallbacks == {}
    type_name = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    assert [r.name for r in report.kernels] == [f"nan_to_num_{type_name}"] * 3
    for result in (out, in_place, into):
        assert torch.equal(result.cpu(), expected)


def test_nan_to_num_of_integers_is_a_copy(device):
    x = torch.arange(-5, 5)
    out = torch.nan_to_num(x.to(device))
    assert out.dtype == torch.int64 and torch.equal(out.cpu(), x)


def test_relu_backward_runs_natively_and_matches_cpu(device):
    x = torch.tensor([-2.0, -0.0, 0.0, 1e-30, 3.0, float("nan"), float("-inf"), float("inf")])
    grad = torch.arange(1.0, 9.0)
    with npusim.profile() as report:
        result = torch.ops.aten.threshold_backward(grad.to(device), x.to(device), 0)
    assert [r.name for r in report.kernels] == ["relu_backward_f32"]
    torch.testing.assert_close(result.cpu(), torch.ops.aten.threshold_backward(grad, x, 0), equal_nan=True)
    # Through autograd, on a larger tensor.
    w = random((40, 30), 8).requires_grad_()
    w_device = w.detach().to(device).requires_grad_()
    (torch.relu(w) * 3).sum().backward()
    (torch.relu(w_device) * 3).sum().backward()
    torch.testing.assert_close(w_device.grad.cpu(), w.grad)


def test_gelu_backward_runs_natively_and_matches_cpu(device):
    x = torch.cat([random((3000,), 9) * 4, torch.tensor([0.0, -0.0, 30.0, -30.0, float("inf"), float("-inf")])])
    grad = random((x.numel(),), 10)
    with npusim.profile() as report:
        result = torch.ops.aten.gelu_backward(grad.to(device), x.to(device))
    assert [r.name for r in report.kernels] == ["gelu_backward_f32"]
    expected = torch.ops.aten.gelu_backward(grad, x)  # NaN at ±inf (inf * pdf = inf * 0) on both
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-5, atol=1e-6, equal_nan=True)
    # The tanh approximation's backward is one kernel too, its steps in the CPU's order (vtanh and the CPU's
    # vectorised tanh differ in the last units of place: where the derivative cancels to ~0, by a few 1e-6).
    finite = x[:-2]  # at ±inf the CPU's formula gives NaN (0 * inf) where x^3 overflows first here
    with npusim.profile() as report:
        result = torch.ops.aten.gelu_backward(grad[:-2].to(device), finite.to(device), approximate="tanh")
    assert [r.name for r in report.kernels] == ["gelu_tanh_backward_f32"]
    expected = torch.ops.aten.gelu_backward(grad[:-2], finite, approximate="tanh")
    torch.testing.assert_close(result.cpu(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("weight", [0.1, 0.5, 0.9, 1.0])
def test_lerp_addcmul_addcdiv_run_natively_and_match_cpu(weight, device):
    a, b, c = random((20, 30), 11), random((20, 30), 12), random((30,), 13).abs() + 0.5
    with npusim.profile() as report:
        lerped = torch.lerp(a.to(device), b.to(device), weight)
        multiplied = torch.addcmul(a.to(device), b.to(device), c.to(device), value=weight)  # broadcast row
        divided = torch.addcdiv(a.to(device), b.to(device), c.to(device), value=-weight)
        in_place = a.to(device)
        in_place.lerp_(b.to(device), weight).addcmul_(b.to(device), b.to(device), value=2).addcdiv_(
            a.to(device), c.to(device)
        )
    assert report.fallbacks == {}
    torch.testing.assert_close(lerped.cpu(), torch.lerp(a, b, weight))
    torch.testing.assert_close(multiplied.cpu(), torch.addcmul(a, b, c, value=weight))
    torch.testing.assert_close(divided.cpu(), torch.addcdiv(a, b, c, value=-weight))
    expected = a.clone().lerp_(b, weight).addcmul_(b, b, value=2).addcdiv_(a, c)
    torch.testing.assert_close(in_place.cpu(), expected)
    if weight == 1.0:  # PyTorch's formula is exact at the end point
        assert torch.equal(lerped.cpu(), b)


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 7, -1, -2, 0.5, -0.5, 1.5, -1.3])
def test_pow_with_a_scalar_exponent_runs_natively_and_matches_cpu(exponent, device):
    x = torch.cat([random((500,), 14), torch.tensor([0.0, -0.0, float("nan"), float("inf"), -2.0])])
    with npusim.profile() as report:
        result = torch.pow(x.to(device), exponent)
        in_place = x.to(device)
        in_place.pow_(exponent)
    assert report.fallbacks == {}
    # Whole exponents multiply exactly like the CPU; others go through exp and log (a few ulps).
    tolerance = {"rtol": 0, "atol": 0} if exponent in (0, 1, 2, 3) else {"rtol": 2e-6, "atol": 1e-6}
    torch.testing.assert_close(result.cpu(), torch.pow(x, exponent), equal_nan=True, **tolerance)
    torch.testing.assert_close(in_place.cpu(), torch.pow(x, exponent), equal_nan=True, **tolerance)


def test_where_tril_and_triu_run_natively_and_match_cpu(device):
    condition = random((3, 4), 15) > 0
    cases = [
        (random((3, 4), 16), random((3, 4), 17)),
        (random((1, 4), 18), torch.tensor(float("-inf"))),  # a broadcast row and a CPU scalar, as attention masks use
        (torch.arange(12).reshape(3, 4), torch.tensor(7)),  # int64
    ]
    x = random((2, 5, 7), 19)
    with npusim.profile() as report:
        chosen = [
            torch.where(condition.to(device), a.to(device), b if b.dim() == 0 else b.to(device)) for a, b in cases
        ]
        lower = [torch.tril(x.to(device), k) for k in (-2, 0, 1, 9)]
        upper = [torch.triu(x.to(device), k) for k in (-9, 0, 3)]
        causal = torch.ones(6, 6, dtype=torch.bool, device=device).tril()
        in_place = x.to(device)
        in_place.triu_(1)
    assert report.fallbacks == {}
    for result, (a, b) in zip(chosen, cases, strict=True):
        assert torch.equal(result.cpu(), torch.where(condition, a, b))
    for result, k in zip(lower, (-2, 0, 1, 9), strict=True):
        assert torch.equal(result.cpu(), torch.tril(x, k))
    for result, k in zip(upper, (-9, 0, 3), strict=True):
        assert torch.equal(result.cpu(), torch.triu(x, k))
    assert torch.equal(causal.cpu(), torch.ones(6, 6, dtype=torch.bool).tril())
    assert torch.equal(in_place.cpu(), torch.triu(x, 1))


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons_run_natively_and_match_cpu_including_nan(name, device):
    compare = getattr(torch, name)
    a = torch.tensor([[1.0, 2.0, float("nan"), -0.0, float("inf"), 3.0]]).repeat(3, 1)
    b = torch.tensor([[1.0], [2.5], [float("nan")]])  # broadcast against the rows
    with npusim.profile() as report:
        results = [compare(a.to(device), b.to(device)), compare(a.to(device), 2.0), compare(a.to(device), 0.0)]
        out = torch.empty(0, dtype=torch.bool, device=device)
        compare(a.to(device), b.to(device), out=out)
    assert report.fallbacks == {}
    for result, expected in zip(results, [compare(a, b), compare(a, 2.0), compare(a, 0.0)], strict=True):
        assert result.dtype == torch.bool and torch.equal(result.cpu(), expected)
    assert torch.equal(out.cpu(), compare(a, b))


@pytest.mark.parametrize("name", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_integer_and_half_precision_comparisons_promote_as_the_cpu(name, device):
    compare = getattr(torch, name)
    a, b = torch.arange(-5, 10), torch.arange(15).flip(0) - 3
    half = torch.tensor([0.099609375, 0.1, 0.3]).bfloat16()  # 0.0998 rounds to bfloat16 0.099609375 first
    npusim._C.reset_fallback_counts()
    for dtype in (torch.int64, torch.int32):
        x, y = a.to(dtype), b.to(dtype)
        for other in (y, 3, 2.5, b.to(torch.int32)):  # integer tensors and scalars, and a float scalar
            other_device = other.to(device) if isinstance(other, torch.Tensor) else other
            assert torch.equal(compare(x.to(device), other_device).cpu(), compare(x, other)), (dtype, other)
    assert torch.equal(compare(half.to(device), 0.0998).cpu(), compare(half, 0.0998))
    flags, other_flags = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    small, other_small = torch.tensor([-3, 0, 7], dtype=torch.int8), torch.tensor([4, 0, -9], dtype=torch.int8)
    for x, y in ((flags, other_flags), (small, other_small), (small.to(torch.uint8), other_small.to(torch.uint8))):
        assert torch.equal(compare(x.to(device), y.to(device)).cpu(), compare(x, y)), x.dtype  # compared as int32
    causal = torch.arange(6, device=device)
    assert torch.equal((causal[None] <= causal[:, None]).cpu(), torch.ones(6, 6, dtype=torch.bool).tril())
    assert npusim._C.fallback_counts() == {}


def test_clamp_runs_natively_and_matches_cpu(device):
    x = torch.cat([random((200,), 21) * 5, torch.tensor([float("nan"), float("inf"), float("-inf")])])
    with npusim.profile() as report:
        results = [x.to(device).clamp(-1.0, 2.0), x.to(device).clamp(min=0.5), x.to(device).clamp(max=-0.5)]
        in_place = x.to(device)
        in_place.clamp_(-3, 3)
    assert report.fallbacks == {}
    expected = [x.clamp(-1.0, 2.0), x.clamp(min=0.5), x.clamp(max=-0.5)]
    for result, reference in zip(results, expected, strict=True):
        torch.testing.assert_close(result.cpu(), reference, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(in_place.cpu(), x.clamp(-3, 3), rtol=0, atol=0, equal_nan=True)


def test_rounding_handles_halves_signed_zeros_and_specials_as_the_cpu(device):
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.3, -0.3, 1e20, float("inf"), float("-inf"), float("nan")])
    for function in (torch.floor, torch.ceil, torch.round, torch.trunc):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            expected = function(x.to(dtype))
            actual = function(x.to(dtype).to(device)).cpu()
            torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
            assert torch.equal(actual.signbit(), expected.signbit()), function
    integers = torch.arange(-3, 4)
    assert torch.equal(torch.round(integers.to(device)).cpu(), integers)  # integers stay integers, as they are


def test_rotary_position_embedding_runs_natively(device):
    """The rotation LLaMA-style models apply to queries and keys: sin and cos of position x frequency."""
    positions, dim = torch.arange(16.0), 8
    frequencies = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    angles = torch.outer(positions, frequencies)
    q = random((2, 16, dim), 5)

    def rotate(q, angles):
        cos, sin = angles.cos().repeat_interleave(2, -1), angles.sin().repeat_interleave(2, -1)
        pairs = torch.stack((-q[..., 1::2], q[..., ::2]), dim=-1).flatten(-2)
        return q * cos + pairs * sin

    npusim._C.reset_fallback_counts()
    actual = rotate(q.to(device), angles.to(device))
    torch.testing.assert_close(actual.cpu(), rotate(q, angles), rtol=1e-6, atol=1e-6)
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_remainder_floor_and_truncating_division_follow_python(dtype, device):
    a = torch.arange(-20, 21, dtype=dtype)
    b = torch.tensor([3, -3, 7, -7, 1, -1, 5, 2], dtype=dtype).repeat(6)[:41]
    npusim._C.reset_fallback_counts()
    for function in (torch.remainder, torch.floor_divide):
        assert torch.equal(function(a.to(device), b.to(device)).cpu(), function(a, b))
        assert torch.equal(function(a.to(device), -4).cpu(), function(a, -4))
    assert torch.equal((a.to(device) % 5).cpu(), a % 5) and torch.equal((a.to(device) // 5).cpu(), a // 5)
    assert npusim._C.fallback_counts() == {}
    with pytest.raises(RuntimeError, match="division by zero"):
        (a.to(device) % torch.zeros_like(a).to(device)).cpu()
    assert torch.equal((a.to(device) % 3).cpu(), a % 3), "the device stays usable"
    # The type's ends: no step may overflow (a - a % b wrapped for the most negative a), and rounding toward zero.
    info = torch.iinfo(dtype)
    ends = torch.tensor([info.min, info.max, info.min, info.max, info.min + 1, -7, 7], dtype=dtype)
    divisors = torch.tensor([3, 7, info.max, info.max, -3, 2, -2], dtype=dtype)
    npusim._C.reset_fallback_counts()
    for mode in ("floor", "trunc"):
        quotient = torch.div(ends.to(device), divisors.to(device), rounding_mode=mode)
        assert torch.equal(quotient.cpu(), torch.div(ends, divisors, rounding_mode=mode)), mode
    assert torch.equal(torch.remainder(ends.to(device), divisors.to(device)).cpu(), torch.remainder(ends, divisors))
    assert torch.equal(
        torch.div(a.to(device), -4, rounding_mode="trunc").cpu(), torch.div(a, -4, rounding_mode="trunc")
    )
    assert npusim._C.fallback_counts() == {}


def test_composed_functions_run_natively_and_match_cpu(device):
    generator = torch.Generator().manual_seed(3)
    special = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0, -0.0, 30.0, -30.0])
    a = torch.cat([special, torch.randn(200, generator=generator) * 5])
    b = torch.cat([special.flip(0), torch.randn(200, generator=generator) * 5])
    b[:2] = a[:2]  # the same infinity on both sides: logaddexp gives it back
    low, high = torch.randn(207, generator=generator) - 1, torch.randn(207, generator=generator) + 1
    x = a.to(device).requires_grad_()
    with npusim.profile() as report:
        results = {
            "rsub": torch.rsub(a.to(device), b.to(device), alpha=2),
            "isnan": torch.isnan(a.to(device)),
            "logaddexp": torch.logaddexp(a.to(device), b.to(device)),
            "clamp": torch.clamp(a.to(device), low.to(device), high.to(device)),
            "clamp_min": torch.clamp(a.to(device), min=low.to(device)),
            "logsigmoid": torch.nn.functional.logsigmoid(x),
        }
        results["logsigmoid"].sum().backward()
        pairs = [(a, a), (low, low), (low, high), (low, low[:5])]
        equal = [torch.equal(p.to(device), q.to(device)) for p, q in pairs]
    assert report.fallbacks == {}
    xc = a.clone().requires_grad_()
    expected = {
        "rsub": torch.rsub(a, b, alpha=2),
        "isnan": torch.isnan(a),
        "logaddexp": torch.logaddexp(a, b),
        "clamp": torch.clamp(a, low, high),
        "clamp_min": torch.clamp(a, min=low),
        "logsigmoid": torch.nn.functional.logsigmoid(xc),
    }
    expected["logsigmoid"].sum().backward()
    for name, want in expected.items():
        torch.testing.assert_close(results[name].detach().cpu(), want.detach(), equal_nan=True, msg=name)
    torch.testing.assert_close(x.grad.cpu(), xc.grad, equal_nan=True)
    assert equal == [False, True, False, False]  # NaN equals nothing, as on the CPU


def test_div_rounding_modes_match_cpu(device):
    # Integer "floor" (wav2vec2's output lengths) and float "trunc" run natively; the rest take the fallback.
    a = torch.arange(-20, 21)
    b = torch.tensor([3, -3, 7, -7, 1, -1, 5, 2]).repeat(6)[:41]
    x, y = torch.randn(300, 7) * 100, torch.randn(300, 7)
    npusim._C.reset_fallback_counts()
    floored = torch.div(a.to(device), b.to(device), rounding_mode="floor")
    assert floored.dtype == torch.int64 and torch.equal(floored.cpu(), torch.div(a, b, rounding_mode="floor"))
    truncated = torch.div(x.to(device), y.to(device), rounding_mode="trunc")
    torch.testing.assert_close(truncated.cpu(), torch.div(x, y, rounding_mode="trunc"), rtol=0, atol=0)
    z = x.to(device)
    z.div_(y.to(device), rounding_mode="trunc")
    out = torch.empty(0, dtype=torch.int64, device=device)
    torch.div(a.to(device), 4, rounding_mode="floor", out=out)
    assert torch.equal(z.cpu(), truncated.cpu()) and torch.equal(out.cpu(), torch.div(a, 4, rounding_mode="floor"))
    for dtype in (torch.bfloat16, torch.float16):  # the quotient rounded to the type first, as on the CPU
        expected = torch.div(x.to(dtype), y.to(dtype), rounding_mode="trunc")
        actual = torch.div(x.to(dtype).to(device), y.to(dtype).to(device), rounding_mode="trunc")
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)
    assert npusim._C.fallback_counts() == {}
    for mode in ("trunc", "floor"):  # integer "trunc" and float "floor": the fallback, still exact
        expected = torch.div(a, b, rounding_mode=mode)
        assert torch.equal(torch.div(a.to(device), b.to(device), rounding_mode=mode).cpu(), expected)
        expected = torch.div(x, y, rounding_mode=mode)
        torch.testing.assert_close(
            torch.div(x.to(device), y.to(device), rounding_mode=mode).cpu(), expected, rtol=0, atol=0
        )
    with pytest.raises(RuntimeError, match="rounding_mode"):
        torch.div(x.to(device), y.to(device), rounding_mode="round")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_float_fmod_and_remainder_match_cpu_exactly(dtype, device):
    # fmod keeps the dividend's sign, remainder the divisor's; both exact, so equal to the CPU bit for bit. A zero
    # divisor gives NaN, as on the CPU.
    a = torch.tensor([5.3, -5.3, 5.3, -5.3, 0.0, -0.0, 7.0, 1e4, 2.5, -1.0, 3.0], dtype=dtype)
    b = torch.tensor([2.1, 2.1, -2.1, -2.1, 3.0, -3.0, 0.0, 0.7, 2.5, 4.0, float("inf")], dtype=dtype)
    npusim._C.reset_fallback_counts()
    for function in (torch.fmod, torch.remainder):
        torch.testing.assert_close(function(a.to(device), b.to(device)).cpu(), function(a, b), rtol=0, atol=0,
                                   equal_nan=True)  # fmt: skip
        torch.testing.assert_close(function(a.to(device), -1.5).cpu(), function(a, -1.5), rtol=0, atol=0)
    x = torch.randn(300, 7, dtype=dtype) * 100
    torch.testing.assert_close((x.to(device) % 3.7).cpu(), x % 3.7, rtol=0, atol=0)
    y = x.to(device)
    y.fmod_(torch.tensor(2.0, dtype=dtype).to(device))
    torch.testing.assert_close(y.cpu(), x.fmod(2.0), rtol=0, atol=0)
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_fmod_keeps_the_dividend_sign(dtype, device):
    a = torch.arange(-20, 21, dtype=dtype)
    b = torch.tensor([3, -3, 7, -7, 1, -1, 5, 2], dtype=dtype).repeat(6)[:41]
    npusim._C.reset_fallback_counts()
    assert torch.equal(torch.fmod(a.to(device), b.to(device)).cpu(), torch.fmod(a, b))
    assert torch.equal(torch.fmod(a.to(device), -4).cpu(), torch.fmod(a, -4))
    assert npusim._C.fallback_counts() == {}
    with pytest.raises(RuntimeError, match="division by zero"):
        torch.fmod(a.to(device), torch.zeros_like(a).to(device)).cpu()
    assert torch.equal(torch.fmod(a.to(device), 3).cpu(), torch.fmod(a, 3)), "the device stays usable"


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
def test_integer_neg_abs_maximum_minimum_and_clamp_run_natively_and_wrap_like_the_cpu(dtype, device):
    info = torch.iinfo(dtype)
    a = torch.tensor([info.min, info.min + 1, -7, -1, 0, 1, 5, info.max], dtype=dtype)
    b = torch.tensor([3, info.max, -8, 0, 0, info.min, 5, -2], dtype=dtype)
    grid = torch.arange(-12, 12, dtype=dtype).view(4, 6)
    npusim._C.reset_fallback_counts()
    for function in (torch.neg, torch.abs):  # the most negative value is its own negation and absolute value
        assert torch.equal(function(a.to(device)).cpu(), function(a))
        assert torch.equal(function(grid.t().to(device)).cpu(), function(grid.t()))  # a transposed view
    for function in (torch.maximum, torch.minimum):
        assert torch.equal(function(a.to(device), b.to(device)).cpu(), function(a, b))
        row = grid[1]  # broadcast along the rows
        assert torch.equal(function(grid.to(device), row.to(device)).cpu(), function(grid, row))
    for low, high in ((-3, 4), (None, 2), (-5, None), (4, -3)):  # low above high gives high, as on the CPU
        assert torch.equal(grid.to(device).clamp(low, high).cpu(), grid.clamp(low, high))
    if dtype != torch.int8:  # tensor bounds: int64 and int32
        low, high = grid[0].clone(), grid[3].flip(0)  # some rows' low bound above the high one
        assert torch.equal(grid.to(device).clamp(low.to(device), high.to(device)).cpu(), grid.clamp(low, high))
        assert torch.equal(torch.clamp_min(grid.to(device), low.to(device)).cpu(), torch.clamp_min(grid, low))
    in_place, out = grid.to(device), torch.empty(0, dtype=dtype, device=device)
    in_place.neg_().clamp_(-6, 6)
    torch.maximum(grid.to(device), grid.flip(0).to(device), out=out)
    assert torch.equal(in_place.cpu(), grid.neg().clamp(-6, 6))
    assert torch.equal(out.cpu(), torch.maximum(grid, grid.flip(0)))
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -3])
def test_round_to_decimal_places_is_the_cpus_to_the_bit(device, no_fallback, decimals):
    """x * 10^d rounded half to even, then / 10^d (for d <= 0: x / 10^-d rounded, then times), in float32."""
    x = torch.randn(4000, generator=torch.Generator().manual_seed(decimals + 10)) * 10 ** (2 - decimals)
    x[:8] = torch.tensor([0.5, 1.5, 2.5, -0.5, 0.125, 1234.5, float("inf"), float("nan")])
    expected = torch.round(x, decimals=decimals)
    on_device = x.to(device)
    assert torch.equal(torch.round(on_device, decimals=decimals).cpu().view(torch.int32), expected.view(torch.int32))
    out = torch.empty(0, device=device)
    torch.round(on_device, decimals=decimals, out=out)
    on_device.round_(decimals=decimals)
    for result in (out, on_device):
        result, nan = result.cpu(), expected.isnan()
        assert torch.equal(result.isnan(), nan)
        assert torch.equal(result[~nan].view(torch.int32), expected[~nan].view(torch.int32)), "signed zeros too"


def test_bools_multiply_as_they_conjoin(device, no_fallback):
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    assert torch.equal((a.to(device) * b.to(device)).cpu(), a * b)
    assert torch.equal(torch.isfinite(torch.tensor([1.0, float("inf"), float("nan")], device=device)).cpu(),
                       torch.tensor([True, False, False]))  # fmt: skip


@pytest.mark.parametrize("bound", [torch.clamp_min, torch.clamp_max])
def test_clamp_min_and_max_with_tensor_bounds_propagate_nan_as_on_the_cpu(device, no_fallback, bound):
    x, limit = torch.randn(6, 5), torch.randn(5)
    x[0, 0], limit[1] = float("nan"), float("nan")
    torch.testing.assert_close(bound(x.to(device), limit.to(device)).cpu(), bound(x, limit), equal_nan=True)
    scalar, other = torch.tensor(2.0), torch.tensor(3.0)  # 0-dim tensors on the device
    torch.testing.assert_close(bound(scalar.to(device), other.to(device)).cpu(), bound(scalar, other))
    on_device = x.to(device)
    getattr(on_device, bound.__name__ + "_")(limit.to(device))
    torch.testing.assert_close(on_device.cpu(), bound(x, limit), equal_nan=True)


def test_float_floor_division_follows_the_cpu_formula(device, no_fallback):
    """Floats divide by the CPU's formula (fmod-based, rounded to the nearer whole number, signed zeros, division
    by zero as a / b): one formula kernel, bit for bit (NaN's payload aside)."""
    generator = torch.Generator().manual_seed(4)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, float("inf"), float("-inf"), float("nan"), 1e-30, 1e30]
    a = torch.cat([torch.randn(500, generator=generator) * 50, torch.tensor(special).repeat_interleave(len(special))])
    b = torch.cat([torch.randn(500, generator=generator) * 3, torch.tensor(special).repeat(len(special))])
    for result, expected in (
        (torch.floor_divide(a.to(device), b.to(device)), torch.floor_divide(a, b)),
        (torch.div(a.to(device), b.to(device), rounding_mode="floor"), torch.div(a, b, rounding_mode="floor")),
        (a.to(device) // 0.75, a // 0.75),
    ):
        result, nan = result.cpu(), expected.isnan()
        assert torch.equal(result.isnan(), nan)
        assert torch.equal(result[~nan].view(torch.int32), expected[~nan].view(torch.int32)), "signed zeros too"


def test_lerp_with_a_tensor_weight(device, no_fallback):
    generator = torch.Generator().manual_seed(5)
    start, end = torch.randn(4, 7, generator=generator), torch.randn(4, 7, generator=generator)
    weight = torch.tensor([-0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5])
    result = torch.lerp(start.to(device), end.to(device), weight.to(device))
    torch.testing.assert_close(result.cpu(), torch.lerp(start, end, weight))
    out = start.to(device)
    out.lerp_(end.to(device), weight.to(device))
    torch.testing.assert_close(out.cpu(), torch.lerp(start, end, weight))
    assert torch.equal(result.cpu()[:, 5], end[:, 5]), "exact at weight 1"
