"""float16 and bfloat16 elementwise kernels on npusim: loaded in half precision, widened to float32 in the
scratchpad, computed in float32 and rounded once on the way out, as PyTorch computes half-precision ops on the CPU;
so arithmetic matches the CPU's bit for bit, and special functions (which the chip evaluates in binary64, the CPU
in float32 approximations) to within one unit in the last place of the half-precision result."""

import pytest
import torch
import torch.nn.functional as F

import npusim

DTYPES = [torch.bfloat16, torch.float16]

OPS = {
    "add": lambda a, b: a + b,
    "sub with alpha": lambda a, b: torch.sub(a, b, alpha=1),
    "mul by a python scalar": lambda a, b: a * 0.1,
    "div": lambda a, b: a / b,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "mixed with float32": lambda a, b: a.float() * b,
    "relu": lambda a, b: F.relu(a),
    "leaky_relu": lambda a, b: F.leaky_relu(a, 0.1),
    "hardswish": lambda a, b: F.hardswish(a),
    "on a transposed view": lambda a, b: a.t() * 2,
    "in place": lambda a, b: a.clone().add_(b),
}


SPECIAL_FUNCTIONS = {
    "exact gelu": lambda a: F.gelu(a),
    "gelu tanh": lambda a: F.gelu(a, approximate="tanh"),
    "silu": F.silu,
    "exp": torch.exp,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "rsqrt of abs": lambda a: a.abs().rsqrt(),
    "elu": F.elu,
}

# One unit in the last place, relative: 2^-7 for bfloat16's 8-bit significand, 2^-10 for float16's 11 bits.
ULP = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


def operands(dtype):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(37, 65, generator=generator).to(dtype), torch.randn(65, generator=generator).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", OPS)
def test_half_precision_arithmetic_matches_cpu_bit_for_bit(name, dtype):
    a, b = operands(dtype)
    npusim._C.reset_fallback_counts()
    actual = OPS[name](a.to("npusim"), b.to("npusim"))
    expected = OPS[name](a, b)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", SPECIAL_FUNCTIONS)
def test_half_precision_special_functions_are_within_one_unit_of_cpu(name, dtype):
    a, _ = operands(dtype)
    npusim._C.reset_fallback_counts()
    actual = SPECIAL_FUNCTIONS[name](a.to("npusim"))
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.cpu(), SPECIAL_FUNCTIONS[name](a), rtol=ULP[dtype], atol=1e-5)
    assert npusim._C.fallback_counts() == {}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gradients_of_half_precision_activations_match_cpu(dtype):
    x = torch.randn(500, generator=torch.Generator().manual_seed(1)).to(dtype)
    npusim._C.reset_fallback_counts()
    for activation in (F.gelu, F.relu, F.silu, lambda t: F.leaky_relu(t, 0.2), F.hardswish):
        on_device, on_cpu = x.to("npusim").requires_grad_(), x.clone().requires_grad_()
        activation(on_device).sum().backward()
        activation(on_cpu).sum().backward()
        torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad, rtol=ULP[dtype], atol=1e-5)


def test_half_precision_kernels_are_named_for_their_type():
    x = torch.ones(16, dtype=torch.bfloat16, device="npusim")
    with npusim.profile() as report:
        (x + x).exp()
    assert list(report.by_kernel()) == ["add_bf16", "exp_bf16"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_half_precision_matmul_accumulates_in_float32_and_rounds_once(dtype):
    generator = torch.Generator().manual_seed(2)
    a, b = torch.randn(70, 300, generator=generator).to(dtype), torch.randn(300, 50, generator=generator).to(dtype)
    npusim._C.reset_fallback_counts()
    with npusim.profile() as report:
        actual = (a.to("npusim") @ b.to("npusim")).cpu()
        batched = torch.bmm(a.reshape(7, 10, 300).to("npusim"), b.expand(7, 300, 50).to("npusim")).cpu()
    assert npusim._C.fallback_counts() == {} and f"matmul_{str(dtype)[6:].replace('float', 'f')}" in report.by_kernel()
    # The matrix engine sums the exact products in float32, in k order, and rounds each output once: the float32
    # product rounded to the type, up to one unit of the type, or (where the sum cancels) the float32 sums' own
    # rounding, which differs with their order: 300 terms of size ~1 carry ~1e-5.
    once = (a.float() @ b.float()).to(dtype)
    torch.testing.assert_close(actual, once, rtol=ULP[dtype], atol=1e-4)
    torch.testing.assert_close(batched.reshape(70, 50), actual, rtol=0, atol=0)
    if dtype == torch.bfloat16:  # the CPU's bfloat16 GEMM does the same here
        torch.testing.assert_close(actual, a @ b, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_half_precision_mlp_infers_natively(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(approximate="tanh"), torch.nn.Linear(128, 10)
    ).to(dtype)
    x = torch.randn(16, 64, generator=torch.Generator().manual_seed(3)).to(dtype)
    npusim._C.reset_fallback_counts()
    with torch.no_grad():
        actual = model.to("npusim")(x.to("npusim")).cpu()
        expected = model.cpu()(x)
    assert npusim._C.fallback_counts() == {}
    # addmm adds the bias to the float32 product and rounds once, as the CPU does: bfloat16 bit for bit, float16 (whose
    # CPU GEMM sums in another order) within a unit.
    exact = dtype == torch.bfloat16
    torch.testing.assert_close(actual, expected, rtol=0 if exact else ULP[dtype], atol=0 if exact else 1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_half_precision_sums_and_means_accumulate_in_float32(dtype):
    x = torch.randn(37, 65, 3, generator=torch.Generator().manual_seed(4)).to(dtype)
    npusim._C.reset_fallback_counts()
    for reduce in (torch.sum, torch.mean, lambda t: t.sum(0), lambda t: t.mean((0, 2), keepdim=True)):
        actual, expected = reduce(x.to("npusim")).cpu(), reduce(x)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert npusim._C.fallback_counts() == {}


def test_autocast_bfloat16_training_runs_natively_and_follows_cpu_autocast():
    """torch.autocast(device_type="npusim"): linear layers in bfloat16, layer norm and the loss in float32, as
    PyTorch's autocast lists say; AdamW on float32 master weights. The same steps under CPU autocast."""

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 4)
        )

    model, reference = make().to("npusim"), make()
    optimizer, reference_optimizer = (torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, reference))
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, 4, (32,), generator=torch.Generator().manual_seed(6))
    losses = {"npusim": [], "cpu": []}
    npusim._C.reset_fallback_counts()
    for _ in range(3):
        for device, net, opt in (("npusim", model, optimizer), ("cpu", reference, reference_optimizer)):
            opt.zero_grad()
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                logits = net(x.to(device))
                assert logits.dtype == torch.bfloat16
                loss = F.cross_entropy(logits, y.to(device))
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
    assert npusim._C.fallback_counts() == {}
    torch.testing.assert_close(losses["npusim"], losses["cpu"], rtol=1e-2, atol=1e-3)
