"""Operators that only move elements, on complex64 and float64 tensors (element_bits.cpp: run by their int64 kernels
on the same memory reinterpreted), bit for bit against the CPU with no CPU fallback: selection, indexing, gathering,
flips and rolls, padding by reflection, replication or a value, fills and scatters with values, triangles; out= and
in place; the calls that do more than move (index_put with accumulate=True) still computed correctly; and complex128
copies as their 8-byte halves."""

import math

import pytest
import torch

import npusim

DTYPES = [torch.complex64, torch.float64]


def sample(dtype, *shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randn(shape, dtype=dtype, generator=generator)
    flat = values.view(-1)
    flat[0] = complex(math.nan, -0.0) if dtype.is_complex else math.nan  # NaN payloads and signed zeros survive
    flat[1] = -0.0
    return values


def same_bits(actual, expected):
    """Equal as bits: NaN payloads and the signs of zeros included (torch.equal calls NaN unequal to itself)."""
    return torch.equal(actual.cpu().resolve_conj().view(torch.int64), expected.resolve_conj().view(torch.int64))


def positive(t):
    return (t.real if t.is_complex() else t.float()) > 0


INDEX = torch.tensor([2, 0, 3])
MOVES = {
    "index_select": lambda t: t.index_select(1, INDEX.to(t.device)),
    "index": lambda t: t[INDEX.to(t.device), 1:],
    "masked_select": lambda t: t.masked_select(positive(t.cpu()).to(t.device)),
    "gather": lambda t: t.gather(1, torch.tensor([[0, 1], [2, 3], [1, 1], [5, 0]]).to(t.device)),
    "take": lambda t: t.take(torch.tensor([[7, 0], [23, 5]]).to(t.device)),
    "flip": lambda t: t.flip(0, 1),
    "roll": lambda t: t.roll((2, -1), (1, 0)),
    "reflection_pad": lambda t: torch.nn.functional.pad(t.unsqueeze(0), (2, 2), mode="reflect"),
    "replication_pad": lambda t: torch.nn.functional.pad(t.unsqueeze(0), (1, 3), mode="replicate"),
    "reflection_pad2d": lambda t: torch.nn.functional.pad(t.unsqueeze(0), (1, 2, 2, 1), mode="reflect"),
    "constant_pad": lambda t: torch.nn.functional.pad(t, (1, 1, 0, 2), value=0.5),
    "index_fill": lambda t: t.index_fill(1, INDEX.to(t.device), -2.5),
    "masked_fill": lambda t: t.masked_fill(positive(t.cpu()).to(t.device), 1.5),
    "masked_scatter": lambda t: t.masked_scatter(positive(t.cpu()).to(t.device), t.flip(0)),
    "index_put": lambda t: t.index_put((INDEX.to(t.device),), t[:1]),
    "scatter": lambda t: t.scatter(0, torch.tensor([[1, 0, 3, 2, 0, 1]]).to(t.device), t[3:]),
    "tril": lambda t: t.tril(1),
    "triu": lambda t: t.triu(-1),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", MOVES)
def test_moves_match_the_cpu_bit_for_bit(no_fallback, dtype, name):
    values = sample(dtype, 4, 6)
    expected = MOVES[name](values)
    actual = MOVES[name](values.to("npusim"))
    assert actual.device.type == "npusim" and actual.dtype == dtype
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert same_bits(actual, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_out_and_in_place_keep_the_original_tensor(no_fallback, dtype):
    values = sample(dtype, 4, 6)
    device = values.to("npusim")
    out = torch.empty(0, dtype=dtype, device="npusim")
    result = torch.index_select(device, 0, INDEX.to("npusim"), out=out)
    assert result is out and out.shape == (3, 6)
    assert same_bits(out, values.index_select(0, INDEX))
    filled = device.clone()
    assert filled.index_fill_(0, INDEX.to("npusim"), 7.0) is filled
    assert same_bits(filled, values.index_fill(0, INDEX, 7.0))
    transposed = device.t()  # a view written in place keeps its layout
    transposed.masked_fill_(torch.eye(6, 4, dtype=torch.bool).to("npusim"), 3.0)
    assert same_bits(device, values.t().masked_fill(torch.eye(6, 4, dtype=torch.bool), 3.0).t())


def test_accumulation_is_not_a_move():
    indices = torch.tensor([1, 1, 2])
    # float64 has no adder on the device: computed on the CPU (counted), not moved as bits
    values, updates = sample(torch.float64, 4, 6), sample(torch.float64, 3, 6, seed=1)
    expected = values.index_put((indices,), updates, accumulate=True)
    npusim._C.reset_fallback_counts()
    actual = values.to("npusim").index_put((indices.to("npusim"),), updates.to("npusim"), accumulate=True)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
    assert npusim._C.fallback_counts()
    # complex64 accumulates natively, each part into its own
    values, updates = sample(torch.complex64, 4, 6), sample(torch.complex64, 3, 6, seed=1)
    expected = values.index_put((indices,), updates, accumulate=True)
    npusim._C.reset_fallback_counts()
    actual = values.to("npusim").index_put((indices.to("npusim"),), updates.to("npusim"), accumulate=True)
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True)
    assert npusim._C.fallback_counts() == {}


def test_conjugate_views_are_moved_by_value(no_fallback):
    values = sample(torch.complex64, 4, 6)
    actual = values.to("npusim").conj().index_select(1, INDEX.to("npusim"))
    assert same_bits(actual, values.conj().index_select(1, INDEX))


def test_complex128_copies_fills_and_views_move_their_halves(no_fallback):
    # 16-byte elements, which no DMA element holds, are copied as their two 8-byte halves.
    values = torch.randn(4, 6, dtype=torch.complex128, generator=torch.Generator().manual_seed(3))
    on_device = values.to("npusim")
    assert torch.equal(on_device.cpu(), values)
    assert torch.equal(on_device.t().contiguous().cpu(), values.t().contiguous())
    assert torch.equal(on_device[::2, 1:].clone().cpu(), values[::2, 1:])
    assert torch.equal(torch.zeros(3, 2, dtype=torch.complex128, device="npusim").cpu(), torch.zeros(3, 2).cdouble())
    # a block-diagonal matrix of a float64 and a complex64 block is complex128, written block by block
    real, complex_block = torch.randn(1, 5, dtype=torch.float64), torch.randn(2, 3, dtype=torch.complex64)
    expected = torch.block_diag(real, complex_block)
    assert torch.equal(torch.block_diag(real.to("npusim"), complex_block.to("npusim")).cpu(), expected)
