"""Operators a compiled npusim graph calls as npusim's native kernels rather than letting Inductor lower them.

Inductor decomposes ``max_pool2d_with_indices`` into a window walk with int8 offsets, and lowers ``avg_pool2d``'s
backward with window bounds clamped by min/max; on npusim neither is a strided view, and int8 and bool arithmetic has
no native kernels, while npusim's own pooling kernels exist. Batch norm in training is one native kernel each way
(statistics, normalisation and running statistics together), where Inductor's lowering makes several. For tensors on
npusim these operators skip the decomposition (:func:`skip_decompositions`, run when Inductor imports its table, see
npusim/inductor_hook.py, which is why this module imports only torch) and become extern calls
(:func:`install_lowerings`, run when the backend registers); on any other device Inductor keeps its own.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten
NATIVE = (
    aten.max_pool2d_with_indices.default,
    aten.max_pool2d_with_indices_backward.default,
    aten.avg_pool2d_backward.default,  # Inductor's lowering clamps window bounds with min/max: not a strided view
    # Training batch norm: npusim's is one kernel each way; Inductor's reductions over [N, S] per channel are several.
    aten._native_batch_norm_legit_functional.default,
    aten.native_batch_norm_backward.default,
)


def _on_npusim(value):
    if isinstance(value, torch.Tensor):
        return value.device.type == "npusim"
    get_device = getattr(value, "get_device", None)  # an Inductor IR node
    device = get_device() if get_device is not None else None
    return isinstance(device, torch.device) and device.type == "npusim"


def skip_decompositions(decompositions):
    """Wraps the table's decompositions of NATIVE: they decline (NotImplemented) for npusim tensors."""
    for op in NATIVE:
        decompose = decompositions.get(op)
        if decompose is None or getattr(decompose, "_skips_npusim", False):
            continue

        def skip_on_npusim(*args, _decompose=decompose, **kwargs):
            return NotImplemented if _on_npusim(args[0]) else _decompose(*args, **kwargs)

        skip_on_npusim._skips_npusim = True
        decompositions[op] = skip_on_npusim


def install_lowerings():
    """NATIVE on npusim tensors lower to extern calls of the native kernels."""
    from torch._inductor.lowering import fallback_handler, lowerings  # noqa: PLC0415  Inductor is loaded by now

    for op in NATIVE:
        lower, extern = lowerings.get(op), fallback_handler(op, add_to_fallback_set=False)

        def extern_on_npusim(*args, _lower=lower, _extern=extern, **kwargs):
            if _lower is None or _on_npusim(args[0]):
                return _extern(*args, **kwargs)
            return _lower(*args, **kwargs)

        lowerings[op] = extern_on_npusim
