"""Operators composed from native kernels on the device (composed_tensor_ops.cpp, regression_losses.cpp) against the
CPU, without fallback: trace, count_nonzero, aminmax, addbmm, take, glu (and its gradient), cross, isin, bucketize,
searchsorted, the Huber and smooth L1 losses with their gradients, eye, any and all of empty masks, the gradients of
cdist, pdist and segment_reduce, nonzero_static, and 0-dim and empty cases of prod, index_copy and unfold."""

import pytest
import torch
import torch.nn.functional as F


def random(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_trace_count_nonzero_and_aminmax(device, no_fallback):
    x = random(5, 7, seed=1)
    x[x.abs() < 0.5] = 0
    integers = torch.arange(-6, 6, dtype=torch.int32).view(3, 4)
    torch.testing.assert_close(torch.trace(x.to(device)).cpu(), torch.trace(x))
    assert torch.equal(torch.trace(integers.to(device)).cpu(), torch.trace(integers))
    for dims in ((), 0, (0, 1)):
        assert torch.equal(torch.count_nonzero(x.to(device), dims).cpu(), torch.count_nonzero(x, dims))
    for kwargs in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        low, high = torch.aminmax(x.to(device), **kwargs)
        expected_low, expected_high = torch.aminmax(x, **kwargs)
        assert torch.equal(low.cpu(), expected_low) and torch.equal(high.cpu(), expected_high)


@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2), (0, 1)])
def test_addbmm_is_one_product_over_the_batch(beta, alpha, device, no_fallback):
    base, b1, b2 = random(4, 6, seed=2), random(3, 4, 5, seed=3), random(3, 5, 6, seed=4)
    if beta == 0:
        base[0, 0] = float("nan")  # ignored, as on the CPU
    expected = torch.addbmm(base, b1, b2, beta=beta, alpha=alpha)
    torch.testing.assert_close(
        torch.addbmm(base.to(device), b1.to(device), b2.to(device), beta=beta, alpha=alpha).cpu(), expected
    )
    in_place = base.to(device)
    in_place.addbmm_(b1.to(device), b2.to(device), beta=beta, alpha=alpha)
    torch.testing.assert_close(in_place.cpu(), expected)


def test_take_wraps_negative_indices_and_rejects_out_of_range(device, no_fallback):
    x = random(3, 4, seed=5)
    index = torch.tensor([[0, -1], [5, -12]])
    assert torch.equal(torch.take(x.to(device), index.to(device)).cpu(), torch.take(x, index))
    with pytest.raises(IndexError):
        torch.take(x.to(device), torch.tensor([12]).to(device))


@pytest.mark.parametrize("dim", [0, -1])
def test_glu_and_its_gradient(dim, device, no_fallback):
    x = random(6, 8, seed=6)
    on_cpu, on_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    out, expected = F.glu(on_device, dim), F.glu(on_cpu, dim)
    grad = random(*expected.shape, seed=7)
    out.backward(grad.to(device))
    expected.backward(grad)
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)


def test_cross_broadcasts_along_any_dimension(device, no_fallback):
    a, b = random(4, 3, 5, seed=8), random(1, 3, 5, seed=9)
    torch.testing.assert_close(
        torch.linalg.cross(a.to(device), b.to(device), dim=1).cpu(), torch.linalg.cross(a, b, dim=1)
    )
    c, d = random(7, 3, seed=10), random(7, 3, seed=11)
    torch.testing.assert_close(torch.cross(c.to(device), d.to(device), dim=-1).cpu(), torch.cross(c, d, dim=-1))


def test_isin(device, no_fallback):
    elements = torch.tensor([[1, 5, 2], [7, 2, 0]])
    tests = torch.tensor([2, 7, 9])
    for invert in (False, True):
        expected = torch.isin(elements, tests, invert=invert)
        assert torch.equal(torch.isin(elements.to(device), tests.to(device), invert=invert).cpu(), expected)
    floats = torch.tensor([0.5, float("nan"), -1.0])
    assert torch.equal(
        torch.isin(floats.to(device), torch.tensor([float("nan"), -1.0]).to(device)).cpu(),
        torch.isin(floats, torch.tensor([float("nan"), -1.0])),
    )


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_and_searchsorted_give_the_binary_searchs_index(right, device, no_fallback):
    boundaries = torch.tensor([-1.0, 0.0, 0.0, 2.5, 4.0])
    values = torch.tensor([[-2.0, -1.0, 0.0, 1.0], [2.5, 4.0, 9.0, float("nan")]])
    for out_int32 in (False, True):
        expected = torch.bucketize(values, boundaries, right=right, out_int32=out_int32)
        result = torch.bucketize(values.to(device), boundaries.to(device), right=right, out_int32=out_int32)
        assert result.dtype == expected.dtype and torch.equal(result.cpu(), expected)
    rows = torch.sort(random(2, 6, seed=12), dim=-1).values
    queries = random(2, 4, seed=13)
    for side in ("left", "right"):
        assert torch.equal(
            torch.searchsorted(rows.to(device), queries.to(device), side=side).cpu(),
            torch.searchsorted(rows, queries, side=side),
        )
    shuffled = torch.tensor([[3.0, 1.0, 2.0]])
    sorter = torch.argsort(shuffled)
    assert torch.equal(
        torch.searchsorted(shuffled.to(device), torch.tensor([[1.5, 3.5]]).to(device), sorter=sorter.to(device)).cpu(),
        torch.searchsorted(shuffled, torch.tensor([[1.5, 3.5]]), sorter=sorter),
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "loss, parameter",
    [(F.huber_loss, {"delta": 0.7}), (F.smooth_l1_loss, {"beta": 0.7}), (F.smooth_l1_loss, {"beta": 0.0})],
    ids=["huber", "smooth_l1", "smooth_l1 beta 0"],
)
def test_regression_losses_and_their_gradients(loss, parameter, reduction, device, no_fallback):
    x, target = random(5, 9, seed=14), random(5, 9, seed=15)
    x[0, :3] = target[0, :3] + torch.tensor([0.7, -0.7, 0.0])  # the branches' boundaries
    on_cpu, on_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    out = loss(on_device, target.to(device), reduction=reduction, **parameter)
    expected = loss(on_cpu, target, reduction=reduction, **parameter)
    grad = torch.linspace(0.5, 1.5, expected.numel()).view(expected.shape)
    out.backward(grad.to(device))
    expected.backward(grad)
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_and_its_gradient(reduction, weighted, device, no_fallback):
    x = torch.sigmoid(random(4, 6, seed=16))
    x[0, :2] = torch.tensor([0.0, 1.0])  # the logs' clamp at -100
    target = torch.rand(4, 6, generator=torch.Generator().manual_seed(17))
    weight = torch.rand(6, generator=torch.Generator().manual_seed(18)) if weighted else None
    on_cpu, on_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    out = F.binary_cross_entropy(
        on_device, target.to(device), weight=None if weight is None else weight.to(device), reduction=reduction
    )
    expected = F.binary_cross_entropy(on_cpu, target, weight=weight, reduction=reduction)
    grad = torch.linspace(0.5, 1.5, expected.numel()).view(expected.shape)
    out.backward(grad.to(device))
    expected.backward(grad)
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([1.5]).to(device), torch.tensor([1.0]).to(device))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_and_logcumsumexp_scan_like_the_cpu(dim, device, no_fallback):
    x = torch.randint(-3, 4, (5, 37), generator=torch.Generator().manual_seed(19)).float()  # ties
    x[1, 7] = x[3, 20] = x[3, 30] = float("nan")
    for function in (torch.cummax, torch.cummin):
        values, indices = function(x.to(device), dim)
        expected_values, expected_indices = function(x, dim)
        torch.testing.assert_close(values.cpu(), expected_values, equal_nan=True)
        assert torch.equal(indices.cpu(), expected_indices)
    integers = torch.randint(-5, 5, (4, 9), generator=torch.Generator().manual_seed(20))
    assert torch.equal(torch.cummax(integers.to(device), dim).indices.cpu(), torch.cummax(integers, dim).indices)
    y = random(5, 37, seed=21) * 20
    y[2, 3] = float("-inf")
    torch.testing.assert_close(torch.logcumsumexp(y.to(device), dim).cpu(), torch.logcumsumexp(y, dim))


def test_prelu_and_its_gradients(device, no_fallback):
    module = torch.nn.PReLU(4)
    with torch.no_grad():
        module.weight.copy_(torch.tensor([0.1, -0.2, 0.3, 2.0]))
    x = random(2, 4, 5, seed=22)
    on_cpu, on_device = x.clone().requires_grad_(), x.to(device).requires_grad_()
    device_module = torch.nn.PReLU(4).to(device)
    with torch.no_grad():
        device_module.weight.copy_(module.weight)
    device_module(on_device).sum().backward()
    module(on_cpu).sum().backward()
    torch.testing.assert_close(on_device.grad.cpu(), on_cpu.grad)
    torch.testing.assert_close(device_module.weight.grad.cpu(), module.weight.grad)


def test_selections(device, no_fallback):
    x = random(2, 6, 3, seed=23)
    assert torch.equal(F.channel_shuffle(x.to(device), 3).cpu(), F.channel_shuffle(x, 3))
    mask = x[0, :, 0] > 0
    column = mask.view(6, 1)
    assert torch.equal(torch.masked_select(x.to(device), column.to(device)).cpu(), torch.masked_select(x, column))
    repeats = torch.tensor([2, 0, 3, 1])
    assert torch.equal(torch.repeat_interleave(repeats.to(device)).cpu(), torch.repeat_interleave(repeats))
    assert torch.equal(
        torch.repeat_interleave(x.to(device), repeats[:2].to(device), dim=2 - 2).cpu(),
        torch.repeat_interleave(x, repeats[:2], dim=0),
    )
    index = torch.tensor([0, -1, 2])
    expected = x.clone().index_fill_(1, index, -7.0)
    assert torch.equal(x.to(device).index_fill_(1, index.to(device), -7.0).cpu(), expected)
    assert torch.equal(x.to(device).index_fill(1, index.to(device), torch.tensor(-7.0)).cpu(), expected)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist_pdist_and_renorm(p, device, no_fallback):
    a, b = random(3, 7, 4, seed=24), random(3, 5, 4, seed=25)
    torch.testing.assert_close(torch.cdist(a.to(device), b.to(device), p).cpu(), torch.cdist(a, b, p))
    many = random(30, 4, seed=26)  # over 25 rows: the CPU's product form for p = 2
    torch.testing.assert_close(torch.cdist(many.to(device), b[0].to(device), p).cpu(), torch.cdist(many, b[0], p))
    torch.testing.assert_close(F.pdist(a[0].to(device), p).cpu(), F.pdist(a[0], p))
    if p > 0:
        torch.testing.assert_close(torch.renorm(a.to(device), p, 1, 1.5).cpu(), torch.renorm(a, p, 1, 1.5))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_and_pdist_gradients_at_every_order(p, device, no_fallback):
    a, b = random(2, 6, 3, seed=30), random(1, 5, 3, seed=31)  # b's batch broadcast: its gradient summed back
    a[0, 1] = b[0, 2]  # a pair at distance 0: a zero gradient, not NaN
    a[1, 0, 1] = b[0, 0, 1]  # a zero difference (no gradient below p = 1)
    weights = random(2, 6, 5, seed=32)
    on_cpu, on_device = [a.requires_grad_(), b.requires_grad_()], [a.detach().to(device), b.detach().to(device)]
    on_device = [t.requires_grad_() for t in on_device]
    mode = "donot_use_mm_for_euclid_dist"  # the pairwise form whose gradient is _cdist_backward
    expected = torch.autograd.grad(torch.cdist(*on_cpu, p, compute_mode=mode), on_cpu, weights)
    actual = torch.autograd.grad(torch.cdist(*on_device, p, compute_mode=mode), on_device, weights.to(device))
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got.cpu(), want)
    rows = random(6, 3, seed=33)
    rows[4] = rows[1]
    pair_weights = random(15, seed=34)
    expected = torch.autograd.grad(F.pdist(rows.requires_grad_(), p), rows, pair_weights)[0]
    on_device = rows.detach().to(device).requires_grad_()
    actual = torch.autograd.grad(F.pdist(on_device, p), on_device, pair_weights.to(device))[0]
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce_gradients(reduce, initial, device, no_fallback):
    data = torch.tensor([[1.0, 3.0, 3.0, -2.0, 0.0, 5.0, 0.0, 4.0], [2.0, -1.0, 0.0, 7.0, 7.0, -3.0, 1.0, 6.0]])
    lengths = torch.tensor([[2, 3, 0, 3], [1, 2, 4, 1]])  # ties for max, zeros for prod, an empty segment
    offsets = torch.cat([torch.zeros(2, 1, dtype=torch.long), lengths.cumsum(1)], 1)
    weights = torch.tensor([[1.0, -2.0, 0.5, 3.0], [-1.0, 2.0, 4.0, -0.5]])
    for bounds in ({"lengths": lengths}, {"offsets": offsets}):
        x = data.clone().requires_grad_()
        result = torch.segment_reduce(x, reduce, axis=1, initial=initial, **bounds)
        (expected,) = torch.autograd.grad(result, x, weights)
        on_device = data.to(device).requires_grad_()
        moved = {k: v.to(device) for k, v in bounds.items()}
        result = torch.segment_reduce(on_device, reduce, axis=1, initial=initial, **moved)
        actual = torch.autograd.grad(result, on_device, weights.to(device))[0]
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)


def test_nonzero_static_and_reductions_of_one_element(device, no_fallback):
    mask = torch.tensor([[0, 1, 0], [2, 0, 3]])
    for size, fill in ((5, -1), (2, 0), (0, 7)):
        expected = torch.nonzero_static(mask, size=size, fill_value=fill)
        assert torch.equal(torch.nonzero_static(mask.to(device), size=size, fill_value=fill).cpu(), expected)
    scalar, empty = torch.tensor(2.5), torch.empty(0, 3)
    assert torch.equal(torch.prod(scalar.to(device), 0).cpu(), torch.prod(scalar, 0))
    assert torch.equal(torch.prod(empty.to(device), 0, keepdim=True).cpu(), torch.prod(empty, 0, keepdim=True))
    index, source = torch.tensor([0]), torch.tensor(7.0)
    expected = torch.index_copy(scalar, 0, index, source)
    assert torch.equal(torch.index_copy(scalar.to(device), 0, index.to(device), source.to(device)).cpu(), expected)
    x = scalar.to(device).requires_grad_()  # Tensor.unfold of a 0-dim tensor and its gradient
    (gradient,) = torch.autograd.grad(x.unfold(0, 1, 1).sum() * 3, x)
    assert gradient.item() == 3.0


def test_order_statistics_with_nan_and_ties(device, no_fallback):
    x = torch.randint(-4, 5, (6, 9), generator=torch.Generator().manual_seed(27)).float()
    with_nan = x.clone()
    with_nan[2, 4] = with_nan[2, 7] = with_nan[5, 0] = float("nan")
    for data in (x, with_nan):
        for function in (torch.median, torch.nanmedian):
            torch.testing.assert_close(function(data.to(device)).cpu(), function(data), equal_nan=True)
            for dim, keepdim in ((1, False), (0, True)):
                values, indices = function(data.to(device), dim, keepdim)
                expected_values, expected_indices = function(data, dim, keepdim)
                torch.testing.assert_close(values.cpu(), expected_values, equal_nan=True)
                # ties: any index holding the value is the CPU's answer too
                picked = torch.gather(data, dim, indices.cpu() if keepdim else indices.cpu().unsqueeze(dim))
                torch.testing.assert_close(
                    picked.squeeze(dim) if not keepdim else picked, expected_values, equal_nan=True
                )
    distinct = random(5, 8, seed=28)
    values, indices = torch.kthvalue(distinct.to(device), 3, 1)
    expected_values, expected_indices = torch.kthvalue(distinct, 3, 1)
    assert torch.equal(values.cpu(), expected_values) and torch.equal(indices.cpu(), expected_indices)


def test_scatters_unpooling_and_unfold(device, no_fallback):
    x = random(2, 3, 4, 5, seed=29)
    mask = random(3, 1, 5, seed=30) > 0
    source = random(200, seed=31)
    expected = x.clone().masked_scatter_(mask, source)
    assert torch.equal(x.to(device).masked_scatter_(mask.to(device), source.to(device)).cpu(), expected)
    pooled, indices = F.max_pool2d(x, 2, return_indices=True)
    assert torch.equal(
        F.max_unpool2d(pooled.to(device), indices.to(device), 2, output_size=(4, 5)).cpu(),
        F.max_unpool2d(pooled, indices, 2, output_size=(4, 5)),
    )
    for options in ({"kernel_size": 2}, {"kernel_size": (2, 3), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}):
        assert torch.equal(F.unfold(x.to(device), **options).cpu(), F.unfold(x, **options))


def test_angle_ldexp_and_a_number_to_a_tensor_power(device, no_fallback):
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, float("nan"), float("-inf")])
    torch.testing.assert_close(torch.angle(x.to(device)).cpu(), torch.angle(x), equal_nan=True)
    mantissas, exponents = random(12, seed=32), torch.arange(-6, 6)
    assert torch.equal(torch.ldexp(mantissas.to(device), exponents.to(device)).cpu(), torch.ldexp(mantissas, exponents))
    powers = torch.tensor([-3.0, -2.0, -0.5, 0.0, 0.5, 2.0, 3.0, 31.5, float("nan"), float("inf")])
    for base in (2.0, 10.0, 0.5, 1.0, 0.0, -2.0):
        # other bases than powers of 2 round x log2(base) first: |x log2(base)| ulps, 105 at 10^31.5
        tolerance = {"rtol": 5e-6, "atol": 0} if base == 10.0 else {}
        result = torch.pow(base, powers.to(device)).cpu()
        torch.testing.assert_close(result, torch.pow(base, powers), equal_nan=True, **tolerance)


def test_batch_norm_with_update_matches_native_batch_norm(device, no_fallback):
    x = random(4, 3, 5, seed=33)
    stats = [torch.zeros(3), torch.ones(3)]
    device_stats = [s.to(device) for s in stats]
    out, mean, invstd, reserve = torch.ops.aten._batch_norm_with_update(
        x.to(device), None, None, *device_stats, 0.1, 1e-5
    )
    expected = torch.ops.aten._batch_norm_with_update(x, None, None, *stats, 0.1, 1e-5)
    for got, want in zip((out, mean, invstd, *device_stats), (*expected[:3], *stats), strict=True):
        torch.testing.assert_close(got.cpu(), want)
    assert reserve.numel() == 0


def test_batch_norm_with_update_trains_through_its_own_backward(device, no_fallback):
    x, weight, bias = random(4, 3, 5, seed=35), random(3, seed=36), random(3, seed=37)

    def gradients(on):
        leaves = [t.to(on).requires_grad_() for t in (x, weight, bias)]
        statistics = [torch.zeros(3, device=on), torch.ones(3, device=on)]
        out = torch.ops.aten._batch_norm_with_update(*leaves, *statistics, 0.1, 1e-5)[0]
        (out * out.detach().sin()).sum().backward()  # batch_norm_backward, with update=True
        return [t.grad.cpu() for t in leaves]

    for got, want in zip(gradients(device), gradients("cpu"), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_random_draws_of_integers_categories_and_slopes(device, no_fallback):
    torch.manual_seed(4)
    whole = torch.empty(20_000, device=device).random_(-3, 5).cpu()
    assert whole.min() == -3 and whole.max() == 4 and torch.equal(whole, whole.round())
    probabilities = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 1.0, 1.0]])
    drawn = torch.multinomial(probabilities.to(device), 20_000, replacement=True).cpu()
    counts = torch.stack([torch.bincount(row, minlength=4) for row in drawn]).float() / 20_000
    torch.testing.assert_close(counts, probabilities / probabilities.sum(1, keepdim=True), atol=0.02, rtol=0)
    without = torch.multinomial(probabilities.to(device), 3).cpu()
    assert all(len(set(row.tolist())) == 3 and 1 not in row.tolist() for row in without[:1])
    x = random(1000, seed=34)
    noise = torch.empty(1000, device=device)
    out = torch.ops.aten.rrelu_with_noise(x.to(device), noise, 0.1, 0.3, True).cpu()
    slopes = (out / x)[x < 0]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and torch.equal(out[x >= 0], x[x >= 0])
    torch.testing.assert_close(F.rrelu(x.to(device), 0.1, 0.3).cpu(), F.rrelu(x, 0.1, 0.3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int8, torch.bool, torch.float64])
def test_eye_in_every_dtype(device, no_fallback, dtype):
    for shape in ((3,), (2, 5), (4, 1), (0, 3)):
        assert torch.equal(torch.eye(*shape, device=device, dtype=dtype).cpu(), torch.eye(*shape, dtype=dtype))
    out = torch.empty(0, device=device, dtype=dtype)
    assert torch.eye(2, 3, out=out) is out and torch.equal(out.cpu(), torch.eye(2, 3, dtype=dtype))
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0, got -1"):
        torch.eye(-1, device=device)


def test_any_and_all_of_nothing(device, no_fallback):
    for shape in ((0,), (0, 3), (2, 0)):
        mask = torch.ones(shape, dtype=torch.bool)
        for reduce in (torch.any, torch.all):
            assert torch.equal(reduce(mask.to(device)).cpu(), reduce(mask))
            for dim in range(len(shape)):
                for keepdim in (False, True):
                    assert torch.equal(reduce(mask.to(device), dim, keepdim).cpu(), reduce(mask, dim, keepdim))
    assert torch.equal(torch.empty(0, device=device), torch.empty(0, device=device))
