"""Loads a fused kernel would read across the order its tiles walk the space (a transposed view: a DRAM burst per
element), copied into that order before the kernel by npusim's transposing copy: which loads (found by the lowering)
and the copy (made at each launch)."""

from __future__ import annotations

import dataclasses
import itertools

import torch


@dataclasses.dataclass(frozen=True)
class Staging:
    """A load copied, before the kernel, into a tensor laid out in the order the kernel's tiles walk the space: the
    view of argument `argument` at element `offset` with `source_strides` over the space, into a new tensor of
    `sizes` (1 where the load does not vary) whose strides over the space are `strides`."""

    argument: int
    offset: int
    source_strides: tuple[int, ...]
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    def copy(self, tensor):
        """The load's view of `tensor` (on the device), copied into the layout the kernel reads it in."""
        view = tensor.as_strided(self.sizes, self.source_strides, tensor.storage_offset() + self.offset)
        staged = torch.empty_strided(self.sizes, self.strides, dtype=tensor.dtype, device=tensor.device)
        return staged.copy_(view)


_SHORTEST_RUN = 8  # elements: a dimension shorter than this gains too little from reading it in order


def _one_run(strides, dims):
    """Whether a view over these dimensions walks its elements with one stride (they merge into one dimension)."""
    kept = [(s, d.size) for s, d in zip(strides, dims, strict=True) if d.size > 1]
    return all(s == inner * size for (s, _), (inner, size) in itertools.pairwise(kept))


def transposed_loads(program, loads, stores):
    """The loads that walk the space across the order the kernel's tiles walk it (a transposed view: contiguous along
    another dimension than the tiles' innermost, which is the first store's contiguous one or a row's last), by spec
    load index, with their staging. Such a load would cost a DRAM burst per element; npusim's transposing copy (vtr
    through the scratchpad) puts it in the tiles' order first, at the cost of one more launch and a round trip of that
    tensor through DRAM."""
    if not stores:
        return {}
    dims, reduced = program.space, program.reduced_dims
    first_store = stores[0][3]
    # The order the tiles walk the space in, outermost first: the outer dimensions as the first store walks them,
    # then the reduced ones in order (a row's elements contiguous).
    outer = sorted(range(len(dims) - reduced), key=lambda d: -abs(first_store[d]))
    order = outer + list(range(len(dims) - reduced, len(dims)))
    along = order[-1]
    if dims[along].size < _SHORTEST_RUN or (not reduced and first_store[along] != 1):
        return {}
    staged = {}
    for k, (argument, _, offset, strides) in enumerate(loads):
        if argument >= len(program.arguments) or any(s < 0 for s in strides) or strides[along] in (0, 1):
            continue
        if not any(s == 1 and dim.size >= _SHORTEST_RUN for s, dim in zip(strides, dims, strict=True)):
            continue
        if reduced and _one_run(strides[-reduced:], dims[-reduced:]):
            continue  # a row of one stride: the kernel loads it transposed and turns it with vtr itself
        sizes = [dim.size if s else 1 for s, dim in zip(strides, dims, strict=True)]
        layout, step = [0] * len(dims), 1
        for d in reversed(order):
            if sizes[d] > 1:
                layout[d], step = step, step * sizes[d]
        staged[k] = Staging(argument, offset, tuple(strides), tuple(sizes), tuple(layout))
    return staged
