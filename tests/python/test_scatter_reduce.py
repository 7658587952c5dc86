"""scatter_reduce and index_reduce on npusim against the same ops on the CPU: every reduction (sum, prod, mean,
amax, amin), with and without self's values, with repeated indices, over float, half-precision and integer types,
and NaN propagation; no CPU fallback. Each destination combines its values in the index's order, as the CPU does,
so the results agree bit for bit."""

import pytest
import torch

import npusim


def same(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def generator():
    return torch.Generator().manual_seed(0)


def values(shape, dtype):
    x = torch.randn(*shape, generator=generator())
    if dtype.is_floating_point:
        return (x * 4).to(dtype)
    return (x * 3).round().to(dtype)  # small integers, so products stay far from overflow in the checks that matter


REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_reduce_matches_cpu(dtype, reduce, include_self, device, no_fallback):
    # Five destination rows, 30 source rows: every index repeats, and row 4 gets nothing in some columns.
    base = values((5, 6), dtype)
    src = values((30, 6), dtype) if reduce != "prod" else values((30, 6), dtype).clamp(-2, 2)
    index = torch.randint(0, 4, (30, 6), generator=generator())
    expected = base.scatter_reduce(0, index, src, reduce, include_self=include_self)
    with npusim.profile() as report:
        result = base.to(device).scatter_reduce(0, index.to(device), src.to(device), reduce, include_self=include_self)
    same(result, expected)
    assert any("scatter" in k.name for k in report.kernels)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_in_place_out_and_other_dims(reduce, device, no_fallback):
    base = values((4, 7, 5), torch.float32)
    src = values((4, 9, 5), torch.float32)
    index = torch.randint(0, 7, (3, 9, 4), generator=generator())  # smaller than src: its leading part is read
    expected = base.scatter_reduce(1, index, src, reduce, include_self=False)
    in_place = base.to(device)
    returned = in_place.scatter_reduce_(1, index.to(device), src.to(device), reduce, include_self=False)
    assert returned is in_place
    same(in_place, expected)
    out = torch.empty(0).to(device)
    torch.scatter_reduce(base.to(device), -2, index.to(device), src.to(device), reduce, include_self=False, out=out)
    same(out, expected)
    transposed, src_t = base.transpose(0, 2), src.transpose(0, 2)  # strided operands, [5, 7, 4] and [5, 9, 4]
    index = torch.randint(0, 5, (4, 6, 3), generator=generator())
    same(
        transposed.to(device).scatter_reduce(0, index.to(device), src_t.to(device), reduce),
        transposed.scatter_reduce(0, index, src_t, reduce),
    )


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_a_nan_wins_amax_and_amin_as_on_the_cpu(reduce, device, no_fallback):
    base = torch.tensor([1.0, float("nan"), 3.0, 4.0])
    src = torch.tensor([5.0, 0.0, float("nan"), -1.0, 2.0])
    index = torch.tensor([0, 1, 2, 2, 3])
    for include_self in (True, False):
        same(
            base.to(device).scatter_reduce(0, index.to(device), src.to(device), reduce, include_self=include_self),
            base.scatter_reduce(0, index, src, reduce, include_self=include_self),
        )


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_matches_cpu(dim, dtype, reduce, include_self, device, no_fallback):
    base = values((5, 6, 4), dtype)
    shape = [5, 6, 4]
    shape[dim] = 11
    source = values(shape, dtype).clamp(-2, 2)
    index = torch.randint(0, base.size(dim) - 1, (11,), generator=generator())  # the last slice gets nothing
    expected = base.index_reduce(dim, index, source, reduce, include_self=include_self)
    same(
        base.to(device).index_reduce(dim, index.to(device), source.to(device), reduce, include_self=include_self),
        expected,
    )
    in_place = base.to(device)
    in_place.index_reduce_(dim, index.int().to(device), source.to(device), reduce, include_self=include_self)
    same(in_place, expected)


def test_errors_are_pytorchs_and_the_device_stays_usable(device):
    base, src = torch.zeros(3, 4), torch.ones(3, 4)
    index = torch.tensor([[0, 1, 2, 3]] * 3)
    with pytest.raises(IndexError):
        base.to(device).scatter_reduce(0, index.to(device), src.to(device), "amax")
    with pytest.raises(RuntimeError, match="reduce argument must be either"):
        base.to(device).scatter_reduce(0, index.clamp(max=2).to(device), src.to(device), "add")
    with pytest.raises(IndexError):
        base.to(device).index_reduce(0, torch.tensor([0, 3, 1]).to(device), src.to(device), "prod")
    with pytest.raises(RuntimeError, match="Expected reduce to be one of prod, mean, amax or amin"):
        base.to(device).index_reduce(0, torch.tensor([0, 2, 1]).to(device), src.to(device), "sum")
    index = index.clamp(max=2)
    for reduce in ("sum", "max", "min"):  # the CPU takes max and min for amax and amin too
        same(
            base.to(device).scatter_reduce(0, index.to(device), src.to(device), reduce),
            base.scatter_reduce(0, index, src, reduce),
        )


def test_graph_style_max_aggregation_trains(device, no_fallback):
    # A message-passing step as graph networks write it: each node takes the max (and the mean) of its neighbours'
    # messages; the gradient flows back through scatter_reduce's backward (gather and comparisons) on the device.
    edges = torch.randint(0, 12, (2, 60), generator=generator())
    features = torch.randn(12, 8, generator=generator())

    def aggregate(x):
        messages = x[edges[0]]
        index = edges[1][:, None].expand(-1, x.size(1))
        pooled = torch.zeros_like(x).scatter_reduce(0, index, messages, "amax", include_self=False)
        mean = torch.zeros_like(x).scatter_reduce(0, index, messages, "mean", include_self=False)
        return (pooled * mean).sum()

    cpu = features.clone().requires_grad_()
    aggregate(cpu).backward()
    on_device = features.to(device).requires_grad_()
    edges = edges.to(device)
    aggregate(on_device).backward()
    torch.testing.assert_close(on_device.grad.cpu(), cpu.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_scatter_with_add_or_multiply_matches_cpu(reduce, dtype, device, no_fallback):
    base = values((5, 6), dtype)
    src = values((30, 6), dtype).clamp(-2, 2)
    index = torch.randint(0, 5, (30, 6), generator=generator())
    same(
        base.to(device).scatter(0, index.to(device), src.to(device), reduce=reduce),
        base.scatter(0, index, src, reduce=reduce),
    )
    in_place = base.to(device)
    in_place.scatter_(0, index.to(device), 3, reduce=reduce)
    same(in_place, base.clone().scatter_(0, index, 3, reduce=reduce))
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        base.to(device).scatter(0, index.to(device), src.to(device), reduce="max")


def test_empty_and_scalar_operands_stay_on_the_device(device, no_fallback):
    # PyTorch checks neither the type nor the shape of an empty index; scalars are tensors of one element.
    x = torch.randn(5, generator=generator())
    empty = torch.empty(2, 0, dtype=torch.uint8)
    same(torch.gather(x.to(device), 0, empty.to(device)), torch.gather(x, 0, empty))
    scalar, index = torch.tensor(2.5), torch.tensor(0)
    for reduce in REDUCTIONS:
        same(
            scalar.to(device).scatter_reduce(
                0, index.to(device), torch.tensor(-1.5).to(device), reduce, include_self=False
            ),
            scalar.scatter_reduce(0, index, torch.tensor(-1.5), reduce, include_self=False),
        )
    same(torch.gather(scalar.to(device), 0, index.to(device)), torch.gather(scalar, 0, index))
    same(scalar.to(device).scatter(0, index.to(device), 7.0), scalar.scatter(0, index, 7.0))
