"""Random numbers on npusim: the device generator (seeding, state, torch.Generator objects) and the native random
kernels (rand/uniform_, randn/normal_, randint/random_, randperm, bernoulli, dropout). Each value is checked against an
independent Python implementation of the ISA's definition (Philox4x32-10 at the element's stream position), and
distributions against their moments."""

import math
import struct

import pytest
import torch

import npusim

MASK32 = 0xFFFFFFFF


def philox4x32_10(counter, key):
    """Philox4x32-10, written from Salmon et al. (SC 2011), independently of the emulator's C++."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c0, c1, c2, c3


def words_at(key, position):
    return philox4x32_10((position & MASK32, position >> 32, 0, 0), (key & MASK32, key >> 32))


def uniform_at(key, position):
    return (words_at(key, position)[0] >> 8) * 2.0**-24


def normal_at(key, position):
    x0, x1, _, _ = words_at(key, position)
    u1, u2 = ((x0 >> 8) + 1) * 2.0**-24, (x1 >> 8) * 2.0**-24
    return struct.unpack("f", struct.pack("f", math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)))[0]


def generator_state():
    seed, offset = struct.unpack("<QQ", bytes(torch.npusim.get_rng_state().tolist()))
    return seed, offset


def test_the_philox_reference_matches_random123s_known_answers():
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert philox4x32_10((MASK32,) * 4, (MASK32,) * 2) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)


def test_rand_and_randn_follow_the_isa_definition_at_the_generators_stream_position(no_fallback):
    torch.npusim.manual_seed(2**40 + 17)  # a key with both halves non-zero
    seed, offset = generator_state()
    assert (seed, offset) == (2**40 + 17, 0)
    uniform = torch.rand(3000, device="npusim").cpu()  # several tiles, shared among the cores
    for k in (0, 1, 1234, 2999):
        assert uniform[k].item() == uniform_at(seed, k)
    assert generator_state() == (seed, 3000)  # the kernel reserved its positions
    normal = torch.randn(2, 50, device="npusim").cpu().flatten()
    for k in (0, 7, 99):
        assert normal[k].item() == normal_at(seed, 3000 + k)


def test_manual_seed_reproduces_and_different_seeds_differ(no_fallback):
    def draw(seed):
        torch.manual_seed(seed)  # seeds the npusim generators too, as it does CUDA's
        return torch.rand(100, device="npusim").cpu(), torch.randn(100, device="npusim").cpu()

    first, again, other = draw(7), draw(7), draw(8)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[0], first[1])  # successive draws do not reuse numbers
    assert torch.npusim.initial_seed() == 8


def test_uniform_and_normal_have_the_asked_for_range_and_moments(no_fallback):
    torch.manual_seed(0)
    n = 200_000
    uniform = torch.empty(n, device="npusim").uniform_(-2, 3).cpu().double()
    assert uniform.min() >= -2 and uniform.max() < 3
    # mean 0.5 with standard error 5 / sqrt(12 n) = 0.0032; variance 25/12
    assert abs(uniform.mean().item() - 0.5) < 0.02
    assert abs(uniform.var().item() - 25 / 12) < 0.05
    normal = torch.empty(n, device="npusim").normal_(1.5, 0.5).cpu().double()
    assert abs(normal.mean().item() - 1.5) < 0.01  # standard error 0.5 / sqrt(n) = 0.0011
    assert abs(normal.std().item() - 0.5) < 0.01
    within_one_sigma = ((normal - 1.5).abs() < 0.5).double().mean().item()
    assert abs(within_one_sigma - 0.6827) < 0.01


def test_complex_draws_each_part_as_pytorch_does(no_fallback):
    torch.manual_seed(0)
    n = 200_000
    uniform = torch.empty(n, dtype=torch.complex64, device="npusim").uniform_(-2, 3).cpu()
    for part in (uniform.real, uniform.imag):
        assert part.min() >= -2 and part.max() < 3 and abs(part.double().mean().item() - 0.5) < 0.02
    # PyTorch's complex normal: each part normal with mean `mean` and std / sqrt 2, so E|z - E z|^2 = std^2
    normal = torch.empty(n, dtype=torch.complex64, device="npusim").normal_(1.5, 0.5).cpu().to(torch.complex128)
    assert abs(normal.mean() - (1.5 + 1.5j)) < 0.01
    assert abs(((normal - normal.mean()).abs() ** 2).mean().item() - 0.25) < 0.01
    assert abs(normal.real.std().item() - 0.5 / 2**0.5) < 0.01
    randn = torch.randn(3, 4, dtype=torch.complex64, device="npusim")
    assert randn.dtype == torch.complex64 and randn.device.type == "npusim"


def test_random_ops_fill_non_contiguous_and_half_precision_tensors(no_fallback):
    torch.manual_seed(3)
    base = torch.zeros(64, 64, device="npusim")
    view = base.t()[:, ::2]
    view.uniform_(5, 6)
    host = base.cpu()
    assert ((host[::2] >= 5) & (host[::2] < 6)).all()  # the view's elements
    assert (host[1::2] == 0).all()  # and nothing else
    for dtype in (torch.float16, torch.bfloat16):
        sample = torch.randn(1000, device="npusim", dtype=dtype)
        assert sample.dtype == dtype and abs(sample.float().mean().item()) < 0.2
        assert (torch.rand(1000, device="npusim", dtype=dtype).cpu() < 1).all()


def integer_at(key, position, count, k, low, high):
    """randint's element k of `count`: 63 bits (64 when the span exceeds 2^63 - 1) from the 24-bit uniforms at
    positions p + k, p + n + k and p + 2n + k, modulo the span, as the kernel (random.h) defines it."""
    words = [words_at(key, position + j * count + k)[0] >> 8 for j in range(3)]
    span = high - low
    extra = 16 if span > 2**63 - 1 else 15
    bits = (((words[0] << 24) | words[1]) << extra) | (words[2] >> (24 - extra))
    value = low + bits % span
    return value - 2**64 if value >= 2**63 else value


@pytest.mark.parametrize(
    ("low", "high", "dtype"),
    [(0, 10, torch.int64), (-5, 3, torch.int32), (-(2**31), 2**31, torch.int32), (-(2**63), 2**63 - 1, torch.int64)],
)
def test_randint_follows_its_definition_and_reserves_three_positions_per_element(no_fallback, low, high, dtype):
    torch.npusim.manual_seed(2**33 + 5)
    seed, offset = generator_state()
    count = 5000
    drawn = torch.randint(low, high, (count,), device="npusim", dtype=dtype).cpu()
    assert drawn.dtype == dtype and generator_state() == (seed, offset + 3 * count)
    for k in (0, 1, 777, 4999):
        assert drawn[k].item() == integer_at(seed, offset, count, k, low, high)
    assert drawn.min().item() >= low and drawn.max().item() < high
    # about uniform: the mean of (x - low) / span is (span - 1) / 2 span, with a standard error of 0.29 / sqrt(n)
    span = high - low
    relative = (drawn.double() - low) / span
    assert abs(relative.mean().item() - (span - 1) / (2 * span)) < 0.02


@pytest.mark.parametrize(
    ("low", "high", "dtype"),
    [(0, 2, torch.bool), (-128, 128, torch.int8), (0, 256, torch.uint8), (-300, 300, torch.int16)],
)
def test_narrow_integers_and_bools_are_drawn_as_int32_and_converted(no_fallback, low, high, dtype):
    torch.npusim.manual_seed(91)
    seed, offset = generator_state()
    count = 3000
    drawn = torch.randint(low, high, (count,), device="npusim", dtype=dtype).cpu()
    assert drawn.dtype == dtype and generator_state() == (seed, offset + 3 * count)
    for k in (0, 1, 1234, 2999):
        assert int(drawn[k]) == integer_at(seed, offset, count, k, low, high)
    assert int(drawn.min()) >= low and int(drawn.max()) < high
    # No upper bound: up to the type's largest value.
    top = 1 if dtype == torch.bool else torch.iinfo(dtype).max
    unbounded = torch.empty(count, device="npusim", dtype=dtype).random_(low, None).cpu()
    assert int(unbounded.min()) >= low and int(unbounded.max()) <= top and len(unbounded.unique()) > 1


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float16])
def test_randperm_is_a_permutation_seeded_by_the_device_generator(no_fallback, dtype):
    for n in (0, 1, 7, 2048):
        torch.npusim.manual_seed(5)
        permutation = torch.randperm(n, device="npusim", dtype=dtype)
        assert permutation.dtype == dtype and permutation.shape == (n,)
        assert torch.equal(permutation.cpu().sort().values.long(), torch.arange(n))
        torch.npusim.manual_seed(5)
        assert torch.equal(torch.randperm(n, device="npusim", dtype=dtype), permutation)  # reproducible
    # A random permutation of n fixes about one point (Poisson with mean 1); another seed gives another one.
    assert (permutation.cpu().long() == torch.arange(2048)).sum() < 10
    assert not torch.equal(torch.randperm(2048, device="npusim", dtype=dtype), permutation)
    out = torch.empty(3, dtype=torch.int64, device="npusim")
    assert torch.randperm(5, out=out, device="npusim") is out and out.shape == (5,)


def test_random_integers_in_place_and_their_errors(no_fallback):
    base = torch.zeros(8, 10, dtype=torch.int64, device="npusim")
    base.t()[::2].random_(3, 7)  # a non-contiguous view: its elements only
    host = base.cpu()
    assert ((host[:, ::2] >= 3) & (host[:, ::2] < 7)).all() and (host[:, 1::2] == 0).all()
    assert torch.randint(5, (1,), device="npusim").item() in range(5)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=7 >= to=3"):
        base.random_(7, 3)


def test_half_precision_dropout_is_one_kernel_rounded_once(no_fallback):
    torch.manual_seed(6)
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(40, 70).to(dtype)
        with npusim.profile() as report:
            out, mask = torch.native_dropout(x.to("npusim"), 0.4, True)
        assert [k for k in report.by_kernel() if k.startswith("dropout")] == [f"dropout_{npusim_type(dtype)}"]
        assert out.dtype == dtype and mask.dtype == torch.bool
        expected = torch.where(mask.cpu(), (x.float() * (1 / 0.6)).to(dtype), torch.zeros((), dtype=dtype))
        assert torch.equal(out.cpu(), expected)


def npusim_type(dtype):
    return {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32"}[dtype]


def test_dropout_backward_is_grad_times_mask_times_scale_as_pytorch_computes_it(no_fallback):
    grad = torch.tensor([-1.5, 2.0, float("inf"), -0.0, 3.0, float("nan")])
    mask = torch.tensor([False, True, False, False, True, True])
    for dtype in (torch.float32, torch.bfloat16):
        expected = torch.ops.aten.native_dropout_backward(grad.to(dtype), mask, 1.25)
        actual = torch.ops.aten.native_dropout_backward(grad.to(dtype).to("npusim"), mask.to("npusim"), 1.25).cpu()
        assert torch.equal(actual.isnan(), expected.isnan())
        finite = ~expected.isnan()
        assert torch.equal(actual[finite], expected[finite])
        assert torch.equal(actual[finite].signbit(), expected[finite].signbit())  # a dropped negative gradient: -0


def test_bernoulli_draws_at_the_probability(no_fallback):
    torch.manual_seed(4)
    assert abs(torch.empty(100_000, device="npusim").bernoulli_(0.3).mean().item() - 0.3) < 0.01
    p = torch.tensor([0.0, 1.0] * 500 + [0.25] * 10_000, device="npusim")
    draws = torch.bernoulli(p).cpu()
    assert (draws[:1000:2] == 0).all() and (draws[1:1000:2] == 1).all()
    assert abs(draws[1000:].mean().item() - 0.25) < 0.02


def test_dropout_scales_what_it_keeps_and_its_gradient_uses_the_same_mask(no_fallback):
    torch.manual_seed(5)
    x = torch.randn(32, 100, device="npusim", requires_grad=True)
    out = torch.nn.functional.dropout(x, p=0.25, training=True)
    out.backward(torch.ones_like(out))
    host_x, host_out, host_grad = x.detach().cpu(), out.detach().cpu(), x.grad.cpu()
    kept = host_out != 0
    assert abs(kept.double().mean().item() - 0.75) < 0.03
    scale = 1 / 0.75  # multiplied by, as PyTorch's own dropout does
    assert torch.equal(host_out[kept], host_x[kept] * scale)
    assert torch.equal(host_grad, kept.float() * scale)
    mask = torch.native_dropout(x.detach(), 0.25, True)[1]
    assert mask.dtype == torch.bool and mask.device.type == "npusim"


def test_dropout_edge_probabilities_and_evaluation(no_fallback):
    x = torch.randn(1000, device="npusim")
    assert torch.equal(torch.nn.functional.dropout(x, p=1.0, training=True).cpu(), torch.zeros(1000))
    assert torch.equal(torch.nn.functional.dropout(x, p=0.3, training=False).cpu(), x.cpu())
    output, mask = torch.native_dropout(x, 0.3, False)
    assert torch.equal(output.cpu(), x.cpu()) and mask.cpu().all()


def test_generators_are_independent_streams_with_saveable_state(no_fallback):
    generator = torch.Generator(device="npusim")
    generator.manual_seed(11)
    torch.manual_seed(11)
    default_draw = torch.rand(10, device="npusim").cpu()
    own_draw = torch.rand(10, device="npusim", generator=generator).cpu()
    assert torch.equal(own_draw, default_draw)  # same seed, same stream, independently advanced
    state = generator.get_state()
    following = torch.rand(10, device="npusim", generator=generator).cpu()
    generator.set_state(state)
    assert torch.equal(torch.rand(10, device="npusim", generator=generator).cpu(), following)
    with torch.random.fork_rng(device_type="npusim"):
        inside = torch.rand(10, device="npusim").cpu()
    assert torch.equal(torch.rand(10, device="npusim").cpu(), inside)  # fork_rng restored the state


def test_bad_random_arguments_are_clear_errors():
    tensor = torch.empty(4, device="npusim")
    with pytest.raises(RuntimeError, match="from=3.* > to=2"):
        tensor.uniform_(3, 2)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        tensor.normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        tensor.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.npusim.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="npusim generator"):
        tensor.uniform_(generator=torch.Generator())
    assert torch.rand(4, device="npusim").shape == (4,)  # the device is still usable


def test_a_model_with_dropout_trains_natively_and_reproducibly(no_fallback):
    def train(seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 4)
        ).to("npusim")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(8, 16, device="npusim"), torch.randn(8, 4, device="npusim")
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses

    first = train(0)
    assert first == train(0)
    assert all(math.isfinite(value) for value in first) and first != train(1)
