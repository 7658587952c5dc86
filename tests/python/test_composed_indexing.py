"""Indexed writes composed from native index_put / index_add (composed_indexing_ops.cpp), against the CPU with no CPU
fallback, in float32 and complex64: index_copy, put_, Tensor.unfold's gradient (overlapping and gapped windows) and
F.fold (so F.unfold's gradient) with dilation, padding and stride; and their argument errors raised as on the CPU."""

import pytest
import torch
import torch.nn.functional as F

DTYPES = [torch.float32, torch.complex64]


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def assert_matches(actual, expected):
    assert actual.device.type == "npusim" and actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_copy_in_every_variant(no_fallback, dtype):
    values, source = randn(5, 4, dtype=dtype), randn(5, 2, dtype=dtype, seed=1)
    index = torch.tensor([3, 0])
    device, device_source, device_index = values.to("npusim"), source.to("npusim"), index.to("npusim")
    assert_matches(device.index_copy(1, device_index, device_source), values.index_copy(1, index, source))
    in_place = device.clone()
    assert in_place.index_copy_(-1, device_index, device_source) is in_place
    assert_matches(in_place, values.index_copy(1, index, source))
    out = torch.empty(0, dtype=dtype, device="npusim")
    assert torch.index_copy(device, 1, device_index, device_source, out=out) is out
    assert_matches(out, values.index_copy(1, index, source))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("accumulate", [False, True])
def test_put_with_negative_indices_and_strided_targets(no_fallback, dtype, accumulate):
    values, source = randn(3, 4, dtype=dtype), randn(5, dtype=dtype, seed=1)
    index = torch.tensor([0, -1, 5, 7, 11])
    expected = values.clone().put_(index, source, accumulate=accumulate)
    assert_matches(values.to("npusim").put_(index.to("npusim"), source.to("npusim"), accumulate), expected)
    transposed = values.to("npusim").t()  # flat indices count in the view's own row-major order
    expected = values.t().clone().put_(index, source, accumulate=accumulate)
    assert_matches(transposed.put_(index.to("npusim"), source.to("npusim"), accumulate), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("size, step", [(3, 2), (2, 3), (4, 1)], ids=["overlapping", "gapped", "sliding"])
def test_unfold_gradient(no_fallback, dtype, size, step):
    values = randn(2, 3, 11, dtype=dtype)
    on_cpu, on_device = values.clone().requires_grad_(), values.to("npusim").requires_grad_()
    weights = randn(*on_cpu.unfold(2, size, step).shape, dtype=dtype, seed=1)
    (on_cpu.unfold(2, size, step) * weights).abs().sum().backward()
    (on_device.unfold(2, size, step) * weights.to("npusim")).abs().sum().backward()
    assert_matches(on_device.grad, on_cpu.grad)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fold_and_unfolds_gradient(no_fallback, dtype):
    settings = {"kernel_size": (3, 2), "dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)}
    image = randn(2, 3, 9, 8, dtype=dtype)
    columns = F.unfold(image, **settings)
    assert_matches(F.fold(columns.to("npusim"), (9, 8), **settings), F.fold(columns, (9, 8), **settings))
    assert_matches(F.fold(columns[0].to("npusim"), (9, 8), **settings), F.fold(columns[0], (9, 8), **settings))
    on_cpu, on_device = image.clone().requires_grad_(), image.to("npusim").requires_grad_()
    weights = randn(*columns.shape, dtype=dtype, seed=1)
    (F.unfold(on_cpu, **settings) * weights).abs().sum().backward()
    (F.unfold(on_device, **settings) * weights.to("npusim")).abs().sum().backward()
    assert_matches(on_device.grad, on_cpu.grad)


def test_argument_errors_as_on_the_cpu():
    values, source = randn(5, 4), randn(5, 3)
    index = torch.tensor([3, 0])
    with pytest.raises(IndexError, match="Number of indices"):
        values.index_copy(1, index, source)  # three source columns for two indices
    with pytest.raises(IndexError, match="Number of indices"):
        values.to("npusim").index_copy(1, index.to("npusim"), source.to("npusim"))
    with pytest.raises(IndexError):
        values.clone().put_(torch.tensor([20]), torch.ones(1))
    with pytest.raises(IndexError):
        values.to("npusim").put_(torch.tensor([20], device="npusim"), torch.ones(1, device="npusim"))


def test_empty_batches(no_fallback):
    columns = torch.zeros(0, 6, 3)
    assert_matches(F.fold(columns.to("npusim"), (3, 4), (3, 2)), F.fold(columns, (3, 4), (3, 2)))
    empty = torch.zeros(0, 3, 10, device="npusim", requires_grad=True)
    empty.unfold(2, 3, 2).sum().backward()
    assert empty.grad.shape == (0, 3, 10)
