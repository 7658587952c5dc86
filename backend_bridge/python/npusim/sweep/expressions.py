"""Constraint, derived-figure and objective expressions: arithmetic and comparisons over named figures
(``core.systolic_rows * core.systolic_cols <= 1024``), evaluated on a whitelist of AST nodes, never by ``eval``."""

import ast
import itertools
import math
import operator

# An integer power's result may have at most this many bits: far beyond any figure of a chip, yet small enough that
# `10 ** 10 ** 10` fails at once instead of computing a number of ten billion digits. Float powers overflow instead.
MAX_POWER_BITS = 4096


class ExpressionError(ValueError):
    """An expression that does not parse, uses something outside the whitelist, names an unknown figure, or cannot
    be evaluated (a power too large)."""


def _power(base, exponent):
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log2(abs(base)) > MAX_POWER_BITS:
            raise ExpressionError(f"a power to the {exponent} would have more than {MAX_POWER_BITS} bits")
    try:
        return operator.pow(base, exponent)
    except OverflowError:
        raise ExpressionError(f"a power to the {exponent} overflows") from None


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS = {"min": min, "max": max, "abs": abs, "log2": math.log2, "sqrt": math.sqrt}


def _dotted_name(node):
    """`core.systolic_rows` is one name, not an attribute access."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise ExpressionError(f"unsupported syntax '{ast.unparse(node)}'")


class Expression:
    """A parsed expression: its text, the figures it names, the text constants it compares figures with, and
    evaluation against a dict of figures. `origin` (`file:line`) prefixes the errors of its evaluation."""

    def __init__(self, text, origin=None):
        self.text = str(text)
        self.origin = origin
        try:
            self._tree = ast.parse(self.text, mode="eval").body
        except SyntaxError as error:
            raise ExpressionError(f"cannot parse '{self.text}': {error.msg}") from None
        self.names = set()
        self.compared_texts = set()  # (figure, text) of `core.dataflow == "weight_stationary"`, to check the text
        self._check(self._tree)

    def _check(self, node):
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted_name(node)
            if any(part.startswith("_") for part in name.split(".")):
                raise ExpressionError(f"unsupported name '{name}' in '{self.text}'")
            self.names.add(name)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float, str)):
                raise ExpressionError(f"unsupported constant {node.value!r} in '{self.text}'")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            self._check(node.left)
            self._check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            self._check(node.operand)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self._check(value)
        elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            parts = (node.left, *node.comparators)
            for part in parts:
                self._check(part)
            for pair in itertools.pairwise(parts):
                names = [_dotted_name(p) for p in pair if isinstance(p, (ast.Name, ast.Attribute))]
                texts = [p.value for p in pair if isinstance(p, ast.Constant) and isinstance(p.value, str)]
                if names and texts:
                    self.compared_texts.add((names[0], texts[0]))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            if node.keywords:
                raise ExpressionError(f"keyword arguments are not supported in '{self.text}'")
            for argument in node.args:
                self._check(argument)
        else:
            raise ExpressionError(f"unsupported syntax '{ast.unparse(node)}' in '{self.text}'")

    def evaluate(self, figures):
        """The value with `figures` ({name: value}); a missing figure raises KeyError naming it, a power too large
        or arithmetic on text an ExpressionError naming the expression."""
        try:
            return self._evaluate(self._tree, figures)
        except ExpressionError as error:
            where = f"{self.origin}: " if self.origin else ""
            raise ExpressionError(f"{where}cannot evaluate '{self.text}': {error}") from None

    def _evaluate(self, node, figures):
        if isinstance(node, (ast.Name, ast.Attribute)):
            return figures[_dotted_name(node)]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            left, right = self._evaluate(node.left, figures), self._evaluate(node.right, figures)
            if isinstance(left, str) or isinstance(right, str):  # 'x' * 10 ** 9 would fill the memory
                raise ExpressionError(f"arithmetic on text in '{ast.unparse(node)}'")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._evaluate(node.operand, figures))
        if isinstance(node, ast.BoolOp):
            values = (self._evaluate(value, figures) for value in node.values)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare):
            left = self._evaluate(node.left, figures)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self._evaluate(comparator, figures)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        return _FUNCTIONS[node.func.id](*(self._evaluate(argument, figures) for argument in node.args))

    def __repr__(self):
        return f"Expression({self.text!r})"
