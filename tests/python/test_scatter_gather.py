"""torch.gather, scatter, scatter_add, index_put_ and advanced indexing with one index tensor on npusim against the
same ops on the CPU, bit for bit: the kernels move elements with indexed DMA, and scatter_add and accumulating
index_put_ add in the CPU's order (index order per output column), so even float sums agree exactly."""

import pytest
import torch

import npusim


def same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual.cpu(), expected)


def generator():
    return torch.Generator().manual_seed(0)


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_matches_cpu_along_every_dim(dtype, dim, device, no_fallback):
    x = (torch.randn(5, 7, 6, generator=generator()) * 20).to(dtype)
    shape = [4, 3, 5]  # smaller than x in the other dims, as gather allows
    shape[dim] = 9
    index = torch.randint(0, x.size(dim), shape, generator=generator())
    with npusim.profile() as report:
        result = torch.gather(x.to(device), dim, index.to(device))
    same(result, torch.gather(x, dim, index))
    assert [k.name.split("_")[0] for k in report.kernels if "gather" in k.name] == ["gather"]


def test_gather_takes_views_int32_indices_and_out(device, no_fallback):
    x = torch.randn(8, 6, generator=generator())
    index = torch.randint(0, 8, (6, 3), dtype=torch.int32, generator=generator())
    same(torch.gather(x.to(device).t(), 1, index.to(device)), torch.gather(x.t(), 1, index))
    out = torch.empty(6, 3).to(device)
    torch.gather(x.to(device).t(), 1, index.to(device), out=out)
    same(out, torch.gather(x.t(), 1, index))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_add_sums_repeated_indices_in_the_cpus_order(dtype, device, no_fallback):
    # Values of very different magnitudes, so a different summation order would give different bits.
    src = (torch.randn(40, 6, generator=generator()) * torch.logspace(-3, 5, 40)[:, None]).to(dtype)
    index = torch.randint(0, 5, (40, 6), generator=generator())
    base = torch.randn(5, 6, generator=generator()).to(dtype)
    same(base.to(device).scatter_add(0, index.to(device), src.to(device)), base.scatter_add(0, index, src))
    in_place = base.to(device)
    in_place.scatter_add_(0, index.to(device), src.to(device))
    same(in_place, base.scatter_add(0, index, src))


def test_scatter_writes_values_and_scalars_into_views(device, no_fallback):
    base = torch.zeros(6, 8)
    index = torch.tensor([[7, 0, 3], [1, 1, 6]])  # distinct per row: the result does not depend on order
    src = torch.arange(30.0).reshape(5, 6)  # larger than the index, as scatter allows
    same(base.to(device).scatter(1, index.to(device), src.to(device)), base.scatter(1, index, src))
    same(base.to(device).scatter(1, index.to(device), -2.5), base.scatter(1, index, -2.5))
    # In place into a transposed view: its storage changes as the CPU's does.
    expected, actual = base.clone(), base.to(device)
    expected.t().scatter_(0, index.t(), src[:3, :2])
    actual.t().scatter_(0, index.t().to(device), src[:3, :2].to(device))
    same(actual, expected)


def test_one_hot_by_scatter_matches_cpu(device, no_fallback):
    labels = torch.tensor([3, 0, 9, 3])
    expected = torch.zeros(4, 10).scatter_(1, labels[:, None], 1.0)
    actual = torch.zeros(4, 10, device=device).scatter_(1, labels[:, None].to(device), 1.0)
    same(actual, expected)


INDEXING = {
    "rows": (lambda t, i: t[i]),
    "middle dim": (lambda t, i: t[:, i]),
    "last dim by ellipsis": (lambda t, i: t[..., i]),
}


@pytest.mark.parametrize("name", INDEXING)
def test_advanced_indexing_with_one_tensor_matches_cpu(name, device, no_fallback):
    x = torch.randn(6, 5, 7, generator=generator())
    index = torch.tensor([[4, -1], [0, 4]])  # negative indices count from the end; a 2-D index keeps its shape
    index_on_cpu_too = torch.tensor([2, -5, 0])
    same(INDEXING[name](x.to(device), index.to(device)), INDEXING[name](x, index))
    same(INDEXING[name](x.to(device), index_on_cpu_too), INDEXING[name](x, index_on_cpu_too))


SEVERAL_INDICES = {
    "two leading dims": (lambda i, j: (i, j)),
    "after a slice": (lambda i, j: (slice(None), i, j)),
    "broadcast index shapes": (lambda i, j: (i[:, None], j)),
    "negative and int32": (lambda i, j: (-i - 1, j.int())),
    "three dims": (lambda i, j: (i, j, j)),
}


@pytest.mark.parametrize("name", SEVERAL_INDICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_several_index_tensors_read_and_write_natively(name, dtype, device, no_fallback):
    x = (torch.randn(6, 5, 5, generator=generator()) * 10).to(dtype)
    i, j = torch.tensor([0, 2, 4, 1]), torch.tensor([1, 4, 3, 0])
    key = SEVERAL_INDICES[name]
    on_device = tuple(k.to(device) if isinstance(k, torch.Tensor) else k for k in key(i, j))
    same(x.to(device)[on_device], x[key(i, j)])
    values = (torch.randn(x[key(i, j)].shape, generator=generator()) * 10).to(dtype)
    expected, actual = x.clone(), x.to(device)
    expected[key(i, j)] = values  # distinct positions: the order of writes does not matter
    actual[on_device] = values.to(device)
    same(actual, expected)
    repeated = (torch.tensor([0, 0, 2, 0]), torch.tensor([1, 1, 3, 1]))  # accumulate sums repeated positions
    added = (torch.randn(4, 5, generator=generator()) * 10).to(dtype)
    expected.index_put_(repeated, added, accumulate=True)
    actual.index_put_(tuple(r.to(device) for r in repeated), added.to(device), accumulate=True)
    same(actual, expected)


def test_several_index_tensors_out_of_range_are_index_errors(device):
    x = torch.zeros(3, 4).to(device)
    with pytest.raises(IndexError, match="index out of range"):
        x[torch.tensor([0, 1]).to(device), torch.tensor([4, 0]).to(device)]  # 4 would overflow into the next row
    with pytest.raises(IndexError, match="index out of range"):
        x[torch.tensor([3]).to(device), torch.tensor([0]).to(device)] = 1.0
    assert torch.equal(x.cpu(), torch.zeros(3, 4))


def test_index_put_matches_cpu(device, no_fallback):
    x = torch.randn(6, 5, 4, generator=generator())
    index = torch.tensor([0, -1, 3])
    values = torch.randn(6, 3, 4, generator=generator())
    expected, actual = x.clone(), x.to(device)
    expected[:, index] = values
    actual[:, index.to(device)] = values.to(device)
    same(actual, expected)
    expected[index] = 7.0  # a scalar broadcast over the indexed rows
    actual[index.to(device)] = 7.0
    same(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_accumulating_index_put_sums_repeated_indices_in_order(dtype, device, no_fallback):
    """The CPU rounds every sum to the element type here (unlike scatter_add), and so does the kernel."""
    x = torch.randn(6, 5, 4, generator=generator())
    index = torch.tensor([0, -1, 3, 0, 0, 4, 0])
    values = (torch.randn(6, 7, 4, generator=generator()) * torch.logspace(-3, 5, 7)[:, None]).to(dtype)
    x = (x * 100).to(dtype)
    expected, actual = x.clone(), x.to(device)
    torch.ops.aten.index_put_(expected, [None, index], values, True)  # x[:, index] with repeated indices summed
    torch.ops.aten.index_put_(actual, [None, index.to(device)], values.to(device), True)
    same(actual, expected)
    expected.index_put_((index[:5],), values[:5, :5], accumulate=True)
    actual.index_put_((index[:5].to(device),), values[:5, :5].to(device), accumulate=True)
    same(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1])
def test_index_add_matches_cpu(dtype, dim, device, no_fallback):
    x = (torch.randn(5, 6, generator=generator()) * 100).to(dtype)
    index = torch.tensor([4, 0, 4, 4, 2, 0, 4, 1])
    shape = [5, 6]
    shape[dim] = len(index)
    scale = torch.logspace(-3, 5, len(index)).reshape([-1, 1] if dim == 0 else [1, -1])
    source = (torch.randn(shape, generator=generator()) * scale).to(dtype)
    same(x.to(device).index_add(dim, index.to(device), source.to(device)), x.index_add(dim, index, source))
    # alpha scales the source first, a rounding the CPU's fused multiply-add does not have.
    scaled = x.to(device).index_add_(dim, index.to(device), source.to(device), alpha=3)
    torch.testing.assert_close(scaled.cpu(), x.index_add(dim, index, source, alpha=3))


def test_gradients_of_gather_and_indexing_are_native(device, no_fallback):
    """gather's gradient is a scatter_add and indexing's an accumulating index_put_: both native and exact."""
    x = torch.randn(4, 9, generator=generator(), requires_grad=True)
    x_device = x.detach().to(device).requires_grad_()
    targets = torch.tensor([[2, 2], [8, 0], [1, 1], [2, 5]])
    columns = torch.tensor([0, 3, 3, 3])
    for tensor, t, c in ((x, targets, columns), (x_device, targets.to(device), columns.to(device))):
        picked = tensor.log_softmax(-1).gather(1, t) * 1.5
        (picked.sum() + tensor[:, c].pow(2).sum()).backward()
    torch.testing.assert_close(x_device.grad.cpu(), x.grad, rtol=1e-6, atol=1e-6)


def test_an_index_outside_the_dimension_is_an_index_error_and_the_device_stays_usable(device):
    x = torch.zeros(3, 4).to(device)
    bad = torch.tensor([[0, 4]]).to(device)
    with pytest.raises(IndexError, match="index out of bounds in gather"):
        torch.gather(x, 1, bad)
    with pytest.raises(IndexError, match="index out of bounds in scatter_add"):
        x.scatter_add_(1, bad, torch.ones(1, 2).to(device))
    with pytest.raises(IndexError, match="index out of range in advanced indexing"):
        x[:, torch.tensor([-5]).to(device)]
    with pytest.raises(IndexError, match="index out of range in index_put_"):
        x[torch.tensor([3]).to(device)] = 1.0
    assert torch.equal(x.cpu(), torch.zeros(3, 4)), "a rejected scatter leaves the tensor as it was"
    same(torch.gather(x + 1, 1, torch.tensor([[3]]).to(device)), torch.ones(1, 1))


def test_boolean_masks_select_and_assign_natively(device, no_fallback):
    """x[mask], x[mask] = v, nonzero, masked_select and torch.where(mask) by stream compaction on the device."""
    x = torch.randn(4, 5, 3, generator=generator())
    leading, full = x[:, :, 0] > 0, x > 0.3
    x_device = x.to(device)
    same(x_device[leading.to(device)], x[leading])
    same(x_device[full.to(device)], x[full])
    same(x_device[leading], x[leading])  # a mask on the CPU works too
    same(torch.nonzero(full.to(device)), torch.nonzero(full))
    same(torch.masked_select(x_device, full.to(device)), torch.masked_select(x, full))
    for actual, expected in zip(torch.where(full.to(device)), torch.where(full), strict=True):
        same(actual, expected)
    same(torch.nonzero(torch.zeros(4, 0, dtype=torch.bool).to(device)), torch.zeros(0, 2, dtype=torch.long))
    numbers = torch.tensor([[0.0, -0.0, float("nan")], [2.5, 0.0, -1.0]])  # NaN is nonzero, -0.0 is not
    for values in (numbers, numbers.nan_to_num().to(torch.int64), numbers.nan_to_num().to(torch.int32)):
        same(torch.nonzero(values.to(device)), torch.nonzero(values))
    values = torch.randn(int(leading.sum()), 3, generator=generator())
    for assign in (
        lambda t, m, v: t.__setitem__(m, 0.5),
        lambda t, m, v: t.__setitem__(m, v),
        lambda t, m, v: t.index_put_((m,), v, accumulate=True),
    ):
        expected, actual = x.clone(), x.to(device)
        assign(expected, leading, values)
        assign(actual, leading.to(device), values.to(device))
        same(actual, expected)
