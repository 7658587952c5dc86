"""Operators npusim has no kernel for, run as PyTorch's own decompositions (`torch._decomp`) into operators it has:
op by op on the device, so no data leaves it and nothing falls back to the CPU.

Each listed operator is registered for the `PrivateUse1` key and, where differentiating the decomposition gives
PyTorch's gradients, the `AutogradPrivateUse1` key too, so that autograd differentiates the decomposition itself and
the gradient runs on the device as well. Elsewhere autograd calls the operator's own backward, and npusim computes
that backward by differentiating the decomposition itself, with zeros for a gradient the decomposition leaves out:
grid_sampler_2d's nearest mode gives the grid no gradient through its decomposition (it rounds to indices), where
PyTorch's backward gives it zeros. float16 and bfloat16 operands are decomposed in float32 and the
results rounded once, as the CPU's kernels compute them (a decomposition run in half precision rounds every step).
An operator with a kernel of npusim's own is left alone. Their `out=` forms still take the CPU fallback.
`tests/python/test_eager_decompositions.py` checks each against the CPU with no fallback.
"""

import torch
from torch._decomp import decomposition_table
from torch.utils._pytree import tree_map

# Functional aten overloads, as "name" (the default overload) or "name.overload", and whether autograd
# differentiates the decomposition (else the operator's own backward).
DECOMPOSED = {
    "grid_sampler_2d": False,  # grid_sample of 4-D inputs: bilinear, nearest and bicubic, every padding mode
    "multi_margin_loss": True,
    "max_pool3d_with_indices": True,
    "max_unpool3d": True,
}
# Left out: multilabel_margin_loss_forward, whose decomposition in torch 2.13 gives another loss than the CPU's
# kernel (2.69 against 1.20 for targets [3, 0, -1, ...]; test_eager_decompositions.py keeps the case).

# Backward operators computed by differentiating their forward's decomposition, and that forward. The backward's
# arguments are the gradient of the output, the forward's arguments, then which of the forward's leading tensors
# need a gradient.
DIFFERENTIATED_BACKWARDS = {"grid_sampler_2d_backward": "grid_sampler_2d"}

HALF_PRECISION = (torch.float16, torch.bfloat16)

# The dispatch keys a backward kernel runs below (excluded while it runs), which differentiating inside it needs back.
_AUTOGRAD_KEYS = ("AutogradFunctionality", "AutogradOther", "AutogradNestedTensor", "ADInplaceOrView")

_library = None


def _overload(name):
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _in_float32(decomposition):
    """The decomposition, run on float32 copies of half-precision operands, its float32 results rounded back once."""

    def run(*args, **kwargs):
        found = [
            a.dtype for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.dtype in HALF_PRECISION
        ]
        if not found:
            return decomposition(*args, **kwargs)

        def widen(value):
            return value.float() if isinstance(value, torch.Tensor) and value.dtype in HALF_PRECISION else value

        def narrow(value):
            return value.to(found[0]) if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value

        return tree_map(narrow, decomposition(*tree_map(widen, args), **tree_map(widen, kwargs)))

    return run


def _differentiated(forward):
    """A backward kernel: the gradients of `forward` (a decomposition) at the arguments, by autograd."""

    def backward(grad_output, *arguments):
        *forward_arguments, needed = arguments
        excluded = torch._C._dispatch_tls_local_exclude_set()
        for key in _AUTOGRAD_KEYS:
            excluded = excluded.remove(getattr(torch._C.DispatchKey, key))
        with torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded), torch.enable_grad():
            tensors = forward_arguments[: len(needed)]
            leaves = [a.detach().requires_grad_(n) for a, n in zip(tensors, needed, strict=True)]
            wanted = [leaf for leaf in leaves if leaf.requires_grad]
            output = forward(*leaves, *forward_arguments[len(needed) :])
            found = iter(torch.autograd.grad(output, wanted, grad_output, allow_unused=True) if wanted else ())
        gradients = [next(found) if leaf.requires_grad else None for leaf in leaves]
        return tuple(
            torch.zeros_like(leaf) if n and g is None else g
            for leaf, n, g in zip(leaves, needed, gradients, strict=True)
        )

    return backward


def install():
    """Registers the decompositions once (at `import npusim`, which `import torch` triggers)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")  # noqa: TOR901  kernels for existing aten operators
    for name, differentiated in DECOMPOSED.items():
        op = _overload(name)
        if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1"):
            continue  # npusim's own kernel
        kernel = _in_float32(decomposition_table[op])
        _library.impl(name, kernel, "PrivateUse1")
        if differentiated:
            _library.impl(name, kernel, "AutogradPrivateUse1")
    for name, forward in DIFFERENTIATED_BACKWARDS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(_overload(name).name(), "PrivateUse1"):
            _library.impl(name, _in_float32(_differentiated(decomposition_table[_overload(forward)])), "PrivateUse1")
