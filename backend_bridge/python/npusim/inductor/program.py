"""A compiled kernel's program: the dataflow Inductor generated for one fused node group.

The kernel source Inductor writes for npusim is a Python function ``program(k, <size arguments>)`` whose body calls
the :class:`ProgramBuilder` ``k``: one call per range of the iteration space, per load, per operation, per
reduction and per store, in program order. Running it with the launch's sizes yields a :class:`Program`, which the
runtime turns into one npusim kernel (through the kernel builder) or, when the builder cannot express it, runs op by
op with the device's eager kernels (:mod:`npusim.inductor.interpreter`).

The iteration space is Inductor's: a flat pointwise range ``x`` and, for a reduction, a flat reduced range ``r0_``,
each split into the variables the index expressions use (``x0 = (xindex // d) % l``). :meth:`Program.space` refines
each range into dimensions in which every variable is a whole number of dimensions, so an index that is affine in
the variables is a strided view: an offset and one stride per dimension.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import math
from functools import cached_property

import sympy
import torch


@dataclasses.dataclass(frozen=True)
class Node:
    op: str  # "load", "store", "constant", "index", "reduction", "rand", ... or an elementwise op's name
    dtype: torch.dtype  # the value's (a store's: the value stored)
    inputs: tuple[int, ...] = ()
    attrs: tuple = ()  # (name, value) pairs, e.g. (("buffer", "in_ptr0"), ("index", "x0 + 4*r0_1"))

    def attr(self, name, default=None):
        return dict(self.attrs).get(name, default)


@dataclasses.dataclass(frozen=True)
class Access:
    """A load's or store's index, analysed: a strided view of the space (offset, strides), or None when the index
    is not affine in the range variables (it reads loaded values, or divides)."""

    offset: int
    strides: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Dimension:
    tree: str  # "x" or "r0_"
    size: int
    step: int  # the tree's flat index advances by `step` per unit of this dimension


class Value:
    """A node's result inside a program function."""

    __slots__ = ("id",)

    def __init__(self, node_id):
        self.id = node_id

    def __repr__(self):
        return f"v{self.id}"


# Ops whose result has their operands' (promoted) type; comparisons and logic give bools.
_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
_LOGICAL = {"logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "signbit"}


def _promote(dtypes):
    result = dtypes[0]
    for dtype in dtypes[1:]:
        result = torch.promote_types(result, dtype)
    return result


class Program:
    def __init__(self, name, arguments):
        self.name = name
        self.arguments = list(arguments)  # the kernel's tensor arguments, in call order
        self.trees: dict[str, int] = {}  # prefix -> numel, the pointwise tree first
        self.ranges: dict[str, tuple[str, int, int]] = {}  # variable -> (tree, divisor, length)
        self.nodes: list[Node] = []
        self.sizes: dict[str, int] = {}  # the size arguments (dynamic shapes' ks0, ...) by name, as launched

    def __repr__(self):
        lines = [f"program {self.name}: trees {self.trees}"]
        lines += [f"  v{i} = {n.op}{list(n.inputs)} {n.dtype} {dict(n.attrs)}" for i, n in enumerate(self.nodes)]
        return "\n".join(lines)

    @property
    def stored(self):
        """The arguments the program writes."""
        return {node.attr("buffer") for node in self.nodes if node.op == "store"}

    @property
    def reduction_tree(self):
        return next((t for t in self.trees if t.startswith("r")), None)

    @cached_property
    def space(self) -> list[Dimension]:
        """The iteration space as dimensions, outer first: the pointwise tree's, then the reduced tree's. Each
        tree is cut wherever one of its variables starts or ends, so that every variable spans whole dimensions."""
        dimensions = []
        for tree, numel in self.trees.items():
            cuts = {1, numel}
            for t, divisor, length in self.ranges.values():
                if t == tree and length > 1:
                    cuts |= {divisor, min(divisor * length, numel)}
            cuts = sorted(c for c in cuts if c <= numel)
            if not all(high % low == 0 for low, high in itertools.pairwise(cuts)):
                cuts = [1, numel]  # variables that overlap without nesting: their indices are not strided views
            tree_dims = [Dimension(tree, high // low, low) for low, high in itertools.pairwise(cuts)]
            dimensions += reversed(tree_dims) if tree_dims else [Dimension(tree, 1, 1)]
        return dimensions

    @property
    def reduced_dims(self):
        tree = self.reduction_tree
        return sum(1 for d in self.space if d.tree == tree) if tree else 0

    def variable_strides(self, variable):
        """How a variable moves with each dimension of the space (its value is the sum of index * stride), or None
        when it does not span whole dimensions."""
        tree, divisor, length = self.ranges[variable]
        high = min(divisor * length, self.trees[tree])
        steps = {d.step for d in self.space if d.tree == tree} | {self.trees[tree]}
        if length > 1 and (divisor not in steps or high not in steps):
            return None
        return [d.step // divisor if d.tree == tree and divisor <= d.step < high else 0 for d in self.space]

    def is_identity(self, access: Access) -> bool:
        """Whether a view reads element i of the space at flat index i (row-major over the pointwise range)."""
        expected = tuple(d.step if d.tree == "x" and d.size > 1 else 0 for d in self.space)
        actual = tuple(s if d.size > 1 else 0 for s, d in zip(access.strides, self.space, strict=True))
        return access.offset == 0 and actual == expected

    def access(self, node: Node) -> Access | None:
        """The node's index as a strided view of the space, or None when it is not one."""
        return _analyse_index(self, node.attr("index"))


def _analyse_index(program, index):
    symbols = {name: sympy.Symbol(name, integer=True, nonnegative=True) for name in program.ranges}
    sizes = {name: sympy.Integer(value) for name, value in program.sizes.items()}
    try:
        expr = sympy.expand(sympy.sympify(index, locals={**sizes, **symbols}))
    except (sympy.SympifyError, SyntaxError, TypeError):
        return None
    if not expr.free_symbols <= set(symbols.values()):
        return None  # reads loaded values (indirect indexing)
    try:
        poly = sympy.Poly(expr, *symbols.values()) if symbols else None
    except sympy.PolynomialError:
        return None  # floor division or modulo left in the index
    if poly is not None and poly.total_degree() > 1:
        return None
    offset = expr.subs({s: 0 for s in symbols.values()})
    if not offset.is_Integer:
        return None
    strides = [0] * len(program.space)
    for name, symbol in symbols.items():
        coefficient = expr.coeff(symbol)
        if coefficient == 0:
            continue
        variable_strides = program.variable_strides(name)
        if not coefficient.is_Integer or variable_strides is None:
            return None
        for k, s in enumerate(variable_strides):
            strides[k] += int(coefficient) * s
    return Access(int(offset), tuple(strides))


class ProgramBuilder:
    """What a kernel's program function calls: each call appends a node and returns its Value."""

    def __init__(self, name, arguments):
        self.program = Program(name, arguments)

    def _add(self, op, dtype, inputs=(), **attrs):
        self.program.nodes.append(
            Node(op, dtype, tuple(v.id for v in inputs), tuple(sorted(attrs.items(), key=lambda kv: kv[0])))
        )
        return Value(len(self.program.nodes) - 1)

    def _dtype(self, value):
        return self.program.nodes[value.id].dtype

    # the iteration space
    def tree(self, prefix, numel):
        self.program.trees[prefix] = int(numel)

    def range(self, name, tree, divisor, length):
        self.program.ranges[name] = (tree, int(divisor), int(length))

    # data
    def load(self, buffer, index, dtype, mask=None, other=None, **indirect):
        inputs = [mask] if mask is not None else []
        names = sorted(indirect)
        inputs += [indirect[n] for n in names]
        return self._add(
            "load",
            dtype,
            inputs,
            buffer=buffer,
            index=index,
            masked=mask is not None,
            other=other,
            indirect=tuple(names),
        )

    def store(self, buffer, index, value, dtype, mode=None, **indirect):
        names = sorted(indirect)
        inputs = [value] + [indirect[n] for n in names]
        self._add("store", dtype, inputs, buffer=buffer, index=index, mode=mode, indirect=tuple(names))

    def check(self, value, size):
        """An index read from a tensor, which must lie in [0, size)."""
        self._add("check_bounds", self._dtype(value), [value], size=int(size))

    def constant(self, value, dtype):
        return self._add("constant", dtype, value=value)

    def index(self, expr, dtype, **indirect):
        names = sorted(indirect)
        return self._add("index", dtype, [indirect[n] for n in names], index=expr, indirect=tuple(names))

    def op(self, name, *operands):
        values = [v for v in operands if isinstance(v, Value)]
        if len(values) != len(operands):
            raise TypeError(f"{self.program.name}: operation {name} takes values, got {operands!r}")
        dtypes = [self._dtype(v) for v in values]
        if name in _COMPARISONS or name in _LOGICAL:
            dtype = torch.bool
        elif name == "where":
            dtype = _promote(dtypes[1:])
        else:
            dtype = _promote(dtypes)
        return self._add(name, dtype, values)

    def to_dtype(self, value, dtype):
        return self._add("to_dtype", dtype, [value])

    def bitcast(self, value, dtype):
        return self._add("bitcast", dtype, [value])

    def reduction(self, kind, value, dtype, part=None):
        return self._add("reduction", dtype, [value] if isinstance(value, Value) else list(value), kind=kind, part=part)

    def matmul(self, a, b, sizes, views, dtype):
        """The product of two (batches of) matrices over the pointwise range, in row-major order: sizes are
        (batch, m, n, k), views the operands' (offset, batch stride, row stride, column stride) in elements."""
        batch, m, n, _ = (int(s) for s in sizes)
        # The product's rows and columns are dimensions of the space (however the epilogue splits it).
        self.range("__product_batch", "x", m * n, batch)
        self.range("__product_row", "x", n, m)
        self.range("__product_column", "x", 1, n)
        return self._add(
            "matmul", dtype, a=a, b=b, sizes=tuple(int(s) for s in sizes), views=tuple(int(v) for v in views)
        )

    def product(self, value, index):
        """The product read at `index` (its elements in row-major order over the pointwise range)."""
        return self._add("product", self._dtype(value), [value], index=index)

    def random(self, kind, seed, offset, dtype, low=None, high=None):
        inputs = [seed, offset] + [v for v in (low, high) if v is not None]
        return self._add("random", dtype, inputs, kind=kind)


def build(name, function, arguments, sizes):
    """Runs a kernel's program function for these sizes."""
    builder = ProgramBuilder(name, arguments)
    program = builder.program
    program.sizes = dict(zip(list(inspect.signature(function).parameters)[1:], sizes, strict=True))
    function(builder, *sizes)
    reduces = any(node.op == "reduction" for node in program.nodes)
    for tree in [t for t in program.trees if t.startswith("r") and program.trees[t] == 1 and not reduces]:
        del program.trees[tree]  # a pointwise kernel's reduced range of one element
    for tree, numel in list(program.trees.items()):  # the flat indices are variables too
        program.ranges.setdefault(f"{tree}index", (tree, 1, numel))
    _derived_variables(program)
    _mask_periods(program)
    return program


def _derived_variables(program):
    """Rewrites ``v // d``, ``v % l`` and ``(v // d) % l`` of a range variable v, where they select whole digits of
    it, as range variables of their own (the heads of a reshaped tensor, a position modulo the sequence length), so
    that the index is affine again. An index that keeps a division or modulo stays as Inductor printed it."""
    names = {name: sympy.Symbol(name, integer=True, nonnegative=True) for name in program.ranges}
    sizes = {name: sympy.Integer(value) for name, value in program.sizes.items()}
    derived = {}  # (tree, divisor, length) -> symbol

    def variable(tree, divisor, length):
        key = (tree, divisor, length)
        if key not in derived:
            name = f"__digit{len(derived)}"
            derived[key] = sympy.Symbol(name, integer=True, nonnegative=True)
            program.ranges[name] = key
        return derived[key]

    def digit(expr):
        """(v // d) % l of a variable v, as (v, d, l); None for another expression."""
        divisor, modulus = 1, None
        if isinstance(expr, sympy.Mod) and expr.args[1].is_Integer:
            expr, modulus = expr.args[0], int(expr.args[1])
        if isinstance(expr, sympy.floor) and expr.args[0].is_Mul:
            quotient = expr.args[0]
            symbols = [a for a in quotient.args if a.is_Symbol]
            rationals = [a for a in quotient.args if a.is_Rational]
            if len(symbols) == 1 and len(rationals) == 1 and rationals[0].p == 1:
                expr, divisor = symbols[0], int(rationals[0].q)
        if not expr.is_Symbol or expr.name not in program.ranges or (divisor == 1 and modulus is None):
            return None
        tree, base, length = program.ranges[expr.name]
        length = min(length, -(-program.trees[tree] // base))
        count = -(-length // divisor) if modulus is None else modulus
        if length % divisor or (modulus is not None and (length // divisor) % modulus):
            return None
        return variable(tree, base * divisor, count)

    rewritten = []
    for node in program.nodes:
        index = node.attr("index")
        if index is None or ("//" not in index and "%" not in index):
            rewritten.append(node)
            continue
        try:
            expr = sympy.sympify(index, locals={**sizes, **names})
        except (sympy.SympifyError, SyntaxError, TypeError):
            rewritten.append(node)
            continue
        replaced = expr.replace(lambda e: isinstance(e, (sympy.Mod, sympy.floor)) and digit(e) is not None, digit)
        try:  # only an index left affine is rewritten (one with min, max or a remaining division is not)
            sympy.Poly(replaced, *replaced.free_symbols)
        except sympy.PolynomialError:
            rewritten.append(node)
            continue
        attrs = tuple((k, str(replaced) if k == "index" else v) for k, v in node.attrs)
        rewritten.append(dataclasses.replace(node, attrs=attrs))
    program.nodes = rewritten


def mask_range(program, number):
    """A mask that is a range of one range variable, lo <= v < hi, as (v, lo, hi); None for another mask."""
    node = program.nodes[number]
    if node.op in ("bitwise_and", "logical_and"):
        ranges = [mask_range(program, i) for i in node.inputs]
        if None in ranges or ranges[0][0] != ranges[1][0]:
            return None
        return ranges[0][0], max(ranges[0][1], ranges[1][1]), min(ranges[0][2], ranges[1][2])
    if node.op not in ("lt", "le", "gt", "ge"):
        return None
    a, b = (program.nodes[i] for i in node.inputs)
    op = node.op
    if a.op == "constant":  # c < v is v > c
        a, b, op = b, a, {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[op]
    name = a.attr("index") if a.op == "index" and not a.attr("indirect") else None
    if name not in program.ranges or b.op != "constant" or not isinstance(b.attr("value"), int):
        return None
    length, bound = program.ranges[name][2], b.attr("value")
    lo, hi = {"lt": (0, bound), "le": (0, bound + 1), "gt": (bound + 1, length), "ge": (bound, length)}[op]
    return name, max(lo, 0), min(hi, length)


def _mask_periods(program):
    """Cuts the space where a masked load's range mask lo <= v < hi repeats, when hi - lo divides lo and v's length
    (cat's equal parts): a variable v % (hi - lo) of its own, so that the load's view where the mask holds is a
    strided view (lowering.py's _under_mask). Added only where the cuts still nest."""
    for node in list(program.nodes):
        if node.op != "load" or not node.attr("masked"):
            continue
        found = mask_range(program, node.inputs[0])
        if found is None:
            continue
        name, lo, hi = found
        tree, divisor, length = program.ranges[name]
        period = hi - lo
        if period < 1 or period >= length or lo % period or length % period:
            continue
        candidate = (tree, divisor, period)
        if candidate in program.ranges.values():
            continue
        trial = {**program.ranges, f"__period{len(program.ranges)}": candidate}
        cuts = {1, program.trees[tree]}
        for t, d, n in trial.values():
            if t == tree and n > 1:
                cuts |= {d, min(d * n, program.trees[tree])}
        cuts = sorted(c for c in cuts if c <= program.trees[tree])
        if all(high % low == 0 for low, high in itertools.pairwise(cuts)):
            program.ranges.update(trial)


def numel(program):
    return math.prod(program.trees.values())
