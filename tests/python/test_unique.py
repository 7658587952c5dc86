"""torch.unique, torch._unique and torch.unique_consecutive on npusim (unique_ops.cpp: a stable sort, then runs of
equal neighbours) against the CPU, without fallback: values, inverse indices and counts, every combination of the
flags, NaN (each its own group, as on the CPU), signed zeros, empty and 0-dim tensors, every dtype npusim sorts, and
unique slices along a dimension (lexicographic sorts of the slices); what is not native falls back correctly."""

import pytest
import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
          torch.bool]  # fmt: skip


def values_with_repeats(dtype, shape=(6, 7), seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point:
        x = torch.randint(-4, 5, shape, generator=generator).to(dtype) / 2
        x.view(-1)[1::7] = -0.0
        return x
    low = 0 if dtype == torch.uint8 else -5
    return torch.randint(low, low + 9, shape, generator=generator, dtype=dtype)


def assert_same(actual, expected):
    """Equal results, one tensor or a tuple of them, on npusim and on the CPU."""
    actual, expected = (r if isinstance(r, tuple) else (r,) for r in (actual, expected))
    for got, want in zip(actual, expected, strict=True):
        assert got.device.type == "npusim"
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, rtol=0, atol=0)
        assert got.dtype == want.dtype and got.shape == want.shape


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("return_inverse", [False, True])
@pytest.mark.parametrize("return_counts", [False, True])
def test_unique_matches_the_cpu(device, no_fallback, dtype, return_inverse, return_counts):
    x = values_with_repeats(dtype)
    for sorted_ in (True, False):  # the CPU sorts either way
        expected = torch.unique(x, sorted=sorted_, return_inverse=return_inverse, return_counts=return_counts)
        actual = torch.unique(x.to(device), sorted=sorted_, return_inverse=return_inverse, return_counts=return_counts)
        assert_same(actual, expected)
    assert_same(
        torch._unique(x.to(device), return_inverse=return_inverse), torch._unique(x, return_inverse=return_inverse)
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_consecutive_matches_the_cpu(device, no_fallback, dtype):
    x = values_with_repeats(dtype, shape=(40,)).sort().values.flip(0)[torch.arange(40) // 3 * 3]  # runs of three
    both = {"return_inverse": True, "return_counts": True}
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True}, both, {"return_inverse": True, "dim": 0}):
        expected = torch.unique_consecutive(x, **kwargs)
        actual = torch.unique_consecutive(x.to(device), **kwargs)
        assert_same(actual, expected)
    grid = x.view(5, 8)  # the inverse takes the input's shape
    assert_same(
        torch.unique_consecutive(grid.to(device), return_inverse=True),
        torch.unique_consecutive(grid, return_inverse=True),
    )


def test_each_nan_is_a_group_of_its_own(device, no_fallback):
    x = values_with_repeats(torch.float32, shape=(50,))
    x[::4] = float("nan")
    values, inverse, counts = torch._unique2(x.to(device), return_inverse=True, return_counts=True)
    expected_values, expected_inverse, expected_counts = torch._unique2(x, return_inverse=True, return_counts=True)
    assert_same((values, counts), (expected_values, expected_counts))
    # Which NaN takes which of the NaN groups is unspecified (the CPU's sort leaves them in no particular order).
    numbers = ~x.isnan()
    assert torch.equal(inverse.cpu()[numbers], expected_inverse[numbers])
    assert sorted(inverse.cpu()[~numbers].tolist()) == sorted(expected_inverse[~numbers].tolist())


def test_signed_zeros_empty_and_scalar_inputs(device, no_fallback):
    x = torch.tensor([3.0, 1.0, 3.0, 2.0, -0.0, 0.0])
    expected = torch._unique2(x, return_inverse=True, return_counts=True)
    assert_same(torch._unique2(x.to(device), return_inverse=True, return_counts=True), expected)
    assert torch.signbit(expected[0][0]) and len(expected[0]) == 4  # -0 first: the group's first element
    for value in (torch.empty(0, 3), torch.tensor(2.5), torch.tensor([7], dtype=torch.int64)):
        assert_same(torch._unique2(value.to(device), return_inverse=True, return_counts=True),
                    torch._unique2(value, return_inverse=True, return_counts=True))  # fmt: skip
        assert_same(torch.unique_consecutive(value.to(device), return_inverse=True, return_counts=True),
                    torch.unique_consecutive(value, return_inverse=True, return_counts=True))  # fmt: skip


def test_a_long_tensor_sorts_by_merging(device, no_fallback):
    x = torch.randint(0, 3000, (10000,), generator=torch.Generator().manual_seed(3))
    assert_same(torch.unique(x.to(device), return_inverse=True, return_counts=True),
                torch.unique(x, return_inverse=True, return_counts=True))  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.int16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_slices_along_a_dimension_match_the_cpu(device, no_fallback, dtype, dim):
    x = values_with_repeats(dtype, shape=(6, 4, 3), seed=7)
    x[3] = x[0]  # repeated slices along dimension 0
    x[:, 2] = x[:, 1]  # and along 1
    for kwargs in ({}, {"return_inverse": True, "return_counts": True}):
        assert_same(torch.unique(x.to(device), dim=dim, **kwargs), torch.unique(x, dim=dim, **kwargs))
        expected = torch.unique_consecutive(x, dim=dim, **kwargs)
        actual = torch.unique_consecutive(x.to(device), dim=dim, **kwargs)
        assert_same(actual, expected)
    # the operator itself gives the inverse and counts even when not asked for, as the CPU's does
    assert_same(torch.ops.aten.unique_dim(x.to(device), dim), torch.ops.aten.unique_dim(x, dim))


def test_what_is_not_native_falls_back_with_the_cpus_results(device):
    x = torch.tensor([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], dtype=torch.float64)
    assert_same(torch.unique(x.to(device), return_counts=True), torch.unique(x, return_counts=True))
    wide = torch.randint(0, 2, (4, 300), generator=torch.Generator().manual_seed(8))
    wide[2] = wide[0]
    assert_same(
        torch.unique(wide.to(device), dim=0, return_inverse=True), torch.unique(wide, dim=0, return_inverse=True)
    )
