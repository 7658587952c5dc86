"""Inductor's foreach groups as one launch: a compiled optimizer step updates every parameter with the same program,
and Inductor generates one kernel per parameter (kernel.py's ``codegen_combo_kernel`` collects their calls here).
The calls whose fused kernels are the same pointwise program over one-dimensional views (each parameter's tensors
walked with the same strides) become one multi-tensor kernel: a segment per call, each with its own argument block
(``FusedSpec::segments``). The others launch one by one, as they would outside a group. Calls in a group never depend
on each other (Inductor groups only such), so their order does not matter.
"""

from __future__ import annotations

import math

from .. import _C
from . import runtime

# Nodes a segment cannot hold: a segment is a one-dimensional pointwise space (no rows to reduce, no product),
# indexed accesses check and move elements of one tensor, and random numbers are drawn at positions in one space.
_NOT_IN_SEGMENTS = {
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceArgMax",
    "ReduceArgMin",
    "Product",
    "Gather",
    "ScatterAdd",
    "CheckIndex",
    "RandomUniform",
    "RandomNormal",
}

_specs = {}  # (the program's form, each segment's elements) -> the multi-tensor FusedSpec


class LaunchTogether:
    """The calls of one foreach group, launched by :meth:`launch` (the generated wrapper names it `name`)."""

    def __init__(self, name):
        self.name = name
        self.calls = []

    def add(self, kernel, *args):
        self.calls.append(kernel.resolve(args))

    def launch(self):
        groups = {}  # (device, the program's one-dimensional form) -> [(call, its elements)]
        alone = []
        for call in self.calls:
            form = _one_dimensional(call)
            if form is None:
                alone.append(call)
            else:
                groups.setdefault((call.device, form[0]), []).append((call, form[1]))
        for (device, form), members in groups.items():
            if len(members) == 1 or not self._launch_segments(device, form, members):
                alone += [call for call, _ in members]
        for call in alone:
            call.kernel.launch(call)

    def _launch_segments(self, device, form, members):
        """One multi-tensor kernel for calls of the same form; False when the kernel builder cannot express it."""
        elements = tuple(count for _, count in members)
        spec = _specs.get((form, elements))
        if spec is None:
            name, arguments, loads, stores, nodes = form
            segments = [(count, k * arguments) for k, count in enumerate(elements)]
            description = (f"{name}_x{len(members)}", [], 0, arguments, loads, stores, nodes, None, segments)
            spec = _specs[(form, elements)] = _C.FusedSpec(description)
        block, used = [], []
        for call, _ in members:
            arguments, tensors = call.kernel.argument_block(call)
            block += arguments
            used.append(tensors)
        _C.set_op(self.name, device.index or 0)
        try:
            if not _C.launch_fused(spec, block):
                return False
        finally:
            _C.set_op("", device.index or 0)
        for (call, _), tensors in zip(members, used, strict=True):
            runtime.ROUTES[call.kernel.name] = "fused"
            call.kernel.copy_back(call, tensors)
        return True


def _one_dimensional(call):
    """(form, elements) of a call whose fused kernel is a pointwise program over views that walk the space with one
    stride each (the space read as one dimension, row-major): the form is what calls must share to be segments of
    one kernel (the program, the argument count, each access's type, offset and stride). None for any other call."""
    if call.fused is None:
        return None
    name, sizes, reduced_dims, arguments, loads, stores, nodes, matmul = call.fused[0]
    if reduced_dims or matmul is not None or any(node[0] in _NOT_IN_SEGMENTS for node in nodes):
        return None
    accesses = []
    for argument, element_type, offset, strides in loads + stores:
        stride = _one_stride(sizes, strides)
        if stride is None:
            return None
        accesses.append((argument, element_type, offset, [stride]))
    loads, stores = accesses[: len(loads)], accesses[len(loads) :]
    form = (name, arguments, _frozen(loads), _frozen(stores), _frozen(nodes))
    return form, math.prod(sizes)


def _one_stride(sizes, strides):
    """The stride of a view over `sizes` read as one dimension, or None when it is not one (a broadcast inside the
    space, a transposed view)."""
    stride = strides[-1] if strides else 0
    for dim in range(len(sizes) - 1):
        if sizes[dim] > 1 and strides[dim] != stride * math.prod(sizes[dim + 1 :]):
            return None
    return stride


def _frozen(items):
    return tuple(tuple(tuple(field) if isinstance(field, list) else field for field in item) for item in items)
