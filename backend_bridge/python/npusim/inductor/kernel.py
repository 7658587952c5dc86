"""Inductor's code generator for npusim: each fused node group becomes one program function (program.py).

Inductor's SIMD scheduler decides what fuses (pointwise chains, reductions with their prologue and epilogue); this
kernel class writes what the group computes as calls on a ProgramBuilder ``k``, one line per load, operation,
reduction and store, with the loads' and stores' index expressions as Inductor printed them. Reductions are always
persistent here (a row of the reduced range is whole in the kernel), so the program is straight-line dataflow; the
kernel builder decides tiles, cores and DMA when the runtime builds it.
"""

from __future__ import annotations

import math

import sympy
import torch
from torch._inductor import config as inductor_config
from torch._inductor.codegen.common import BackendFeature, DeferredLine, IndentedBuffer, OpOverrides
from torch._inductor.codegen.simd import SIMDKernel, SIMDScheduling
from torch._inductor.utils import get_fused_kernel_name, get_kernel_metadata
from torch._inductor.virtualized import OpsWrapper, V, ops
from torch.utils._ordered_set import OrderedSet
from torch.utils._sympy.printers import PythonPrinter

from . import gemm

_print = PythonPrinter().doprint

# Operations written as k.op(name, operands...): each is one vector step (or a short sequence) in the kernel builder,
# or one eager operation in the interpreter.
_UNARY = (
    "abs exp exp2 log log2 log10 sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh sigmoid erf "
    "erfc erfinv lgamma log1p expm1 floor ceil round trunc sign signbit isnan isinf neg reciprocal logical_not "
    "bitwise_not"
).split()
_BINARY = (
    "add sub mul truediv div floordiv truncdiv int_truediv mod remainder fmod pow maximum minimum atan2 copysign "
    "nextafter hypot eq ne lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
    "bitwise_left_shift bitwise_right_shift"
).split()


def _literal(value):
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return f"float({str(value)!r})"
    return repr(value)


def _operand(value):
    """A CSE variable's name; a Python number becomes a constant node."""
    if isinstance(value, bool):
        return f"k.constant({value!r}, torch.bool)"
    if isinstance(value, int):
        return f"k.constant({value!r}, torch.int64)"
    if isinstance(value, float):
        return f"k.constant({_literal(value)}, torch.float32)"
    return str(value)


_unwrap = OpsWrapper._unwrap  # a CSE variable from the value an ops.* call returns inside the kernel


def _indirect_arguments(index):
    """Loaded values an index reads (Inductor's indirect indexing names them after their CSE variables)."""
    names = sorted(s.name for s in index.free_symbols if s.name.startswith("tmp"))
    return "".join(f", {n}={n}" for n in names)


class NpusimOverrides(OpOverrides):
    @staticmethod
    def constant(value, dtype):
        return f"k.constant({_literal(value)}, {dtype})"

    @staticmethod
    def to_dtype(x, dtype, src_dtype=None, use_compute_types=True):
        return f"k.to_dtype({x}, {dtype})"

    @staticmethod
    def to_dtype_bitcast(x, dtype, src_dtype):
        return f"k.bitcast({x}, {dtype})"

    @staticmethod
    def index_expr(expr, dtype):
        index = V.kernel.prepare_indexing(expr)
        line = f"k.index({V.kernel.index_to_str(index)!r}, {dtype}{_indirect_arguments(index)})"
        return V.kernel.cse.generate(V.kernel.compute, line, dtype=dtype)

    @staticmethod
    def value_expr(expr, dtype):
        return NpusimOverrides.index_expr(expr, dtype)

    @staticmethod
    def masked(mask, body, other):
        with V.kernel.mask_loads(mask, other) as new_mask:
            result = _unwrap(body())
        # CSEProxy treats a PrivateUse1 device's kernels as Triton's and reads the dtype of what masked returns.
        return _unwrap(ops.where(new_mask, result, ops.constant(other, result.dtype)))

    @staticmethod
    def where(condition, a, b):
        return f"k.op('where', {_operand(condition)}, {_operand(a)}, {_operand(b)})"

    @staticmethod
    def rand(seed, offset):
        return f"k.random('rand', {seed}, {offset}, torch.float32)"

    @staticmethod
    def randn(seed, offset):
        return f"k.random('randn', {seed}, {offset}, torch.float32)"

    @staticmethod
    def randint64(seed, offset, low, high):
        return f"k.random('randint64', {seed}, {offset}, torch.int64, {_operand(low)}, {_operand(high)})"


# Inductor's infix names for the same operations
_ALIASES = {
    "and_": "bitwise_and",
    "or_": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}

for _name in _UNARY:
    setattr(NpusimOverrides, _name, staticmethod(lambda x, _n=_name: f"k.op({_n!r}, {_operand(x)})"))
for _name in _BINARY:
    setattr(
        NpusimOverrides,
        _name,
        staticmethod(lambda a, b, _n=_name: f"k.op({_n!r}, {_operand(a)}, {_operand(b)})"),
    )
for _alias, _name in _ALIASES.items():
    setattr(NpusimOverrides, _alias, NpusimOverrides.__dict__[_name])


def _is_static(tree):
    """Whether a range tree's size is a number (else the program takes it as an argument). Asked of the tree, never
    by `tree in trees`: range trees are dataclasses without fields, so any two of them compare equal."""
    return isinstance(tree.numel, (int, sympy.Integer))


class NpusimKernel(SIMDKernel):
    overrides = NpusimOverrides
    newvar_prefix = ""
    suffix = ""
    pexpr = staticmethod(_print)
    sexpr = staticmethod(_print)
    kexpr = staticmethod(_print)

    def should_use_persistent_reduction(self) -> bool:
        return True  # the kernel builder tiles whole rows; the program never loops over a reduction

    def dtype_to_str(self, dtype):
        return str(dtype)

    def codegen_iteration_ranges_entry(self, entry):
        self.indexing_code.writeline(
            f"k.range({entry.name!r}, {entry.prefix!r}, {self.index_to_str(entry.divisor)}, "
            f"{self.index_to_str(entry.length)})"
        )

    template_output = None  # (buffer name, the product's CSE variable) inside a GEMM template (gemm.py)
    launch_group = None  # inside a foreach group: the wrapper's LaunchTogether its call goes to (launch_together.py)

    def load(self, name, index):
        index = self.prepare_indexing(index)
        if self.template_output is not None and name == self.template_output[0]:
            line = f"k.product({self.template_output[1]}, {self.index_to_str(index)!r})"
            return self.cse.generate(self.compute, line, dtype=V.graph.get_dtype(name))
        buffer = self.args.input(name)
        dtype = V.graph.get_dtype(name)
        mask = ""
        if self._load_mask is not None:
            mask = f", mask={self._load_mask}, other={_literal(self._load_other or 0)}"
        indirect = _indirect_arguments(index)
        line = f"k.load({buffer!r}, {self.index_to_str(index)!r}, {dtype}{mask}{indirect})"
        # A masked or indirect load depends on values computed before it: keep it in program order.
        target = self.compute if mask or indirect else self.loads
        return self.cse.generate(target, line, dtype=dtype)

    def store(self, name, index, value, mode=None):
        buffer = self.args.output(name)
        index = self.prepare_indexing(index)
        dtype = V.graph.get_dtype(name)
        line = (
            f"k.store({buffer!r}, {self.index_to_str(index)!r}, {value}, {dtype}, mode={mode!r}"
            f"{_indirect_arguments(index)})"
        )
        self.stores.writeline(DeferredLine(name, line))

    def store_reduction(self, name, index, value):
        self.store(name, index, value)

    def reduction(self, dtype, src_dtype, reduction_type, value):
        key = (src_dtype, reduction_type, value)
        if key in self.cse.reduction_cache:
            return self.cse.reduction_cache[key]
        if reduction_type == "welford_reduce":
            result = self._welford_reduce(value, dtype)
        elif reduction_type == "welford_combine":
            result = self._welford_combine(*value, dtype)
        else:
            line = f"k.reduction({reduction_type!r}, {value}, {dtype})"
            result = self.cse.generate(self.compute, line, dtype=dtype)
        self.cse.reduction_cache[key] = result
        return result

    def _row_length(self, dtype):
        numel = self.range_trees[-1].numel
        if isinstance(numel, (int, sympy.Integer)):
            return ops.constant(float(numel), dtype)
        return ops.index_expr(numel, dtype)

    def _sum(self, value, dtype):
        return self.reduction(dtype, dtype, "sum", value)

    def _welford_reduce(self, value, dtype):
        """Mean, sum of squared deviations and count of a row, in two passes over it (the row is whole)."""
        count = _unwrap(self._row_length(dtype))
        mean = _unwrap(ops.truediv(self._sum(value, dtype), count))
        deviation = _unwrap(ops.sub(value, mean))
        return mean, self._sum(_unwrap(ops.mul(deviation, deviation)), dtype), count

    def _welford_combine(self, means, m2s, weights, dtype):
        """Chan's combination of partial (mean, M2, count) triples along the row."""
        total = self._sum(weights, dtype)
        mean = _unwrap(ops.truediv(self._sum(_unwrap(ops.mul(means, weights)), dtype), total))
        deviation = ops.sub(means, mean)
        spread = _unwrap(ops.add(m2s, ops.mul(weights, ops.mul(deviation, deviation))))
        return mean, self._sum(spread, dtype), total

    def check_bounds(self, expr, size, lower, upper):
        # An index read from a tensor (an embedding's token, a loss's target) must lie in [0, size): the kernel checks
        # it, and an index out of range raises IndexError as the eager operator does.
        if isinstance(expr, sympy.Symbol) and expr.name.startswith("tmp"):
            self.compute.writeline(f"k.check({expr.name}, {self.index_to_str(size)})")

    def device_assert_async(self, cond, msg):
        pass  # torch._assert_async's checks of values (one_hot's class range): the device has no trap to raise them

    def _argument_definitions(self):
        arg_defs, call_args, _, _ = self.args.python_argdefs()
        return [str(a.name) for a in arg_defs], call_args

    def _dynamic_numels(self):
        return [t for t in self.range_trees if not _is_static(t)]

    def codegen_kernel(self, name=None):
        names, _ = self._argument_definitions()
        size_names = list(self.args.sizevars.values())
        tensors = [n for n in names if n not in size_names]
        dynamic = [f"{t.prefix}numel" for t in self._dynamic_numels()]
        code = IndentedBuffer()
        code.writeline(f"ARGUMENTS = {tensors!r}")
        code.writeline(f"def program(k, {', '.join(size_names + dynamic)}):")
        with code.indent():
            for tree in self.range_trees:
                numel = _print(tree.numel) if _is_static(tree) else f"{tree.prefix}numel"
                code.writeline(f"k.tree({tree.prefix!r}, {numel})")
            code.splice(self.indexing_code)
            code.splice(self.loads)
            code.splice(self.compute)
            code.splice(self.stores)
        return code.getvalue()

    def call_kernel(self, name, node=None, deallocate_ws=True):
        wrapper = V.graph.wrapper_code
        for size in self.args.sizevars:
            wrapper.ensure_size_computed(size)
        _, call_args = self._argument_definitions()
        call_args = [str(a) for a in call_args]
        for tree in self._dynamic_numels():
            call_args.append(str(wrapper.generate_numel_expr(name, tree).inner))
        if self.launch_group is not None:  # a foreach group's call: launched with the group's others
            wrapper.writeline(f"{self.launch_group}.add({', '.join([name, *call_args])})")
        else:
            wrapper.generate_kernel_call(name, call_args, device=torch.device("npusim"), triton=False)


class NpusimScheduling(SIMDScheduling):
    kernel_type = NpusimKernel
    codegen_template = gemm.codegen_template

    def get_backend_features(self, device):
        return OrderedSet([BackendFeature.REDUCE_TO_SINGLE_ELEMENT, BackendFeature.FOREACH])

    def codegen_combo_kernel(self, combo_node):
        """A foreach group (a compiled optimizer's update of every parameter): each member is generated as its own
        kernel, and their calls go to one LaunchTogether, which launches those with the same program as one
        multi-tensor kernel. Buffers are freed after the group, as its members run together."""
        wrapper = V.graph.wrapper_code
        group = f"npusim_foreach_{wrapper.next_kernel_suffix()}"
        wrapper.writeline(f"{group} = npusim_launch_together({group!r})")
        NpusimKernel.launch_group = group
        try:
            for node in combo_node.get_subkernel_nodes():
                self.codegen_node(node)
        finally:
            NpusimKernel.launch_group = None
        wrapper.writeline(f"{group}.launch()")
        self.free_buffers_in_scheduler()

    def can_fuse_vertical(self, node1, node2):
        # A GEMM template's epilogue runs on 2-D blocks of the product, whose points are not consecutive in the space:
        # random numbers, drawn at consecutive stream positions, stay in a pointwise kernel of their own.
        if _contains(node1, lambda n: n.is_template()) and _contains(node2, _draws_random_numbers):
            return False
        return super().can_fuse_vertical(node1, node2)

    def free_buffers_in_scheduler(self):
        if NpusimKernel.launch_group is None:  # a foreach group's members free nothing until the group has run
            super().free_buffers_in_scheduler()

    @classmethod
    def get_tiling_and_scores(cls, node_schedule, numel, reduction_numel=sympy.S.One, coalesce_analysis=None):
        # One flat pointwise range and one flat reduced range: the kernel builder chooses tiles itself. The reduced
        # range stays even when it is 1, as the scheduler compares tilings with it to fuse a reduction's epilogue.
        return cls.create_tiling([numel], [reduction_numel]), None

    def define_kernel(self, src_code, node_schedule, kernel):
        wrapper = V.graph.wrapper_code
        if src_code in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[src_code]
        fused = _fused_name(node_schedule)
        kind = "red" if kernel.features.is_reduction() else "poi"
        name = f"npusim_{kind}_{fused}_{wrapper.next_kernel_suffix()}"
        wrapper.src_to_kernel[src_code] = name
        origins, detailed = get_kernel_metadata(node_schedule, wrapper)
        body = f"npusim_load_kernel({name!r}, {fused!r}, '''\n{src_code}''')"
        wrapper.define_kernel(name, body, f"{origins}\n{detailed}", gpu=False)
        return name


def _contains(node, test):
    return any(test(n) for n in node.get_nodes())


def _draws_random_numbers(node):
    body = getattr(node, "_body", None)
    return body is not None and any(body.has_op(op) for op in ("rand", "randn", "randint64", "load_seed"))


def _fused_name(node_schedule, limit=60):
    """The kernel's name in reports, as Inductor names Triton kernels (the aten ops fused, e.g. fused_add_exp_sum),
    shortened to `limit` characters."""
    name = get_fused_kernel_name(node_schedule, inductor_config.triton.descriptive_names)
    return name if len(name) <= limit else name[:limit].rsplit("_", 1)[0] + "_etc"
