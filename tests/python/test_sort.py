"""torch.sort (argsort, msort) on npusim: ranks counted on the vector engine and each element placed at its rank, so
values and indices are the CPU's stable sort's, NaN and -0 included, in every dtype and along any dimension."""

import pytest
import torch

import npusim


def with_ties_and_nans(shape, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    if not dtype.is_floating_point:
        return torch.randint(-6, 6, shape, generator=generator).to(dtype)
    x = torch.randint(-6, 6, shape, generator=generator).float() / 2  # many ties
    flat = x.view(-1)
    flat[torch.randperm(flat.numel(), generator=generator)[:4]] = float("nan")
    flat[torch.randperm(flat.numel(), generator=generator)[:3]] = -0.0
    return x.to(dtype)


def assert_same_sort(actual, expected):
    (values, indices), (expected_values, expected_indices) = actual, expected
    values = values.cpu()
    assert torch.equal(values.isnan(), expected_values.isnan())
    assert torch.equal(values.nan_to_num(0), expected_values.nan_to_num(0))
    assert torch.equal(values.signbit(), expected_values.signbit())  # -0 where the CPU has it
    assert torch.equal(indices.cpu(), expected_indices)
    assert values.stride() == expected_values.stride() and indices.dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32], ids=str)
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
def test_sort_is_the_cpus_stable_sort(dtype, dim, descending):
    x = with_ties_and_nans((3, 7, 40), dtype, 1)
    with npusim.profile() as report:
        actual = torch.sort(x.to("npusim"), dim=dim, descending=descending, stable=True)
    assert report.fallbacks == {}
    assert_same_sort(actual, torch.sort(x, dim=dim, descending=descending, stable=True))


def test_argsort_msort_views_and_out_variants():
    x = with_ties_and_nans((30, 12), torch.float32, 2)
    on_device = x.to("npusim")
    with npusim.profile() as report:
        assert torch.equal(torch.argsort(on_device, dim=0, stable=True).cpu(), torch.argsort(x, dim=0, stable=True))
        assert torch.equal(torch.msort(on_device).cpu().nan_to_num(9), torch.msort(x).nan_to_num(9))
        transposed = on_device.t()[:, ::2]  # not contiguous: dense outputs like it
        assert_same_sort(torch.sort(transposed, stable=True), torch.sort(x.t()[:, ::2], stable=True))
        values, indices = torch.empty(0, device="npusim"), torch.empty(0, dtype=torch.long, device="npusim")
        torch.sort(on_device, dim=1, stable=True, out=(values, indices))
        assert_same_sort((values, indices), torch.sort(x, dim=1, stable=True))
        into_itself = on_device.clone()  # out= the input itself
        torch.sort(into_itself, stable=True, out=(into_itself, torch.empty(0, dtype=torch.long, device="npusim")))
        assert torch.equal(into_itself.cpu().nan_to_num(9), torch.sort(x, stable=True).values.nan_to_num(9))
        scalar = torch.tensor(3.5, device="npusim")
        assert torch.sort(scalar).values.item() == 3.5 and torch.sort(scalar).indices.item() == 0
    assert report.fallbacks == {}
    assert sorted({k.rsplit("_", 1)[0] for k in report.by_kernel() if k.startswith("sort")}) == [
        "sort_place",
        "sort_ranks",
    ]


def test_rows_longer_than_the_native_limit_take_the_counted_fallback():
    x = torch.randn(2, 5000)
    with npusim.profile() as report:
        actual = torch.sort(x.to("npusim"), stable=True)
    assert "aten::sort.values_stable" in report.fallbacks
    assert_same_sort(actual, torch.sort(x, stable=True))
