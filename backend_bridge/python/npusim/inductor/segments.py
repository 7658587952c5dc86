"""Splits a fused kernel along the dimension its point masks select on, so that each part reads only what it uses.

Inductor writes a `cat`, and the sum of `select_scatter`s a packed projection's backward makes (nn.MultiheadAttention's
q, k and v gradients into one in-projection gradient), as one pointwise program over the whole output in which every
point loads every input and keeps one: `where(x0 < 128, a, where(x0 < 256, b, c))`. The lowering tables such masks
on the host (`lowering._host_mask_table`): a bool per point that varies along one dimension of the space only. Along
that dimension the masks are constant on runs of indices (one per input); each run becomes a kernel of its own over
that part of the space, in which every mask is a constant, every `where` of a constant picks its side, and what only
the other side read (the other inputs' loads, their arithmetic) is gone. The parts run one after another: more
launches, far fewer loads and vector operations (docs/compile.md, "Cat and select-scatter sums").

Everything else is kept as the whole kernel computes it, `x + 0` included (it turns -0 into +0, as the unsplit
kernel and eager mode's sum of zero-filled tensors do), so the parts write bit for bit what the whole would.
"""

from __future__ import annotations

MOST_PARTS = 8  # the most launches one kernel becomes (a cat of more inputs stays whole)
_READ = {"Load", "Gather"}  # nodes whose `access` is a load
_NOT_SPLIT = {"ScatterAdd", "RandomUniform", "RandomNormal", "Product"}  # whose positions the parts would move


def split(description, host_tables, first_host_table):
    """The descriptions of the parts (see the module's docstring), or None when the kernel is not split: its masks
    vary along no dimension or along several, or along a reduced one, the runs are more than MOST_PARTS, or the kernel
    has a product, random numbers or a scatter-add, or it writes a tensor it reads (a part would read what an earlier
    one wrote). A load by element index (a cat of unequal parts) is split too: its index is computed from loads of
    the space, which move with the part."""
    name, sizes, reduced_dims, arguments, loads, stores, nodes, matmul = description
    if matmul is not None or any(node[0] in _NOT_SPLIT for node in nodes):
        return None
    if {access[0] for access in stores} & {access[0] for access in loads}:
        return None
    masks = {}  # load number of a mask -> its values along the dimension
    dimension = None
    for number, (argument, element_type, offset, strides) in enumerate(loads):
        table = argument - first_host_table
        if element_type != "bool" or not 0 <= table < len(host_tables):
            continue
        varying = [d for d, (stride, size) in enumerate(zip(strides, sizes, strict=True)) if stride and size > 1]
        if len(varying) != 1 or (dimension is not None and varying[0] != dimension):
            return None
        dimension = varying[0]
        values = host_tables[table]
        masks[number] = [bool(values[offset + i * strides[dimension]]) for i in range(sizes[dimension])]
    if dimension is None or dimension >= len(sizes) - reduced_dims:
        return None
    runs = _runs([tuple(values[i] for values in masks.values()) for i in range(sizes[dimension])])
    if len(runs) < 2 or len(runs) > MOST_PARTS:
        return None
    parts = []
    for first, end in runs:
        constants = {number: values[first] for number, values in masks.items()}
        part_sizes = list(sizes)
        part_sizes[dimension] = end - first
        part_loads = [_moved(access, dimension, first) for access in loads]
        part_stores = [_moved(access, dimension, first) for access in stores]
        part_nodes, part_loads = _folded(nodes, part_loads, constants)
        parts.append((name, part_sizes, reduced_dims, arguments, part_loads, part_stores, part_nodes, None))
    return parts


def _runs(values):
    """[first, end) of each run of equal neighbours."""
    runs, first = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[first]:
            runs.append((first, i))
            first = i
    return runs


def _moved(access, dimension, first):
    """An access of the part starting at index `first` of `dimension`."""
    argument, element_type, offset, strides = access
    return (argument, element_type, offset + first * strides[dimension], list(strides))


def _folded(nodes, loads, constants):
    """The nodes with each mask load a constant, each `Where` of a constant its chosen side, and every node and load
    no store reaches left out (operands and loads renumbered)."""
    chosen = {}  # node -> the node standing for it
    folded = []
    for number, node in enumerate(nodes):
        op, node_type, a, b, c, access = node[:6]
        a, b, c = (chosen.get(operand, operand) for operand in (a, b, c))
        if op == "Load" and access in constants:
            folded.append(("Constant", node_type, -1, -1, -1, -1, float(constants[access])))
        elif op == "Where" and folded[a][0] == "Constant" and folded[a][1] == "bool":
            chosen[number] = b if folded[a][6] else c
            folded.append(None)
        else:
            folded.append((op, node_type, a, b, c, *node[5:]))
    live = set()
    for number in reversed(range(len(folded))):
        node = folded[number]
        if node is not None and (node[0] == "Store" or number in live):
            live |= {operand for operand in node[2:5] if operand >= 0}
            live.add(number)
    kept = [n for n in range(len(folded)) if n in live]
    renumbered = {old: new for new, old in enumerate(kept)}
    used_loads = sorted({folded[n][5] for n in kept if folded[n][0] in _READ})
    load_number = {old: new for new, old in enumerate(used_loads)}
    result = []
    for n in kept:
        op, node_type, a, b, c, access = folded[n][:6]
        a, b, c = (renumbered[operand] if operand >= 0 else operand for operand in (a, b, c))
        if op in _READ:
            access = load_number[access]
        result.append((op, node_type, a, b, c, access, *folded[n][6:]))
    return result, [loads[k] for k in used_loads]
