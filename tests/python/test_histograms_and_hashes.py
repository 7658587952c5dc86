"""torch.histogram, torch.histogramdd and torch.hash_tensor on the device, against the CPU with no CPU fallback (the
OpInfo tests cover their samples; these cover the cases a user meets beyond them), and torch.linspace bit for bit,
which the histograms' edges are."""

import pytest
import torch

import npusim  # noqa: F401  registers the device


@pytest.fixture(autouse=True)
def native_only(no_fallback):
    pass


def test_a_large_histogram_counts_exactly_as_the_cpu_and_its_edges_are_the_cpus():
    x = torch.randn(200_000, generator=torch.Generator().manual_seed(0))
    hist, edges = torch.histogram(x.to("npusim"), 64)
    expected_hist, expected_edges = torch.histogram(x, 64)
    assert torch.equal(hist.cpu(), expected_hist) and torch.equal(edges.cpu(), expected_edges)


def test_points_on_an_edge_go_to_the_bin_above_and_the_top_edge_to_the_last_bin():
    x = torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 1.0, -0.1, 1.1, float("nan")])
    hist, _ = torch.histogram(x.to("npusim"), 4, range=(0.0, 1.0))
    assert hist.cpu().tolist() == torch.histogram(x, 4, range=(0.0, 1.0))[0].tolist() == [1.0, 1.0, 1.0, 3.0]


def test_constant_and_empty_data_and_weighted_densities():
    constant = torch.full((6,), 2.0)
    assert torch.equal(torch.histogram(constant.to("npusim"), 4)[1].cpu(), torch.histogram(constant, 4)[1])
    empty = torch.empty(0)
    assert torch.equal(torch.histogram(empty.to("npusim"), 3)[1].cpu(), torch.histogram(empty, 3)[1])
    points, weights = torch.randn(300, 3), torch.rand(300)
    arguments = {"range": [-1.0, 1.0, -2.0, 2.0, 0.0, 3.0], "weight": weights, "density": True}
    hist, edges = torch.histogramdd(points.to("npusim"), [3, 4, 5], **{**arguments, "weight": weights.to("npusim")})
    expected, expected_edges = torch.histogramdd(points, [3, 4, 5], **arguments)
    torch.testing.assert_close(hist.cpu(), expected)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(edges, expected_edges, strict=True))


def test_a_range_that_is_not_finite_is_the_cpus_error_and_the_device_stays_usable():
    with pytest.raises(RuntimeError, match="is not finite"):
        torch.histogram(torch.tensor([1.0, float("nan")]).to("npusim"), 3)
    assert torch.histogram(torch.ones(3).to("npusim"), 2)[0].cpu().tolist() == [0.0, 3.0]


@pytest.mark.parametrize(
    "values",
    [
        torch.tensor([1.0, float("nan"), -0.0, float("inf")]),
        torch.tensor([-1, 127, 5], dtype=torch.int8),
        torch.tensor([True, False, True]),
        torch.randn(7).half(),
        torch.tensor(1.5),
    ],
    ids=["float32", "int8", "bool", "float16", "0-dim"],
)
def test_hashes_are_the_cpus(values):
    assert torch.equal(torch.hash_tensor(values.to("npusim")).cpu(), torch.hash_tensor(values))


def test_hashes_along_dimensions():
    x = torch.randn(4, 5, 6)
    for arguments in [{"dim": 1}, {"dim": (0, 2), "keepdim": True}, {"dim": -1}]:
        actual = torch.hash_tensor(x.to("npusim"), **arguments)
        assert actual.dtype == torch.uint64 and torch.equal(actual.cpu(), torch.hash_tensor(x, **arguments))


@pytest.mark.parametrize("start, end, steps", [(-1.0, 1.0, 8), (-3.7, 12.1, 1001), (5.0, -2.0, 17), (0.0, 10.0, 3)])
def test_linspace_is_the_cpus_bit_for_bit(start, end, steps):
    assert torch.equal(torch.linspace(start, end, steps, device="npusim").cpu(), torch.linspace(start, end, steps))
