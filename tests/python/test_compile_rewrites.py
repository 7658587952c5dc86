"""The lowering's rewrites of a fused kernel's spec: segments.split along the dimension its point masks select on
(docs/compile.md), and products with one left out."""

import torch

from npusim.inductor import segments
from npusim.inductor.lowering import lower
from npusim.inductor.program import build

# Arguments: 0 and 1 the inputs a and b, 2 the output, 3 the host table of the mask "the first of two halves".
FIRST_HOST_TABLE = 3


def cat_of_two(mask_strides=(1, 0), store_argument=2, reduced_dims=0):
    """out[i, j] = where(i < 1, a[j], b[j]) + 0 over a [2, 5] space: the spec the lowering writes for a cat."""
    loads = [(0, "f32", 0, [0, 1]), (1, "f32", 0, [0, 1]), (3, "bool", 0, list(mask_strides))]
    nodes = [
        ("Load", "f32", -1, -1, -1, 0, 0.0),
        ("Load", "f32", -1, -1, -1, 1, 0.0),
        ("Load", "bool", -1, -1, -1, 2, 0.0),
        ("Where", "f32", 2, 0, 1, -1, 0.0),
        ("Constant", "f32", -1, -1, -1, -1, 0.0),
        ("Add", "f32", 3, 4, -1, -1, 0.0),
        ("Store", "f32", 5, -1, -1, 0, 0.0),
    ]
    stores = [(store_argument, "f32", 0, [5, 1])]
    return ("fused_cat", [2, 5], reduced_dims, 4, loads, stores, nodes, None)


HALVES = [torch.tensor([True, False])]


def test_each_run_of_the_mask_is_a_part_reading_only_its_input():
    parts = segments.split(cat_of_two(), HALVES, FIRST_HOST_TABLE)
    assert len(parts) == 2
    for part, (read, offset) in zip(parts, [(0, 0), (1, 5)], strict=True):
        _, sizes, _, arguments, loads, stores, nodes, _ = part
        assert sizes == [1, 5] and arguments == 4
        assert loads == [(read, "f32", 0, [0, 1])]  # the other input and the mask are gone
        assert stores == [(2, "f32", offset, [5, 1])]  # the part's rows of the output
        assert [node[0] for node in nodes] == ["Load", "Constant", "Add", "Store"]  # + 0 kept: -0 becomes +0


def test_kernels_the_split_would_change_are_left_whole():
    assert segments.split(cat_of_two(store_argument=0), HALVES, FIRST_HOST_TABLE) is None  # writes what it reads
    assert segments.split(cat_of_two(reduced_dims=2), HALVES, FIRST_HOST_TABLE) is None  # a reduced dimension
    two_dims = [torch.tensor([True, False, False, True, True, False, False, True, True, True])]
    assert segments.split(cat_of_two(mask_strides=(5, 1)), two_dims, FIRST_HOST_TABLE) is None
    everywhere = [torch.tensor([True, True])]
    assert segments.split(cat_of_two(), everywhere, FIRST_HOST_TABLE) is None  # one run: nothing to split


def test_a_product_with_one_is_not_computed():
    """Inductor's lerp multiplies by 1.0 in every Adam step; x * 1 is x exactly, so the lowering reads x instead."""

    def program(k):
        k.tree("x", 64)
        k.range("x0", "x", 1, 64)
        loaded = k.load("in_ptr0", "x0", torch.float32)
        product = k.op("mul", k.constant(1.0, torch.float32), loaded)
        k.store("out_ptr0", "x0", k.op("mul", product, k.constant(2.0, torch.float32)), torch.float32, mode=None)

    description = lower(build("times_one", program, ["in_ptr0", "out_ptr0"], ()))[0]
    assert [node[0] for node in description[6] if node[0] != "Constant"] == ["Load", "Mul", "Store"]
