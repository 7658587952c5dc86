"""Operators composed from native kernels on the device (composed_tensor_ops.cpp, regression_losses.cpp) against the
CPU, without fallback: trace, count_nonzero, aminmax, addbmm, take, glu (and its gradient), cross, isin, bucketize,
searchsorted, and the Huber and smooth L1 losses with their gradients."""

import pytest
import torch
import torch.nn.functional as F

import npusim


@pytest.fixture
def no_fallback():
    npusim._C.reset_fallback_counts()
    yield
    assert npusim._C.fallback_counts() == {}


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
