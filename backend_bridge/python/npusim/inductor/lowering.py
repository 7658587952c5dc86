"""Lowers a compiled kernel's Program to the fused-kernel emitter's spec (backend_bridge/emitter/.../fused.h).

The emitter takes strided loads and stores, the vector engine's operations on f32/f16/bf16/i32/i64/bool values,
sum/max/min reductions over whole rows, and loads and scatter-adds by element index (dma.ldx, dma.stxadd). An index
that reads loaded values (an embedding's rows, a loss's targets), a masked load (cat, padding), an index that is not a
strided view and an atomic-add store (an embedding's gradient) become element indices computed in the kernel and
checked before the indexed DMA (see :func:`lower`). A program with anything else (an index not affine in the loaded
values, a plain store by index, a random draw at another position than the point's index, another reduction, a dtype
the chip lacks) is not lowered:
:func:`lower` says why, and the runtime interprets it instead.
"""

from __future__ import annotations

import itertools
import math

import sympy
import torch

from . import interpreter
from .program import Access, Program, _analyse_index, mask_range
from .staging import transposed_loads

_TYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "bool",
    torch.int8: "i8",
    torch.uint8: "u8",
}

_UNARY = {
    "neg": "Neg",
    "abs": "Abs",
    "exp": "Exp",
    "log": "Log",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "erf": "Erf",
    "sqrt": "Sqrt",
    "rsqrt": "Rsqrt",
    "reciprocal": "Reciprocal",
    "sin": "Sin",
    "cos": "Cos",
    "log1p": "Log1p",
    "expm1": "Expm1",
    "floor": "Floor",
    "ceil": "Ceil",
    "round": "Round",
    "trunc": "Trunc",
    "logical_not": "Not",
}
_BINARY = {
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "fmod": "Fmod",
    "maximum": "Maximum",
    "minimum": "Minimum",
    "eq": "Eq",
    "ne": "Ne",
    "lt": "Lt",
    "le": "Le",
    "gt": "Gt",
    "ge": "Ge",
    "logical_and": "And",
    "logical_or": "Or",
    "logical_xor": "Xor",
    "bitwise_and": "And",
    "bitwise_or": "Or",
    "bitwise_xor": "Xor",
}
_REDUCTIONS = {
    "sum": "ReduceSum",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "argmax": "ReduceArgMax",  # the first index along the flattened reduced dimensions, a NaN counting as the extremum
    "argmin": "ReduceArgMin",
}


# (from, to): every value of `from` is exactly a value of `to`, so that converting there and back gives it unchanged.
_EXACT_WIDENINGS = {("bool", t) for t in ("i8", "u8", "i32", "i64", "f16", "bf16", "f32")}
_EXACT_WIDENINGS |= {(s, t) for s in ("i8", "u8") for t in ("i32", "i64", "f16", "bf16", "f32")}
_EXACT_WIDENINGS |= {("i32", "i64"), ("f16", "f32"), ("bf16", "f32")}


def _without_round_trip(nodes, operand, to):
    """The spec node a conversion of `operand` to type `to` can read instead of converting: the operand itself when
    it is of that type, or what it converted when it widened a value of that type exactly (Inductor's `any` takes a
    bool mask to int64 and back), else None."""
    if nodes[operand][1] == to:
        return operand
    op, widened, source = nodes[operand][:3]
    if op == "Convert" and nodes[source][1] == to and (to, widened) in _EXACT_WIDENINGS:
        return source
    return None


def _times_one(nodes, op, operands, result_type):
    """The spec node a product with the constant 1 equals exactly (x * 1 is x, -0 and infinities included), so that
    the kernel does not compute it: Inductor's lerp multiplies its weight by 1.0, in every Adam step. Else None."""
    if op != "mul" or min(operands) < 0:  # (negative: a value the kernel does not compute as a node)
        return None
    a, b = operands
    for constant, other in ((a, b), (b, a)):
        if nodes[constant][0] == "Constant" and nodes[constant][6] == 1.0 and nodes[other][1] == result_type:
            return other
    return None


class NotLowered(Exception):
    """Why a program is not one fused kernel."""


def lower(program: Program, host_arguments=frozenset(), extents=None):
    """The spec description npusim._C.FusedSpec takes, the index tables the kernel reads besides the program's
    arguments (see :func:`_index_load`), the host scalars it reads (see :func:`_host_scalars`) and the element index
    tables computed on the host (see :func:`_host_index_table`), and the loads the launch copies into the kernel's
    order first, the last arguments (see :func:`staging.transposed_loads`); or raises NotLowered. `extents` gives, per
    argument, the elements from its first one to the end of its storage: an indexed access must stay within them."""
    extents = extents or {}
    skipped, hoisted, host_nodes = _host_scalars(program, host_arguments)
    loads, stores, nodes = [], [], []
    tables = {}  # int64 or float32 -> elements: 0, 1, 2, ... the launch appends to the arguments
    host_tables = []  # int64 CPU tensors over the space (element indices), appended after the aranges
    checked = {}  # program node -> the spec node of its value once checked against a dimension (CheckIndex)
    ids = {}  # program node -> spec node
    matmul = None
    space = _product_space(program)

    def type_of(dtype):
        if dtype not in _TYPES:
            raise NotLowered(f"dtype {dtype}")
        return _TYPES[dtype]

    def access(node, found=None):
        found = found or program.access(node)
        if found is None or node.attr("indirect"):
            raise NotLowered(f"index {node.attr('index')!r} is not a strided view")
        if space is not None:
            found = _coarsen(program, found, space)
        if node.attr("buffer") not in program.arguments:
            raise NotLowered(f"buffer {node.attr('buffer')}")
        return (program.arguments.index(node.attr("buffer")), type_of(node.dtype), found.offset, list(found.strides))

    def emit(op, dtype, operands=(), access_index=-1, constant=0.0):
        if op == "Convert":
            unconverted = _without_round_trip(nodes, operands[0], type_of(dtype))
            if unconverted is not None:
                return unconverted
        a, b, c = (list(operands) + [-1, -1, -1])[:3]
        nodes.append((op, type_of(dtype), a, b, c, access_index, float(constant)))
        return len(nodes) - 1

    def table_load(table, dtype, found):
        loads.append((table, type_of(dtype), found.offset, list(found.strides)))
        return emit("Load", dtype, access_index=len(loads) - 1)

    def affine_index(found):
        """The element index `found` (a strided view of the space) as a value: a load from the int64 arange, or a
        host table when a stride is negative."""
        if any(s < 0 for s in found.strides):
            return None
        if not any(found.strides):
            return emit("Constant", torch.int64, constant=found.offset)
        extent = sum(s * (d.size - 1) for s, d in zip(found.strides, program.space, strict=True)) + 1
        tables[torch.int64] = max(tables.get(torch.int64, 0), extent)
        table = len(program.arguments) + list(tables).index(torch.int64)
        value = table_load(table, torch.int64, Access(0, found.strides))
        if found.offset != 0:
            value = emit("Add", torch.int64, [value, emit("Constant", torch.int64, constant=found.offset)])
        return value

    def element_index(node, first_indirect):
        """The spec node of the element index each point of `node` (a load or store) reads or writes: the part
        affine in the space (or any function of it, tabled on the host), plus a constant times each loaded value
        the index reads."""
        base, coefficients = _split_index(program, node)
        found = _analyse_index(program, base)
        value = affine_index(found) if found is not None else None
        if value is None:
            host_tables.append(_host_index_table(program, node.attr("index"), node.attr("indirect")))
            value = table_load(("host", len(host_tables) - 1), torch.int64, Access(0, _contiguous(program)))
        for name, number in zip(node.attr("indirect"), node.inputs[first_indirect:], strict=True):
            loaded = checked.get(number, ids[number])
            if program.nodes[number].dtype != torch.int64:
                loaded = emit("Convert", torch.int64, [loaded])
            if coefficients[name] != 1:
                loaded = emit("Mul", torch.int64, [loaded, emit("Constant", torch.int64, constant=coefficients[name])])
            value = emit("Add", torch.int64, [value, loaded])
        return value

    def indexed_access(node, first_indirect, mask=None):
        """(the access, its checked element indices, the run length of a load) of an indexed load or store; masked
        points read element 0."""
        if space is not None:
            raise NotLowered("an indexed load or store in a product's epilogue")
        buffer = node.attr("buffer")
        if buffer not in program.arguments:
            raise NotLowered(f"buffer {buffer}")
        extent = extents.get(buffer, 0)
        if extent < 1:
            raise NotLowered(f"an indexed access of {buffer}, whose extent is unknown or empty")
        index = element_index(node, first_indirect)
        if mask is not None:
            index = emit("Where", torch.int64, [mask, index, emit("Constant", torch.int64)])
        index = emit("CheckIndex", torch.int64, [index], constant=extent)
        dims = len(program.space)
        run = 1 if mask is not None else _run_length(program, node, first_indirect)
        return (program.arguments.index(buffer), type_of(node.dtype), 0, [0] * dims), index, run

    point_masks = _point_masks(program) if space is None else set()
    positions = _random_positions(program) if space is None else {}
    for number, node in enumerate(program.nodes):
        if number in positions:
            ids[number] = -3  # a random number's position: the point's index, which the kernel knows
            continue
        if number in skipped:
            ids[number] = -2  # host arithmetic feeding a hoisted value: not in the kernel
            continue
        if number in point_masks:
            table, strides = _host_mask_table(program, number)
            host_tables.append(table)
            ids[number] = table_load(("host", len(host_tables) - 1), torch.bool, Access(0, strides))
            continue
        if number in hoisted and space is None:
            # An Argument node: the value travels in the argument block (its entry is numbered below).
            nodes.append(("Argument", "f32", -1, -1, -1, -1, 0.0, -1 - hoisted.index(number)))
            ids[number] = len(nodes) - 1
            continue
        if number in hoisted:  # a GEMM epilogue reads it from a small tensor of the hoisted values
            dims = len(space)
            loads.append((-1, "f32", hoisted.index(number), [0] * dims))  # the argument is numbered below
            ids[number] = emit("Load", torch.float32, access_index=len(loads) - 1)
            continue
        operands = [ids[i] for i in node.inputs]
        if None in operands and node.op != "product":
            raise NotLowered("the product used other than through Product")
        if node.op == "load" and not node.attr("masked") and not node.attr("indirect") and program.access(node):
            loads.append(access(node))
            ids[number] = emit("Load", node.dtype, access_index=len(loads) - 1)
        elif node.op == "load":
            mask = ids[node.inputs[0]] if node.attr("masked") else None
            found = program.access(node) if not node.attr("indirect") and mask is not None else None
            if found is not None and space is None:
                found = _under_mask(program, node, found)
            if found is not None and _within(program, found, extents.get(node.attr("buffer"))):
                # A view inside the tensor: read whole, the masked points replaced (or never read).
                loads.append(access(node) if space is not None else access(node, found))
                value = emit("Load", node.dtype, access_index=len(loads) - 1)
            else:
                view, index, run = indexed_access(node, 1 if mask is not None else 0, mask)
                loads.append(view)
                value = emit("Gather", node.dtype, [index], access_index=len(loads) - 1, constant=run)
            if mask is not None and not _only_selected_under(program, number, node.inputs[0]):
                other = node.attr("other") or 0
                if isinstance(other, float) and other != other:
                    raise NotLowered("a masked load's NaN")
                other = emit("Constant", node.dtype, constant=other)
                value = emit("Where", node.dtype, [mask, value, other])
            ids[number] = value
        elif node.op == "check_bounds":
            checked[node.inputs[0]] = emit("CheckIndex", node.dtype, operands, constant=node.attr("size"))
        elif node.op == "store" and node.attr("mode") == "atomic_add":
            view, index, _ = indexed_access(node, 1)
            stores.append(view)
            value = operands[0]
            if program.nodes[node.inputs[0]].dtype != node.dtype:
                value = emit("Convert", node.dtype, [value])
            emit("ScatterAdd", node.dtype, [value, index], access_index=len(stores) - 1)
        elif node.op == "store":
            if node.attr("mode") is not None:
                raise NotLowered(f"store mode {node.attr('mode')}")
            if node.attr("indirect"):
                raise NotLowered(f"a store by index without accumulation (index {node.attr('index')!r})")
            stores.append(access(node))
            value = program.nodes[node.inputs[0]]
            emit("Store", value.dtype, operands[:1], access_index=len(stores) - 1)
        elif node.op == "constant":
            value = node.attr("value")
            if isinstance(value, float) and value != value:
                raise NotLowered("NaN constant")
            ids[number] = emit("Constant", node.dtype, constant=value)
        elif node.op == "to_dtype":
            ids[number] = emit("Convert", node.dtype, operands)
        elif node.op == "truediv" or node.op == "div":
            if not node.dtype.is_floating_point:
                raise NotLowered("integer true division")
            ids[number] = emit("Div", node.dtype, _same_type(program, node, operands, emit))
        elif node.op == "pow" and node.dtype == torch.float32:
            ids[number] = _power(program, node, operands, emit)
        elif node.op in _UNARY:
            ids[number] = emit(_UNARY[node.op], node.dtype, operands)
        elif node.op in _BINARY:
            same = _same_type(program, node, operands, emit)
            once = _times_one(nodes, node.op, same, _TYPES.get(node.dtype))
            ids[number] = once if once is not None else emit(_BINARY[node.op], node.dtype, same)
        elif node.op == "where":
            condition, a, b = operands
            a, b = _same_type(program, node, [a, b], emit, inputs=node.inputs[1:])
            ids[number] = emit("Where", node.dtype, [condition, a, b])
        elif node.op == "matmul":
            if matmul is not None:
                raise NotLowered("two products in one kernel")
            if node.attr("a") not in program.arguments or node.attr("b") not in program.arguments:
                raise NotLowered("a product of a buffer the kernel does not take")
            matmul = (
                program.arguments.index(node.attr("a")),
                program.arguments.index(node.attr("b")),
                type_of(node.dtype),
                *node.attr("sizes"),
                *node.attr("views"),
            )
            ids[number] = None  # read through Product nodes
        elif node.op == "product":
            found = program.access(node)
            if found is None or not program.is_identity(found):
                raise NotLowered("the product read in another order than its own")
            ids[number] = emit("Product", node.dtype)
        elif node.op == "random" and node.attr("kind") in _RANDOM:
            ids[number] = _random(program, node, ids, nodes, loads, positions, emit, space)
        elif node.op == "reduction" and node.attr("kind") in _REDUCTIONS:
            ids[number] = emit(_REDUCTIONS[node.attr("kind")], node.dtype, operands)
        elif node.op == "reduction" and node.attr("kind") == "any":
            (value,) = operands
            if program.nodes[node.inputs[0]].dtype != torch.bool:
                value = emit("Ne", torch.bool, [value, emit("Constant", program.nodes[node.inputs[0]].dtype)])
            ids[number] = emit("ReduceMax", torch.bool, [value])
        elif node.op == "index" and not node.attr("indirect") and space is None and not _tables_well(program, node):
            # Not a strided view with strides >= 0 (a relative position x0 - x1, a rolled window's (6 + x0) % 8): the
            # index at every point, computed once on the host.
            host_tables.append(_host_index_table(program, node.attr("index"), ()))
            ids[number] = table_load(("host", len(host_tables) - 1), torch.int64, Access(0, _contiguous(program)))
            if node.dtype != torch.int64:
                ids[number] = emit("Convert", node.dtype, [ids[number]])
        elif node.op == "index" and not node.attr("indirect"):
            found, extent = _index_load(program, node, space)
            table_type = torch.float32 if node.dtype.is_floating_point else torch.int64  # npusim's native aranges
            tables[table_type] = max(tables.get(table_type, 0), extent)
            table = len(program.arguments) + list(tables).index(table_type)
            shift = min(found.offset, 0)  # a negative offset (padding's `x0 - 2`) is added to the table's values
            loads.append((table, type_of(table_type), found.offset - shift, list(found.strides)))
            ids[number] = emit("Load", table_type, access_index=len(loads) - 1)
            if shift:
                ids[number] = emit("Add", table_type, [ids[number], emit("Constant", table_type, constant=shift)])
            if node.dtype != table_type:
                ids[number] = emit("Convert", node.dtype, [ids[number]])
        else:
            kind = node.attr("kind")
            raise NotLowered(f"operation {node.op}{f' {kind}' if kind else ''}")
    sizes = [d.size for d in program.space] if space is None else space
    # After the program's tensors, the index tables and host tables: the hoisted values, each an entry of its own
    # (Argument nodes), or one tensor of them all (a GEMM epilogue's loads).
    scalars = len(program.arguments) + len(tables) + len(host_tables)
    as_arguments = space is None
    arguments = scalars + (len(hoisted) if as_arguments else (1 if hoisted else 0))
    nodes = [node[:7] + (scalars - 1 - node[7],) if node[0] == "Argument" else node for node in nodes]

    def numbered(argument):
        if argument == -1:
            return arguments - 1
        if isinstance(argument, tuple):  # a host table
            return len(program.arguments) + len(tables) + argument[1]
        return argument

    loads = [(numbered(argument), *rest) for argument, *rest in loads]
    staged = transposed_loads(program, loads, stores) if space is None else {}
    for k, (load, staging) in enumerate(staged.items()):
        loads[load] = (arguments + k, loads[load][1], 0, list(staging.strides))
    arguments += len(staged)
    description = (program.name, sizes, program.reduced_dims, arguments, loads, stores, nodes, matmul)
    return description, list(tables.items()), (host_nodes, hoisted, as_arguments), host_tables, list(staged.values())


_RANDOM = {"rand": "RandomUniform", "randn": "RandomNormal"}


def _random_positions(program):
    """The index nodes read only as random numbers' offsets that are each point's row-major index in the space plus
    a constant (Inductor's `x0` in a pointwise kernel), with that constant: the kernel's random numbers draw there."""
    readers = {}
    for number, node in enumerate(program.nodes):
        for i in node.inputs:
            readers.setdefault(i, []).append(number)
    row_major, stride = [], 1
    for dim in reversed(program.space):
        row_major.insert(0, stride if dim.size > 1 else 0)
        stride *= dim.size
    positions = {}
    for number, node in enumerate(program.nodes):
        if node.op != "index" or node.attr("indirect"):
            continue
        users = readers.get(number, [])
        if not users or not all(
            program.nodes[r].op == "random" and program.nodes[r].inputs[1] == number for r in users
        ):
            continue
        found = _analyse_index(program, node.attr("index"))
        if found is None:
            continue
        strides = [s if d.size > 1 else 0 for s, d in zip(found.strides, program.space, strict=True)]
        if strides == row_major:
            positions[number] = found.offset
    return positions


def _random(program, node, ids, nodes, loads, positions, emit, space):
    """A uniform or normal draw at each point (RandomUniform, RandomNormal): under the key Inductor loads from its
    seeds (one element), at the stream position of the point's index, as the interpreter draws them."""
    seed, offset = node.inputs[:2]
    if space is not None:
        raise NotLowered("a random number in a product's epilogue")
    if offset not in positions:
        raise NotLowered(f"a random number at {program.nodes[offset].attr('index')!r}, not the point's index")
    key = ids[seed]
    if key is None or key < 0:
        raise NotLowered("a random number's seed computed on the host")
    op, _, _, _, _, access_index, _ = nodes[key][:7]
    scalar = op == "Constant" or (op == "Load" and not any(loads[access_index][3]))
    if program.nodes[seed].dtype != torch.int64 or not scalar:
        raise NotLowered("a random number's seed that is not one int64 element")
    if node.dtype != torch.float32:
        raise NotLowered(f"random numbers of {node.dtype}")
    position = emit("Constant", torch.int64, constant=positions[offset])
    return emit(_RANDOM[node.attr("kind")], node.dtype, [key, position])


_NOT_ELEMENTWISE = {
    "load",
    "store",
    "reduction",
    "index",
    "random",
    "matmul",
    "product",
    "seed",
    "bitcast",
    "check_bounds",
}


def _host_scalars(program, host_arguments):
    """Values that are one host scalar (constants, one element of a host tensor such as an optimizer's step count,
    and elementwise operations of those) which the kernel reads as f32: the launch computes them on the host, as
    eager mode computes an optimizer's bias corrections, and hands them to the kernel in one small tensor instead of
    the kernel computing them at every element. Returns the nodes only those need (left out of the kernel), the
    hoisted ones, and every node the host evaluates for them, in order."""
    uniform = set()
    for number, node in enumerate(program.nodes):
        if node.op == "constant":
            uniform.add(number)
        elif node.op == "load" and node.attr("buffer") in host_arguments and not node.attr("masked"):
            found = program.access(node)
            if found is not None and not node.attr("indirect") and not any(found.strides):
                uniform.add(number)
        elif node.op not in _NOT_ELEMENTWISE and node.inputs and all(i in uniform for i in node.inputs):
            uniform.add(number)
    used_outside = {i for n, node in enumerate(program.nodes) if n not in uniform for i in node.inputs}
    hoisted = [
        n
        for n in sorted(uniform & used_outside)
        if program.nodes[n].op != "constant" and program.nodes[n].dtype == torch.float32
    ]
    # What the kernel still computes: every other node, and what those read short of a hoisted value.
    needed, pending = set(), [n for n in range(len(program.nodes)) if n not in uniform]
    while pending:
        for i in program.nodes[pending.pop()].inputs:
            if i not in needed and i not in hoisted:
                needed.add(i)
                pending.append(i)
    # What the host computes: the hoisted values and everything they read.
    host, pending = set(hoisted), list(hoisted)
    while pending:
        for i in program.nodes[pending.pop()].inputs:
            if i not in host:
                host.add(i)
                pending.append(i)
    return uniform - needed - set(hoisted), hoisted, sorted(host)


def _under_mask(program, node, found):
    """A masked load's view where its mask holds. When the mask is a range lo <= v < hi of a range variable v (cat's
    columns of one input) inside one period m of v's inner dimensions (lo a multiple of m), v is lo + (v mod m) there:
    the view without v's outer dimensions, which repeats the part the mask keeps and so stays inside the tensor."""
    mask = mask_range(program, node.inputs[0])
    if mask is None:
        return found
    name, lo, hi = mask
    strides = program.variable_strides(name)
    if strides is None or not any(strides):
        return found
    symbols = {n: sympy.Symbol(n, integer=True, nonnegative=True) for n in program.ranges}
    sizes = {n: sympy.Integer(value) for n, value in program.sizes.items()}
    try:
        coefficient = sympy.expand(sympy.sympify(node.attr("index"), locals={**sizes, **symbols})).coeff(symbols[name])
    except (sympy.SympifyError, SyntaxError, TypeError):
        return found
    if not coefficient.is_Integer or coefficient == 0:
        return found
    for period in sorted({s for s in strides if s > 0} | {program.ranges[name][2]}):
        inner = sum((d.size - 1) * s for d, s in zip(program.space, strides, strict=True) if 0 < s < period) + 1
        outer = [s for s in strides if s >= period]
        if inner == period and all(s % period == 0 for s in outer) and lo % period == 0 and hi - lo <= period:
            c = int(coefficient)
            shifted = [f - c * s if s >= period else f for f, s in zip(found.strides, strides, strict=True)]
            return Access(found.offset + c * lo, tuple(shifted))
    return found


def _only_selected_under(program, number, mask):
    """Whether every use of node `number` is `where(mask, it, ...)` under the same mask, as Inductor writes a masked
    load's uses: its value where the mask is false is never read, so it need not be replaced by `other`."""
    users = [n for n in program.nodes if number in n.inputs]
    return bool(users) and all(
        u.op == "where" and u.inputs[0] == mask and u.inputs[1] == number and number not in u.inputs[2:] for u in users
    )


def _split_index(program, node):
    """A load's or store's index as (the part that is a function of the space, as text; the integer coefficient of
    each loaded value it reads): Inductor's indirect indices are affine in the values (an embedding's
    `r0_2 + 128*tmp0`)."""
    index = node.attr("index")
    names = node.attr("indirect") or ()
    if not names:
        return index, {}
    symbols = {name: sympy.Symbol(name, integer=True) for name in names}
    variables = {name: sympy.Symbol(name, integer=True, nonnegative=True) for name in program.ranges}
    sizes = {name: sympy.Integer(value) for name, value in program.sizes.items()}
    try:
        expr = sympy.expand(sympy.sympify(index, locals={**sizes, **variables, **symbols}))
    except (sympy.SympifyError, SyntaxError, TypeError) as error:
        raise NotLowered(f"index {index!r} does not parse") from error
    coefficients = {}
    for name, symbol in symbols.items():
        coefficient = expr.coeff(symbol)
        if not coefficient.is_Integer:
            raise NotLowered(f"index {index!r} is not a constant times {name}")
        coefficients[name] = int(coefficient)
    base = sympy.expand(expr - sum(c * symbols[n] for n, c in coefficients.items()))
    if base.free_symbols & set(symbols.values()):
        raise NotLowered(f"index {index!r} is not affine in the loaded values")
    return str(base), coefficients


def _run_length(program, node, first_indirect):
    """How many points of a row an indexed load may move as one element of 4 or 8 bytes (dma.ldx takes any element
    width, and the timed model charges a DRAM burst per element): r when its index steps by 1 along the innermost
    reduced dimension, whose size r divides, and the loaded values it reads are the same along it (an embedding's
    token per row), so that each run of r points reads r consecutive elements."""
    if program.reduced_dims < 1 or not node.attr("indirect"):
        return 1
    base, _ = _split_index(program, node)
    found = _analyse_index(program, base)
    if found is None or found.strides[-1] != 1:
        return 1
    if not all(_constant_along_last(program, number, {}) for number in node.inputs[first_indirect:]):
        return 1
    width = node.dtype.itemsize
    for run in (8 // width, 4 // width):
        if run in (2, 4) and program.space[-1].size % run == 0:
            return run
    return 1


def _constant_along_last(program, number, known):
    """Whether node `number`'s value is the same at every point of the innermost dimension of the space."""
    if number not in known:
        node = program.nodes[number]
        if node.op in ("load", "index"):
            found = None if node.attr("masked") or node.attr("indirect") else program.access(node)
            known[number] = found is not None and found.strides[-1] == 0
        elif node.op in ("constant", "reduction"):
            known[number] = True
        elif node.op in ("random", "matmul", "product"):
            known[number] = False
        else:
            known[number] = all(_constant_along_last(program, i, known) for i in node.inputs)
    return known[number]


_POINT_OPS = {"eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and"}
_POINT_OPS |= {"logical_or", "logical_xor", "logical_not", "where", "add", "sub", "mul", "minimum", "maximum"}


def _point_masks(program):
    """The bool values computed from the point alone (comparisons and logic of indices and integer constants: the
    ranges cat and padding mask their loads with) that the rest of the program reads: each becomes a table computed
    once on the host, a byte per point loaded instead of the comparisons of int64 indices at every point."""
    integral = (torch.bool, torch.int32, torch.int64)
    pure = set()
    for number, node in enumerate(program.nodes):
        if node.dtype not in integral:
            continue
        if node.op == "constant" or (node.op == "index" and not node.attr("indirect")):
            pure.add(number)
        elif node.op in _POINT_OPS and node.inputs and all(i in pure for i in node.inputs):
            pure.add(number)
    read_outside = {i for n, node in enumerate(program.nodes) if n not in pure for i in node.inputs}
    return {
        n
        for n in pure & read_outside
        if program.nodes[n].dtype == torch.bool and program.nodes[n].op not in ("constant", "index")
    }


def _host_mask_table(program, number):
    """A point mask's value at every point (its evaluation by the interpreter on the host), as (a bool CPU tensor,
    the strides over the space to read it with: 0 along the dimensions it does not vary in)."""
    evaluator = interpreter.Interpreter(program, [None] * len(program.arguments), torch.device("cpu"))
    pending, needed = [number], set()
    while pending:
        n = pending.pop()
        if n not in needed:
            needed.add(n)
            pending += program.nodes[n].inputs
    value = evaluator.run(sorted(needed))[number].to(torch.bool)
    shape = [d.size for d in program.space]
    value = value.reshape([1] * (len(shape) - value.dim()) + list(value.shape))
    # A mask of one range variable (a cat's input, a select's index) is a few bytes, not one per point.
    for dim, size in enumerate(value.shape):
        if size > 1 and torch.equal(value, value.narrow(dim, 0, 1).expand_as(value)):
            value = value.narrow(dim, 0, 1)
    value = value.contiguous()
    strides = [0 if size == 1 else stride for size, stride in zip(value.shape, value.stride(), strict=True)]
    return value.reshape(-1), strides


def _host_index_table(program, index, indirect):
    """The index (its loaded values taken as 0) at every point of the space, as Inductor's printed expression
    computes it (floor division and modulo included), flat in the space's order: an int64 CPU tensor."""
    evaluator = interpreter.Interpreter(program, [None] * len(program.arguments), torch.device("cpu"))
    names = interpreter._Names(evaluator)
    for name in indirect or ():
        names[name] = torch.zeros((), dtype=torch.int64)
    value = eval(index, {"__builtins__": {}}, names)  # the index is Inductor's printed expression
    value = torch.as_tensor(value, dtype=torch.int64)
    return value.expand([d.size for d in program.space]).contiguous().reshape(-1)


def _within(program, access, extent):
    """Whether a strided view reads only elements 0 .. extent - 1 at every point of the space."""
    if not extent:
        return False
    low = access.offset + sum(min(0, s * (d.size - 1)) for s, d in zip(access.strides, program.space, strict=True))
    high = access.offset + sum(max(0, s * (d.size - 1)) for s, d in zip(access.strides, program.space, strict=True))
    return low >= 0 and high < extent


def _contiguous(program):
    """The strides of a table holding a value at every point of the space, in the space's order."""
    return tuple(math.prod(d.size for d in program.space[k + 1 :]) for k in range(len(program.space)))


def _tables_well(program, node):
    """Whether an index used as data reads the arange table (affine, strides >= 0), else a host table."""
    found = program.access(node)
    return found is not None and all(s >= 0 for s in found.strides)


def _index_load(program, node, space):
    """An index used as data (arange, a position compared with a target or a causal bound), when it is affine in
    the space with strides that are not negative: a load from a table whose element i is i, at the index as a strided
    view (a negative offset is added by the caller). The vector engine has no iota; the table is one eager arange,
    shared by every kernel."""
    found = program.access(node)
    if found is None:
        raise NotLowered(f"index {node.attr('index')!r} as data is not affine")
    if any(s < 0 for s in found.strides):
        raise NotLowered(f"index {node.attr('index')!r} as data has a negative stride")
    extent = max(found.offset, 0) + sum(s * (d.size - 1) for s, d in zip(found.strides, program.space, strict=True)) + 1
    return (found if space is None else _coarsen(program, found, space)), extent


def _product_space(program):
    """A GEMM template's space, (batch,) m, n; None for a program without a product."""
    product = next((n for n in program.nodes if n.op == "matmul"), None)
    if product is None:
        return None
    if program.reduction_tree is not None:
        raise NotLowered("a product and a reduction in one kernel")
    batch, m, n, _ = product.attr("sizes")
    return [batch, m, n] if batch != 1 else [m, n]


def _coarsen(program, access, sizes):
    """An access over the space's dimensions as one over the product's (batch,) m, n, which they refine."""
    strides, position = [], 0
    dims = list(zip(program.space, access.strides, strict=True))
    for size in sizes:
        group, extent = [], 1
        while extent < size and position < len(dims):
            group.append(dims[position])
            extent *= dims[position][0].size
            position += 1
        if extent != size:
            raise NotLowered("the space does not split into the product's rows and columns")
        for (outer, outer_stride), (inner, inner_stride) in itertools.pairwise(group):
            if outer.size > 1 and inner.size > 1 and outer_stride != inner_stride * inner.size:
                raise NotLowered("an epilogue operand that is not a strided view of the product's blocks")
        strides.append(group[-1][1] if group else 0)
    return type(access)(access.offset, tuple(strides))


def _power(program, node, operands, emit):
    """a ** b for a positive constant a (an optimizer's beta ** step): exp(b log a) in f32, as GPU kernels compute
    a power (a general base, negative or computed, is left to the interpreter's pow)."""
    base = program.nodes[node.inputs[0]]
    if base.op != "constant" or not isinstance(base.attr("value"), (int, float)) or base.attr("value") <= 0:
        raise NotLowered("pow of a base that is not a positive constant")
    a, b = _same_type(program, node, operands, emit)
    return emit("Exp", torch.float32, [emit("Mul", torch.float32, [emit("Log", torch.float32, [a]), b])])


def _same_type(program, node, operands, emit, inputs=None):
    """Operands converted to the node's operand type (PyTorch promotes mixed operands; the vector engine does not)."""
    inputs = node.inputs if inputs is None else inputs
    dtypes = [program.nodes[i].dtype for i in inputs]
    target = dtypes[0]
    for dtype in dtypes[1:]:
        target = torch.promote_types(target, dtype)
    return [o if d == target else emit("Convert", target, [o]) for o, d in zip(operands, dtypes, strict=True)]
