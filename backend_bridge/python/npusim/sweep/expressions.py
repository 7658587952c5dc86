"""Constraint, derived-figure and objective expressions: arithmetic and comparisons over named figures
(``core.systolic_rows * core.systolic_cols <= 1024``), evaluated on a whitelist of AST nodes, never by ``eval``."""

import ast
import math
import operator

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
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


class ExpressionError(ValueError):
    """An expression that does not parse, uses something outside the whitelist, or names an unknown figure."""


def _dotted_name(node):
    """`core.systolic_rows` is one name, not an attribute access."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise ExpressionError(f"unsupported syntax '{ast.unparse(node)}'")


class Expression:
    """A parsed expression: its text, the figures it names, and evaluation against a dict of figures."""

    def __init__(self, text):
        self.text = str(text)
        try:
            self._tree = ast.parse(self.text, mode="eval").body
        except SyntaxError as error:
            raise ExpressionError(f"cannot parse '{self.text}': {error.msg}") from None
        self.names = set()
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
            for part in (node.left, *node.comparators):
                self._check(part)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            if node.keywords:
                raise ExpressionError(f"keyword arguments are not supported in '{self.text}'")
            for argument in node.args:
                self._check(argument)
        else:
            raise ExpressionError(f"unsupported syntax '{ast.unparse(node)}' in '{self.text}'")

    def evaluate(self, figures):
        """The value with `figures` ({name: value}); a missing figure raises KeyError naming it."""
        return self._evaluate(self._tree, figures)

    def _evaluate(self, node, figures):
        if isinstance(node, (ast.Name, ast.Attribute)):
            return figures[_dotted_name(node)]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._evaluate(node.left, figures), self._evaluate(node.right, figures))
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
