"""Matrix products as Inductor templates, so that their pointwise epilogues (bias, activation, residual, cast) fuse
into the GEMM kernel.

On npusim, ``mm``, ``addmm`` and ``bmm`` lower to a :class:`GemmBuffer`, a template node: the scheduler fuses the
pointwise nodes that read it into it, and :func:`codegen_template` writes one program whose first value is the
product (``k.matmul``), followed by the epilogue's operations and stores. ``addmm``'s bias and scales become part of
that epilogue. Products on other devices, and operands the template does not take (integer or float64 matrices),
keep Inductor's own lowering.
"""

from __future__ import annotations

import sympy
import torch
from torch._inductor import ir
from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures
from torch._inductor.kernel.mm_common import mm_args
from torch._inductor.lowering import lowerings
from torch._inductor.virtualized import V, ops

aten = torch.ops.aten
_TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


class GemmBuffer(ir.TemplateBuffer):
    """C = A @ B (batched when A and B are 3-D), accumulated in float32, of A's dtype."""

    def __init__(self, layout, mat1, mat2, batch, m, n, k):
        super().__init__(layout=layout, inputs=[mat1, mat2], make_kernel_render=None)
        self.gemm_sizes = (batch, m, n, k)


def _on_npusim(*nodes):
    return all(
        (device := node.get_device()) is not None and device.type == "npusim" and node.get_dtype() in _TEMPLATE_DTYPES
        for node in nodes
    )


def _gemm(mat1, mat2, layout=None):
    m, n, k, layout, mat1, mat2 = mm_args(mat1, mat2, layout=layout)
    batch = mat1.get_size()[0] if len(mat1.get_size()) == 3 else 1
    return ir.TensorBox.create(GemmBuffer(layout, mat1, mat2, batch, m, n, k))


def install_lowerings():
    """Routes npusim's float products to the template; everything else keeps the lowering it had."""
    originals = {op: lowerings[op] for op in (aten.mm.default, aten.addmm.default, aten.bmm.default)}

    def mm(mat1, mat2, *, layout=None, **kwargs):
        if kwargs or not _on_npusim(mat1, mat2):
            return originals[aten.mm.default](mat1, mat2, layout=layout, **kwargs)
        return _gemm(mat1, mat2, layout)

    def bmm(mat1, mat2, *, layout=None, **kwargs):
        if kwargs or not _on_npusim(mat1, mat2):
            return originals[aten.bmm.default](mat1, mat2, layout=layout, **kwargs)
        return _gemm(mat1, mat2, layout)

    def addmm(bias, mat1, mat2, *, beta=1, alpha=1, layout=None, **kwargs):
        if kwargs or not _on_npusim(bias, mat1, mat2):
            return originals[aten.addmm.default](bias, mat1, mat2, beta=beta, alpha=alpha, layout=layout, **kwargs)
        product = _gemm(mat1, mat2)
        if alpha != 1:
            product = lowerings[aten.mul.Tensor](product, alpha)
        if beta != 1:
            bias = lowerings[aten.mul.Tensor](bias, beta)
        return lowerings[aten.add.Tensor](product, bias)  # a pointwise node: the template's epilogue

    lowerings[aten.mm.default] = mm
    lowerings[aten.bmm.default] = bmm
    lowerings[aten.addmm.default] = addmm


def _view(node):
    """A matrix operand's layout as (offset, batch stride, row stride, column stride), in elements."""
    layout = node.get_layout()
    strides = list(layout.stride)
    if len(strides) == 2:
        strides = [0] + strides
    return (layout.offset, *strides)


def codegen_template(scheduling, template_node, epilogue_nodes, prologue_nodes, *, only_gen_src_code=False, **_):
    """One kernel for the product and its fused epilogue nodes."""
    from .kernel import NpusimKernel  # noqa: PLC0415  kernel.py imports this module

    gemm = template_node.node
    batch, m, n, k = gemm.gemm_sizes
    mat1, mat2 = gemm.inputs
    nodes = [template_node, *epilogue_nodes]
    numel = batch * m * n
    kernel = NpusimKernel({"x": numel, "r0_": sympy.S.One}, features=SIMDKernelFeatures(nodes, numel, sympy.S.One))
    with kernel:
        a = kernel.args.input(mat1.get_name())
        b = kernel.args.input(mat2.get_name())
        sizes = ", ".join(kernel.index_to_str(sympy.sympify(s)) for s in (batch, m, n, k))
        views = ", ".join(kernel.index_to_str(sympy.sympify(v)) for v in (*_view(mat1), *_view(mat2)))
        line = f"k.matmul({a!r}, {b!r}, ({sizes}), ({views}), {gemm.get_dtype()})"
        kernel.template_output = (gemm.get_name(), kernel.cse.generate(kernel.compute, line, dtype=gemm.get_dtype()))
        ranges = [[batch, m, n] if batch != 1 else [m, n], []]
        (index_vars, _) = kernel.split_and_set_ranges(ranges)
        index = gemm.get_layout().make_indexer()(index_vars if batch != 1 else index_vars)
        # The product itself is stored only when something besides the fused epilogue reads it.
        ops.store(gemm.get_name(), index, ops.load(gemm.get_name(), index))
        for node in epilogue_nodes:
            node.codegen(kernel.split_and_set_ranges(node.get_ranges()))
    with V.set_kernel_handler(kernel):
        source = kernel.codegen_kernel()
    if only_gen_src_code:
        return source
    with V.set_kernel_handler(kernel):
        for node in nodes:
            node.mark_run()
    name = scheduling.define_kernel(source, nodes, kernel)
    kernel.kernel_name = name
    scheduling.codegen_comment(nodes, name)
    kernel.call_kernel(name)
    V.graph.removed_buffers |= kernel.removed_buffers
    scheduling.free_buffers_in_scheduler()
    return None
