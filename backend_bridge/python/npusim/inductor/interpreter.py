"""Runs a compiled kernel's program op by op with the device's eager kernels.

The way a fused group runs when the kernel builder cannot express it as one kernel (an index that gathers through
loaded values, a masked load, an index used as data, a random draw, a reduction the vector engine lacks): every
node becomes an eager npusim operation on whole tensors, so the group still runs on the simulated NPU, unfused, with
the results eager mode would give. Values are tensors broadcastable to the iteration space (Program.space); a
reduction keeps its reduced dimensions as size 1.
"""

from __future__ import annotations

import math
import operator

import torch

from .program import Program


def _floordiv(a, b):
    if isinstance(a, torch.Tensor) and not a.is_floating_point():
        return torch.floor_divide(a, b)  # Python's // on integers (npusim has the integer kernel)
    return torch.div(a, b, rounding_mode="floor")


def _extremum(function, pick):
    """maximum/minimum: PyTorch's for floats (NaN propagates), compare-and-select for integers (npusim's kernels)."""

    def apply(a, b):
        if a.is_floating_point() or b.is_floating_point():
            return function(a, b)
        return torch.where(pick(a, b), a, b)

    return apply


def _abs(value):
    """PyTorch's abs for floats, compare-and-select for integers (npusim has no integer abs kernel)."""
    if not isinstance(value, torch.Tensor):
        return abs(value)  # a plain number in a printed index
    if value.is_floating_point():
        return torch.abs(value)
    return torch.where(value < 0, value * -1, value)


def _commutative_on_the_device(function):
    """logical_and/or/xor make their result on their first operand's device: a host scalar (a constant) goes second."""

    def apply(a, b):
        return function(b, a) if a.device.type == "cpu" and b.device.type != "cpu" else function(a, b)

    return apply


def _where(condition, a, b):
    """npusim's where takes host scalars as values but not as the condition (one of constants alone stays on the
    host): such a condition moves to the values' device."""
    devices = [value.device for value in (a, b) if value.device.type != "cpu"]
    if condition.device.type == "cpu" and devices:
        condition = condition.to(devices[0])
    return torch.where(condition, a, b)


def _truncdiv(a, b):
    return torch.div(a, b, rounding_mode="trunc")


_OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "truediv": torch.true_divide,
    "div": torch.true_divide,
    "floordiv": _floordiv,
    "truncdiv": _truncdiv,
    "int_truediv": torch.true_divide,
    "mod": torch.remainder,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "maximum": _extremum(torch.maximum, torch.gt),
    "minimum": _extremum(torch.minimum, torch.lt),
    "atan2": torch.atan2,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
    "hypot": torch.hypot,
    "neg": torch.neg,
    "abs": _abs,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "sigmoid": torch.sigmoid,
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "round": torch.round,
    "trunc": torch.trunc,
    "sign": torch.sign,
    "signbit": torch.signbit,
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "reciprocal": torch.reciprocal,
    "where": _where,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": _commutative_on_the_device(torch.logical_and),
    "logical_or": _commutative_on_the_device(torch.logical_or),
    "logical_xor": _commutative_on_the_device(torch.logical_xor),
    "logical_not": torch.logical_not,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "bitwise_not": torch.bitwise_not,
    "bitwise_left_shift": operator.lshift,
    "bitwise_right_shift": operator.rshift,
}


class UnsupportedNode(NotImplementedError):
    """A node the interpreter has no eager operation for; the message names the kernel and the node."""


class Interpreter:
    """Runs one launch. `cache` keeps, from one launch of the same program on the same device to the next, what
    depends only on the sizes: the space's variables, index tensors that read no loaded value, constants."""

    def __init__(self, program: Program, tensors, device, cache=None):
        self.program = program
        self.tensors = dict(zip(program.arguments, tensors, strict=True))
        self.device = device
        self.shape = [d.size for d in program.space]
        self.reduced = list(range(len(self.shape) - program.reduced_dims, len(self.shape)))
        self.values = {}  # node number -> its value
        self.cache = {} if cache is None else cache
        self.number = 0  # the node running

    def cached(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def run(self, numbers=None):
        """Runs the program's nodes (or only `numbers`, in order) and returns their values by number."""
        for number in range(len(self.program.nodes)) if numbers is None else numbers:
            node = self.program.nodes[number]
            self.number = number
            try:
                self.values[number] = self.evaluate(node)
            except UnsupportedNode:
                raise
            except (RuntimeError, TypeError, ValueError) as error:
                raise type(error)(
                    f"compiled kernel {self.program.name}, node v{number} ({node.op}): {error}"
                ) from error
        return self.values

    def operands(self, node):
        return [self.values[i] for i in node.inputs]

    def evaluate(self, node):
        if node.op in _OPS:
            return _OPS[node.op](*self.operands(node))
        method = getattr(self, "_" + node.op, None)
        if method is None:
            raise UnsupportedNode(f"compiled kernel {self.program.name}: no eager operation for {node.op!r}")
        return method(node)

    # the iteration space's variables, as int64 tensors broadcast over the space
    def variable(self, name):
        return self.cached(("variable", name), lambda: self._make_variable(name))

    def _make_variable(self, name):
        tree, divisor, length = self.program.ranges[name]
        flat = torch.zeros((), dtype=torch.int64, device=self.device)
        for k, dim in enumerate(self.program.space):
            if dim.tree == tree and dim.size > 1:
                shape = [1] * len(self.shape)
                shape[k] = dim.size
                steps = torch.arange(dim.size, dtype=torch.int64, device=self.device) * dim.step
                flat = flat + steps.reshape(shape)
        return _floordiv(flat, divisor) % length if length > 0 else flat

    def index_tensor(self, node, first_indirect):
        if not node.attr("indirect"):  # a function of the sizes alone: computed once
            return self.cached(("index", self.number), lambda: self._evaluate_index(node, first_indirect))
        return self._evaluate_index(node, first_indirect)

    def _evaluate_index(self, node, first_indirect):
        names = _Names(self)
        for k, name in enumerate(node.attr("indirect")):
            names[name] = self.values[node.inputs[first_indirect + k]].to(torch.int64)
        value = eval(node.attr("index"), {"__builtins__": {}}, names)  # the index is Inductor's printed expression
        if not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=torch.int64, device=self.device)
        return value

    def _elementwise(self, function):
        """min and max of Inductor's printed indices, over index tensors or plain integers."""

        def apply(*values):
            tensors = [v if isinstance(v, torch.Tensor) else torch.tensor(v, device=self.device) for v in values]
            result = tensors[0]
            for other in tensors[1:]:
                result = function(result, other)
            return result

        return apply

    def flat(self, tensor):
        """The tensor's memory from its first element on, as one dimension (Inductor indexes from the data
        pointer)."""
        extent = tensor.untyped_storage().nbytes() // tensor.element_size() - tensor.storage_offset()
        return tensor.as_strided((extent,), (1,), tensor.storage_offset())

    def per_row(self, access):
        return bool(self.reduced) and all(access.strides[k] == 0 for k in self.reduced)

    def view(self, tensor, access, per_row):
        shape, strides = list(self.shape), list(access.strides)
        if per_row:
            for k in self.reduced:
                shape[k] = 1
        return tensor.as_strided(shape, strides, tensor.storage_offset() + access.offset)

    def _load(self, node):
        tensor = self.tensors[node.attr("buffer")]
        access = self.program.access(node)
        if access is not None and not node.attr("masked"):
            if not any(access.strides):  # one element everywhere: a scalar (on the host if the tensor is)
                return tensor.as_strided((), (), tensor.storage_offset() + access.offset)
            return self.view(tensor, access, self.per_row(access))
        masked = node.attr("masked")
        index = self.index_tensor(node, 1 if masked else 0)
        if masked:
            mask = self.values[node.inputs[0]]
            index = torch.where(mask, index, torch.zeros_like(index))
        value = self.flat(tensor)[index.reshape(-1)].reshape(index.shape)
        if masked:
            other = node.attr("other") or 0
            value = torch.where(mask, value, torch.tensor(other, dtype=value.dtype, device=self.device))
        return value

    def _store(self, node):
        value, *_ = self.operands(node)
        tensor = self.tensors[node.attr("buffer")]
        access = self.program.access(node)
        value = value.to(tensor.dtype)
        if access is not None and node.attr("mode") is None:
            per_row = self.per_row(access)
            if per_row:  # a value constant along each row (the program says so by its index): its first element
                for k in self.reduced:
                    if k < value.dim() and value.shape[k] > 1:
                        value = value.narrow(k, 0, 1)
            view = self.view(tensor, access, per_row)
            view.copy_(value.expand(view.shape))
            return None
        index = self.index_tensor(node, 1)
        shape = torch.broadcast_shapes(index.shape, value.shape)
        self.flat(tensor).index_put_(
            (index.expand(shape).reshape(-1),),
            value.expand(shape).reshape(-1),
            accumulate=node.attr("mode") == "atomic_add",
        )
        return None

    def _check_bounds(self, node):
        (value,) = self.operands(node)
        if torch.logical_or(value < 0, value >= node.attr("size")).any().item():
            raise IndexError(f"compiled kernel {self.program.name}: index out of range in self")
        return None

    def _constant(self, node):
        # A host scalar, as eager mode's Python numbers are: device operations take it without a copy, and
        # operations of constants alone stay host arithmetic.
        return self.cached(("constant", self.number), lambda: torch.tensor(node.attr("value"), dtype=node.dtype))

    def _index(self, node):
        index = self.index_tensor(node, 0)
        # Inductor asks for int32 only when it proved the values fit; int64 holds them as exactly (npusim narrows
        # integers by saturating, PyTorch by wrapping, so the narrowing itself would take the CPU fallback).
        return index if node.dtype in (torch.int32, torch.int64) else index.to(node.dtype)

    def _to_dtype(self, node):
        return self.operands(node)[0].to(node.dtype)

    def _bitcast(self, node):
        return self.operands(node)[0].view(node.dtype)

    def _reduction(self, node):
        (value,) = self.operands(node)
        kind = node.attr("kind")
        value = value.expand(self.shape) if list(value.shape) != self.shape else value
        dims = self.reduced
        if kind == "sum" and not node.dtype.is_floating_point:  # exact, through npusim's integer scan
            return _over_rows(value.to(node.dtype), dims, lambda v: v.cumsum(-1).narrow(-1, v.shape[-1] - 1, 1))
        if kind == "sum":
            return value.sum(dims, keepdim=True, dtype=node.dtype)
        if kind == "prod":
            return _over_rows(value, dims, lambda v: v.prod(-1, keepdim=True)).to(node.dtype)
        if kind == "max":
            return value.amax(dims, keepdim=True)
        if kind == "min":
            return value.amin(dims, keepdim=True)
        if kind == "any":
            return value.to(torch.bool).any(dim=tuple(dims), keepdim=True) if dims else value.to(torch.bool)
        if kind in ("argmax", "argmin"):
            pick = torch.argmax if kind == "argmax" else torch.argmin
            return _over_rows(value, dims, lambda v: pick(v, -1, keepdim=True)).to(node.dtype)
        raise UnsupportedNode(f"compiled kernel {self.program.name}: reduction {kind!r}")

    def _matmul(self, node):
        batch, m, n, k = node.attr("sizes")
        a_offset, a_batch, a_row, a_col, b_offset, b_batch, b_row, b_col = node.attr("views")
        a, b = self.tensors[node.attr("a")], self.tensors[node.attr("b")]
        a = a.as_strided((batch, m, k), (a_batch, a_row, a_col), a.storage_offset() + a_offset)
        b = b.as_strided((batch, k, n), (b_batch, b_row, b_col), b.storage_offset() + b_offset)
        pointwise = [d.size for d in self.program.space if d.tree == "x"]
        return torch.bmm(a, b).reshape(pointwise + [1] * self.program.reduced_dims)

    def _product(self, node):
        (value,) = self.operands(node)
        access = self.program.access(node)
        if access is not None and self.program.is_identity(access):
            return value
        index = self.index_tensor(node, 1)
        return value.reshape(-1)[index.reshape(-1)].reshape(index.shape)

    def _random(self, node):
        seed, offset, *bounds = self.operands(node)
        generator = torch.Generator(device=self.device)
        generator.manual_seed(int(seed.reshape(-1)[0].item()))
        offset = offset.to(torch.int64)
        count = int(offset.max().item()) + 1 if offset.numel() else 0
        kind = node.attr("kind")
        if kind == "randint64":
            low, high = (int(b.reshape(-1)[0].item()) for b in bounds)
            table = torch.randint(low, high, (count,), generator=generator, device=self.device)
        else:
            draw = torch.rand if kind == "rand" else torch.randn
            table = draw((count,), generator=generator, device=self.device, dtype=torch.float32)
        return table[offset.reshape(-1)].reshape(offset.shape).to(node.dtype)


class _Names(dict):
    """What an index expression names: sizes, the space's variables (made when first named), min, max and abs."""

    def __init__(self, interpreter):
        super().__init__(interpreter.program.sizes)
        self.interpreter = interpreter
        # min, max and abs through compare-and-select, which npusim has for int64 (an index's type)
        smaller = interpreter._elementwise(lambda a, b: torch.where(a < b, a, b))
        larger = interpreter._elementwise(lambda a, b: torch.where(a > b, a, b))
        self.update(min=smaller, max=larger, Min=smaller, Max=larger, abs=_abs)

    def __missing__(self, name):
        if name not in self.interpreter.program.ranges:
            raise KeyError(name)
        return self.interpreter.variable(name)


def _over_rows(value, dims, reduce):
    """Applies a last-dimension reduction over the reduced dimensions (the trailing ones), flattened into one."""
    if not dims:
        return reduce(value.unsqueeze(-1)).squeeze(-1)
    outer = list(value.shape[: dims[0]])
    flat = value.reshape(outer + [math.prod(value.shape[dims[0] :])])
    return reduce(flat).reshape(outer + [1] * len(dims))


def run(program: Program, tensors, device, cache=None, numbers=None):
    """Runs the program (or the nodes `numbers` of it) on the tensors; returns the values by node number."""
    return Interpreter(program, tensors, device, cache).run(numbers)
