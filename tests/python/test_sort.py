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


def with_infinities(x, seed):
    """Infinities of both signs among the ties and NaN: the merge sort pads rows with NaN or -inf."""
    if x.dtype.is_floating_point:
        generator = torch.Generator().manual_seed(seed)
        flat = x.view(-1)
        flat[torch.randperm(flat.numel(), generator=generator)[:5]] = float("inf")
        flat[torch.randperm(flat.numel(), generator=generator)[:5]] = float("-inf")
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
def test_rows_longer_than_a_ranked_sort_are_merge_sorted_natively(dtype, descending):
    """Rows beyond 4096 elements: sorted in blocks by ranks, then merged pass by pass (sort_ops.cpp), still the CPU's
    stable sort. 4097 is one element past the ranked sort; 9000 pads to 16384: 512 blocks of 32, merged in 9 passes."""
    for shape, dim, seed in [((2, 4097), -1, 3), ((9000, 3), 0, 4)]:
        x = with_infinities(with_ties_and_nans(shape, dtype, seed), seed)
        with npusim.profile() as report:
            actual = torch.sort(x.to("npusim"), dim=dim, descending=descending, stable=True)
        assert report.fallbacks == {}
        assert any(name.startswith("sort_merge") for name in report.by_kernel())
        assert_same_sort(actual, torch.sort(x, dim=dim, descending=descending, stable=True))


def test_a_vocabulary_of_logits_sorts_natively():
    """Top-p sampling sorts a vocabulary's logits: GPT-2's 50257 columns."""
    x = torch.randn(2, 50257, generator=torch.Generator().manual_seed(5))
    x[0, 100:200] = float("-inf")  # filtered by a top-k before
    with npusim.profile() as report:
        actual = torch.sort(x.to("npusim"), descending=True, stable=True)
    assert report.fallbacks == {}
    assert_same_sort(actual, torch.sort(x, descending=True, stable=True))


@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_topk_beyond_sixteen_takes_the_first_k_of_the_native_sort(largest, dtype):
    """Top-k sampling keeps 50 of a vocabulary; the rows' NaN and infinities come where the CPU puts them."""
    x = with_infinities(with_ties_and_nans((3, 6000), dtype, 6), 6)
    with npusim.profile() as report:
        values, indices = torch.topk(x.to("npusim"), 50, dim=-1, largest=largest)
    assert report.fallbacks == {}
    expected_values, _ = torch.topk(x, 50, dim=-1, largest=largest)
    values, indices = values.cpu(), indices.cpu()
    assert torch.equal(values.isnan(), expected_values.isnan())
    assert torch.equal(values.nan_to_num(0), expected_values.nan_to_num(0))
    # The order of equal elements' indices is not specified: each index must point at its value.
    assert torch.equal(x.gather(-1, indices).nan_to_num(0), values.nan_to_num(0))
    assert all(len(set(row)) == 50 for row in indices.tolist())
