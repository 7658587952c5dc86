"""Maxima, minima, their indices, variance and standard deviation, logsumexp and masked_fill on npusim against the
same ops on the CPU, bit for bit where the CPU's result is exact (extrema and indices), to float32 tolerance where
it is computed (variance); histc and bincount."""

import pytest
import torch

import npusim


def same(actual, expected):
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype


def as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def with_nan_and_ties():
    x = torch.randn(7, 33, 5, generator=torch.Generator().manual_seed(0))
    x[2, 3, 1] = float("nan")  # NaN is the extremum, and its index the first NaN's
    x[4, :, 0] = 1.0  # ties: the first index
    x[5, 7, :] = float("-inf")
    return x


EXTREMA = {
    "max over a middle dim": lambda t: t.max(1),
    "min over the last dim, kept": lambda t: t.min(-1, keepdim=True),
    "max of a transposed view": lambda t: t.transpose(0, 2).max(1),
    "amax over two dims": lambda t: t.amax((0, 2)),
    "amin over all, kept": lambda t: t.amin(dim=(), keepdim=True),
    "max of everything": lambda t: t.max(),
    "min of everything": lambda t: t.min(),
    "argmax flattened": lambda t: t.argmax(),
    "argmin along dim 1": lambda t: t.argmin(1),
    "argmax along dim 0, kept": lambda t: t.argmax(0, keepdim=True),
    "argmax flattened, kept": lambda t: t.argmax(keepdim=True),
}


@pytest.mark.parametrize("name", EXTREMA)
def test_extrema_and_their_indices_match_cpu_exactly(name, no_fallback):
    x = with_nan_and_ties()
    actual, expected = EXTREMA[name](x.to("npusim")), EXTREMA[name](x)
    for got, want in zip(as_tuple(actual), as_tuple(expected), strict=True):
        same(got, want)


def test_extrema_of_rows_longer_than_the_scratchpad_reduce_in_chunks(no_fallback):
    x = torch.randn(3, 100_003, generator=torch.Generator().manual_seed(1))  # 400 KB rows, a partial last chunk
    x[1, 100_001] = 50.0  # in the tail
    same(x.to("npusim").amax(-1), x.amax(-1))
    same(x.to("npusim").min(), x.min())


OTHER_TYPES = [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float16, torch.bfloat16, torch.bool]


def of_type(dtype):
    """Values with many ties (and, for floats, a NaN and infinities) in `dtype`, over [7, 33, 5]."""
    generator = torch.Generator().manual_seed(2)
    if dtype == torch.bool:
        return torch.rand(7, 33, 5, generator=generator) < 0.3
    low = 0 if dtype == torch.uint8 else -100
    x = torch.randint(low, 100, (7, 33, 5), generator=generator).to(dtype)
    if dtype.is_floating_point:
        x = x * 0.25
        x[2, 3, 1], x[5, 7, 2], x[6, 0, 0] = float("nan"), float("inf"), float("-inf")
    if dtype == torch.int64:
        x[1, 4, 2] = 2**62 + 1  # beyond float precision
    return x


@pytest.mark.parametrize("dtype", OTHER_TYPES, ids=str)
@pytest.mark.parametrize("name", EXTREMA)
def test_extrema_of_integers_halves_and_bools_match_cpu_exactly_natively(name, dtype, no_fallback):
    if dtype == torch.bool and "arg" in name:
        pytest.skip("PyTorch refuses argmax and argmin of bools (tested below)")
    x = of_type(dtype)
    actual, expected = EXTREMA[name](x.to("npusim")), EXTREMA[name](x)
    for got, want in zip(as_tuple(actual), as_tuple(expected), strict=True):
        same(got, want)


def test_argmax_of_bools_raises_pytorchs_error():
    with pytest.raises(RuntimeError, match="bool"):
        torch.zeros(3, dtype=torch.bool, device="npusim").argmax()


def test_int16_extrema_take_the_fallback_and_stay_correct():
    x = torch.randint(-100, 100, (6, 9), generator=torch.Generator().manual_seed(2)).to(torch.int16)
    values, indices = x.to("npusim").max(1)
    same(values, x.max(1).values)
    same(indices, x.max(1).indices)
    same(x.to("npusim").argmax(), x.argmax())


VARIANCES = {
    "var of everything": lambda t: t.var(),
    "std along a dim": lambda t: t.std(1),
    "var_mean over two dims, kept": lambda t: torch.var_mean(t, (0, 2), keepdim=True),
    "std_mean without correction": lambda t: torch.std_mean(t, 1, correction=0),
    "var with a correction past the count": lambda t: t.var(2, correction=5),  # inf and NaN, as on the CPU
    "logsumexp": lambda t: torch.logsumexp(t, 1),
}


@pytest.mark.parametrize("name", VARIANCES)
def test_variance_and_logsumexp_match_cpu(name, no_fallback):
    x = torch.randn(4, 10, 3, generator=torch.Generator().manual_seed(3)) * 3 + 1
    actual, expected = VARIANCES[name](x.to("npusim")), VARIANCES[name](x)
    for got, want in zip(as_tuple(actual), as_tuple(expected), strict=True):
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)
        assert got.shape == want.shape


def test_std_backward_runs_natively_and_matches_cpu(no_fallback):
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4), requires_grad=True)
    on_device = x.detach().to("npusim").requires_grad_()
    x.std(1).sum().backward()
    on_device.std(1).sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad)


def test_masked_fill_with_scalars_tensors_and_broadcast_masks(no_fallback):
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(5))
    same(x.to("npusim").masked_fill(x.to("npusim") > 0, -1.5), x.masked_fill(x > 0, -1.5))
    row_mask = torch.tensor([True, False, True])
    filled = x.to("npusim").masked_fill_(row_mask.to("npusim"), torch.tensor(2.0))
    same(filled, x.clone().masked_fill_(row_mask, torch.tensor(2.0)))
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.to("npusim").masked_fill_(row_mask.to("npusim"), torch.ones(3).to("npusim"))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_along_any_dimension_matches_cpu(dim, no_fallback):
    x = torch.randn(7, 33, 5, generator=torch.Generator().manual_seed(6))
    # A sequential float32 sum where the CPU accumulates in float64: a few units in the last place.
    torch.testing.assert_close(torch.cumsum(x.to("npusim"), dim).cpu(), torch.cumsum(x, dim))


def test_cumsum_of_integers_and_bools_is_exact_int64(no_fallback):
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]])
    same(torch.cumsum(mask.to("npusim"), -1), torch.cumsum(mask, -1))  # position ids from an attention mask
    same(torch.cumsum(mask.bool().to("npusim"), 1), torch.cumsum(mask.bool(), 1))
    same(torch.cumsum(mask.int().to("npusim"), 0, dtype=torch.int32), torch.cumsum(mask.int(), 0, dtype=torch.int32))


def test_cumsum_gradient_runs_natively_through_flip(no_fallback):
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(7), requires_grad=True)
    on_device = x.detach().to("npusim").requires_grad_()
    torch.cumsum(x, 1).pow(2).sum().backward()
    torch.cumsum(on_device, 1).pow(2).sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_along_any_dimension_matches_cpu_and_its_gradient_runs_natively(dim, no_fallback):
    x = (torch.rand(7, 12, 5, generator=torch.Generator().manual_seed(8)) + 0.5).requires_grad_()
    on_device = x.detach().to("npusim").requires_grad_()
    actual, expected = torch.cumprod(on_device, dim), torch.cumprod(x, dim)
    # A sequential float32 product where the CPU accumulates in float64: a few units in the last place.
    torch.testing.assert_close(actual.detach().cpu(), expected.detach())
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=1e-5, atol=1e-5)
    integers = torch.randint(-3, 4, (4, 9), generator=torch.Generator().manual_seed(9))
    same(torch.cumprod(integers.to("npusim"), 1), torch.cumprod(integers, 1))  # exact, wrapping int64
    same(torch.cumprod(integers.bool().to("npusim"), 1), torch.cumprod(integers.bool(), 1))


def test_prod_over_a_dim_and_over_everything_matches_cpu_with_its_gradient(no_fallback):
    x = (torch.rand(6, 9, generator=torch.Generator().manual_seed(10)) + 0.5).requires_grad_()
    on_device = x.detach().to("npusim").requires_grad_()
    long = torch.rand(3000, generator=torch.Generator().manual_seed(11)) * 0.2 + 0.9  # rows of rows' products
    integers = torch.randint(-3, 4, (4, 6), generator=torch.Generator().manual_seed(12))
    # Sequential float32 products, where the CPU multiplies in another order: a few units in the last place.
    torch.testing.assert_close(on_device.prod(1).detach().cpu(), x.prod(1).detach())
    torch.testing.assert_close(on_device.prod(0, keepdim=True).detach().cpu(), x.prod(0, keepdim=True).detach())
    torch.testing.assert_close(long.to("npusim").prod().cpu(), long.prod(), rtol=1e-5, atol=0)
    same(integers.to("npusim").prod(1), integers.prod(1))  # exact int64
    same(integers.bool().to("npusim").prod(0), integers.bool().prod(0))
    (on_device.prod(1).sum() + on_device.prod()).backward()
    (x.prod(1).sum() + x.prod()).backward()
    torch.testing.assert_close(on_device.grad.cpu(), x.grad, rtol=1e-5, atol=1e-6)


NORMS = {
    "2-norm of everything": lambda t: t.norm(),
    "2-norm along the last dim": lambda t: t.norm(dim=-1),
    "1-norm over two dims, kept": lambda t: torch.linalg.vector_norm(t, 1, (0, 2), keepdim=True),
    "inf-norm": lambda t: torch.linalg.vector_norm(t, float("inf")),
    "3-norm": lambda t: torch.linalg.vector_norm(t, 3.0, -1),
    "normalize": lambda t: torch.nn.functional.normalize(t, dim=-1),
    "bfloat16 2-norm": lambda t: t.to(torch.bfloat16).norm(dim=1),
}


@pytest.mark.parametrize("name", NORMS)
def test_vector_norms_match_cpu(name, no_fallback):
    x = torch.randn(4, 10, 16, generator=torch.Generator().manual_seed(8))
    actual, expected = NORMS[name](x.to("npusim")), NORMS[name](x)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected)


def test_gradient_clipping_runs_natively_and_matches_cpu(no_fallback):
    gradient = torch.randn(100, generator=torch.Generator().manual_seed(9)) * 10
    on_device, on_cpu = torch.nn.Parameter(torch.zeros(100, device="npusim")), torch.nn.Parameter(torch.zeros(100))
    on_device.grad, on_cpu.grad = gradient.to("npusim"), gradient.clone()
    total = torch.nn.utils.clip_grad_norm_([on_device], 1.0)
    torch.testing.assert_close(total.cpu(), torch.nn.utils.clip_grad_norm_([on_cpu], 1.0))
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_and_log_softmax_over_other_dimensions_and_their_gradients(dim, no_fallback):
    x = torch.randn(4, 10, 16, generator=torch.Generator().manual_seed(10))
    for function in (torch.softmax, torch.log_softmax):
        on_cpu, on_device = x.clone().requires_grad_(), x.to("npusim").requires_grad_()
        expected, actual = function(on_cpu, dim), function(on_device, dim)
        torch.testing.assert_close(actual.detach().cpu(), expected.detach())
        gradient = torch.randn(x.shape, generator=torch.Generator().manual_seed(11))
        expected.backward(gradient)
        actual.backward(gradient.to("npusim"))
        torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)


def test_clamp_min_clamp_max_and_erf_run_natively(no_fallback):
    x = torch.randn(300, generator=torch.Generator().manual_seed(12))
    x[7] = float("nan")
    for function in (lambda t: t.clamp_min(0.1), lambda t: t.clamp_max(-0.2), lambda t: t.clone().clamp_min_(0.0)):
        same(function(x.to("npusim")), function(x))
    same(x.to(torch.bfloat16).to("npusim").clamp(-0.5, 0.5), x.to(torch.bfloat16).clamp(-0.5, 0.5))
    torch.testing.assert_close(torch.erf(x.to("npusim")).cpu(), torch.erf(x), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.bool])
def test_integer_and_bool_sums_are_int64_natively_and_wrap_like_the_cpu(dtype, device):
    if dtype == torch.bool:
        x = torch.arange(60).view(3, 4, 5) % 3 == 0
    else:
        x = torch.arange(-30, 30, dtype=dtype).view(3, 4, 5) * 3
    npusim._C.reset_fallback_counts()
    on_device = x.to(device)
    for dims, keepdim in (((), False), ((2,), False), ((0,), True), ((0, 2), False), ((-1, 1), True)):
        actual = on_device.sum(dims, keepdim=keepdim) if dims else on_device.sum()
        expected = x.sum(dims, keepdim=keepdim) if dims else x.sum()
        assert actual.dtype == torch.int64 and torch.equal(actual.cpu(), expected)
    assert torch.equal(on_device.transpose(0, 2).sum(1).cpu(), x.transpose(0, 2).sum(1))  # a strided view
    assert torch.equal(on_device[:, :0].sum(1).cpu(), x[:, :0].sum(1))  # empty rows sum to zero
    assert npusim._C.fallback_counts() == {}
    big = torch.full((4,), 2**62, dtype=torch.int64)  # int64 wraps, as on the CPU
    assert torch.equal(big.to(device).sum().cpu(), big.sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_topk_of_a_few_elements_runs_natively_and_matches_the_cpu(dtype, device):
    # Distinct values (the order of equal elements' indices is not specified), a NaN that the largest ranks first.
    x = torch.randperm(6 * 40, generator=torch.Generator().manual_seed(3)).view(6, 40).to(dtype) - 100  # exact in bf16
    x[2, 5] = float("nan")
    npusim._C.reset_fallback_counts()
    without_nan = x[3:]
    for rows, k, dim, largest in ((x, 1, 1, True), (x, 2, -1, True), (x, 8, 1, True), (x, 3, 0, True),
                                  (without_nan, 2, 0, False), (without_nan, 4, 1, False)):  # fmt: skip
        values, indices = rows.to(device).topk(k, dim, largest=largest)
        expected_values, expected_indices = rows.topk(k, dim, largest=largest)
        torch.testing.assert_close(values.cpu(), expected_values, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(indices.cpu(), expected_indices), (k, dim, largest)
    assert npusim._C.fallback_counts() == {}
    # The smallest of rows with NaN (ranked above every number), which the rounds would pick first, and k past the
    # rounds: the first k of the native sort.
    with npusim.profile() as report:
        smallest = x.to(device).topk(2, 1, largest=False)
        many = x.to(device).topk(30, 1)
    assert report.fallbacks == {} and "sort_merge" not in str(report.by_kernel())  # rows of 40: ranked, not merged
    assert any(name.startswith("sort_ranks") for name in report.by_kernel())
    torch.testing.assert_close(smallest.values.cpu(), x.topk(2, 1, largest=False).values, rtol=0, atol=0)
    torch.testing.assert_close(many.values.cpu(), x.topk(30, 1).values, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(many.indices.cpu(), x.topk(30, 1).indices)  # distinct values: one order


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_histc_of_integers_counts_as_cuda_does(dtype, device):
    # transformers' mixture-of-experts load-balancing loss counts tokens per expert with histc of int32 on any device
    # but the CPU and MPS; the CPU has no integer histc, so the reference is the float histogram of the same values.
    experts = torch.randint(0, 8, (1000,), generator=torch.Generator().manual_seed(0), dtype=dtype)
    with npusim.profile() as report:
        results = {bounds: torch.histc(experts.to(device), *bounds) for bounds in [(8, 0, 8), (4, 0, 8), (5, 2, 6)]}
        out = torch.empty(0, dtype=dtype, device=device)
        torch.histc(experts.to(device), 8, 0, 8, out=out)
    assert report.fallbacks == {}
    for (bins, low, high), counts in results.items():
        assert counts.dtype == dtype
        assert torch.equal(counts.cpu(), torch.histc(experts.float(), bins, low, high).to(dtype))
    assert torch.equal(out.cpu(), results[(8, 0, 8)].cpu())
    # Bounds from the data (0, 0), and a single value, widened by one on each side as CUDA does.
    assert torch.equal(torch.histc(experts.to(device), 3).cpu(), torch.histc(experts.float(), 3).to(dtype))
    assert torch.histc(torch.full((4,), 5, dtype=dtype, device=device), 2).cpu().tolist() == [0, 4]
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(experts.to(device), 0, 0, 8)


@pytest.mark.parametrize(
    "bins, low, high",
    [(10, -2, 2), (1, 0, 1), (1000, -3, 3), (7, 0, 0), (5, 1, 1 + 1e-6)],
    ids=["in range and out", "one bin", "blocks of elements", "the data's range", "edges closer than an ulp"],
)
def test_histc_of_float32_counts_as_the_cpu_does(bins, low, high, device, monkeypatch):
    # 1000 bins make the 10,000 elements three blocks of comparisons; NaN is ignored (but is no range of its own).
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    values = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 2
    if low != high:
        values[::97] = float("nan")
    counts = torch.histc(values.to(device), bins, low, high)
    assert counts.dtype == torch.float32
    assert torch.equal(counts.cpu(), torch.histc(values, bins, low, high))
    out = torch.empty(0, device=device)
    torch.histc(values.to(device), bins, low, high, out=out)
    assert torch.equal(out.cpu(), counts.cpu())


@pytest.mark.parametrize(
    "values, low, high, message",
    [
        ([1.0, 2.0], 3, 1, "max must be larger than min"),
        ([1.0, 2.0], 0, float("inf"), r"range of \[0, inf\] is not finite"),
        ([1.0, float("nan")], 0, 0, "is not finite"),
    ],
)
def test_histc_of_float32_refuses_the_ranges_the_cpu_refuses(values, low, high, message, device):
    with pytest.raises(RuntimeError, match=message):
        torch.histc(torch.tensor(values), 4, low, high)
    with pytest.raises(RuntimeError, match=message):
        torch.histc(torch.tensor(values, device=device), 4, low, high)


ZERO_DIM_REDUCTIONS = {
    "mean": lambda x: x.mean(),
    "mean over dim -1": lambda x: x.mean(-1, keepdim=True),
    "amax": lambda x: x.amax(),
    "amin over dim 0": lambda x: x.amin(0),
    "argmax over dim 0": lambda x: x.argmax(0, keepdim=True),
    "argmin": lambda x: x.argmin(),
    "max over dim 0": lambda x: tuple(x.max(0)),
    "min over dim -1": lambda x: tuple(x.min(-1, keepdim=True)),
    "2-norm": lambda x: torch.linalg.vector_norm(x),
    "3-norm over dim 0": lambda x: torch.linalg.vector_norm(x, 3, dim=0),
    "inf-norm": lambda x: torch.linalg.vector_norm(x, float("inf")),
    "0-norm": lambda x: torch.linalg.vector_norm(x, 0),
    "-1-norm": lambda x: torch.linalg.vector_norm(x, -1),
    "all": lambda x: x.all(),
    "any over dim 0": lambda x: x.any(0),
    "all of a mask": lambda x: (x > 0).all(),
    "softmax": lambda x: x.softmax(0),
    "log_softmax": lambda x: x.log_softmax(-1),
}


@pytest.mark.parametrize("value", [2.5, -0.0, float("nan"), float("-inf"), 1e30])
@pytest.mark.parametrize("name", ZERO_DIM_REDUCTIONS)
def test_reductions_of_a_0_dim_tensor_run_natively(monkeypatch, name, value):
    """A 0-dim tensor is one element, which dimension 0 or -1 names: its reductions give the CPU's 0-dim results."""
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    reduce = ZERO_DIM_REDUCTIONS[name]
    expected = reduce(torch.tensor(value))
    actual = reduce(torch.tensor(value, device="npusim"))
    torch.testing.assert_close(
        tuple(a.cpu() for a in actual) if isinstance(actual, tuple) else actual.cpu(), expected, equal_nan=True
    )


def test_a_0_dim_tensor_has_no_dimension_1(monkeypatch):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    x = torch.tensor(1.0, device="npusim")
    for reduce in (lambda: x.mean(1), lambda: x.amax(1), lambda: x.argmax(1), lambda: x.softmax(1), lambda: x.any(2)):
        with pytest.raises(IndexError, match="Dimension out of range"):
            reduce()


@pytest.mark.parametrize("order", [0, -1, -2.5, 0.5])
def test_vector_norms_of_order_zero_and_below_one_run_natively(monkeypatch, order):
    monkeypatch.setenv("NPUSIM_FALLBACK", "error")
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(3))
    x[0, :5] = 0.0
    x[1, 0] = float("nan")
    for dim in (None, 1, (0, 1)):
        expected = torch.linalg.vector_norm(x, order, dim=dim)
        actual = torch.linalg.vector_norm(x.to("npusim"), order, dim=dim)
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, rtol=1e-5, atol=1e-6)


def test_norm_over_dimensions_dist_and_pairwise_distance(device):
    """torch.norm over named dimensions (norm.out) and what calls it: dist, pairwise_distance."""
    generator = torch.Generator().manual_seed(6)
    a, b = torch.randn(5, 6, 7, generator=generator), torch.randn(5, 6, 7, generator=generator)
    npusim._C.reset_fallback_counts()
    for p in (1, 2, 3.5, float("inf")):
        torch.testing.assert_close(torch.norm(a.to(device), p, dim=(0, 2)).cpu(), torch.norm(a, p, dim=(0, 2)))
        torch.testing.assert_close(torch.dist(a.to(device), b.to(device), p).cpu(), torch.dist(a, b, p))
    torch.testing.assert_close(
        torch.nn.functional.pairwise_distance(a[0].to(device), b[0].to(device)).cpu(),
        torch.nn.functional.pairwise_distance(a[0], b[0]),
    )
    assert npusim._C.fallback_counts() == {}


def test_spread_of_an_empty_tensor_is_nan(device):
    npusim._C.reset_fallback_counts()
    empty = torch.empty(0, 3)
    for function in (torch.var, torch.std):
        with pytest.warns(UserWarning, match="degrees of freedom"):
            assert function(empty.to(device)).cpu().isnan().item()
        assert function(empty.to(device), dim=1).shape == (0,)
        with pytest.warns(UserWarning):
            assert function(empty.to(device), dim=0).cpu().isnan().all() and function(empty, dim=0).isnan().all()
    spread, mean = torch.var_mean(empty.to(device), dim=0, keepdim=True)
    assert spread.shape == mean.shape == (1, 3) and mean.cpu().isnan().all()
    assert npusim._C.fallback_counts() == {}


def test_reductions_of_empty_tensors_run_natively(no_fallback):
    """Sums, norms and softmax over nothing, and the top element of one (found beyond OpInfo's first samples)."""
    empty = torch.zeros(0, 3)
    cases = [
        lambda x: x.sum(0),
        lambda x: x.sum((0, 1), keepdim=True),
        lambda x: torch.linalg.vector_norm(x, dim=0),
        lambda x: torch.linalg.vector_norm(x, 1.5),
        lambda x: torch.softmax(x, 1),
        lambda x: torch.log_softmax(x.view(3, 0), 0),
    ]
    for case in cases:
        expected = case(empty)
        actual = case(empty.to("npusim"))
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual.cpu(), expected)
    values, indices = torch.topk(torch.tensor(2.5).to("npusim"), 1)
    assert values.dim() == 0 and values.item() == 2.5 and indices.item() == 0


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int16])
def test_bincount_counts_natively_as_the_cpu_does(dtype, device, no_fallback):
    values = torch.randint(0, 12, (500,), generator=torch.Generator().manual_seed(3)).to(dtype)
    for minlength in (0, 5, 20):
        counts = torch.bincount(values.to(device), minlength=minlength)
        assert counts.dtype == torch.int64 and torch.equal(counts.cpu(), torch.bincount(values, minlength=minlength))
    assert torch.equal(torch.bincount(values[:0].to(device), minlength=3).cpu(), torch.zeros(3, dtype=torch.long))


def test_bincount_refuses_what_the_cpu_refuses(device):
    for bad in (torch.tensor([[1, 2]]), torch.tensor([3, -1])):
        with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
            torch.bincount(bad.to(device))
    with pytest.raises(RuntimeError, match="minlength should be >= 0"):
        torch.bincount(torch.tensor([1], device=device), minlength=-1)
    weights = torch.tensor([0.5, 2.0, 1.0])  # weighted counts (float64 sums) take the fallback, with the CPU's result
    index = torch.tensor([0, 2, 2])
    assert torch.equal(torch.bincount(index.to(device), weights.to(device)).cpu(), torch.bincount(index, weights))
