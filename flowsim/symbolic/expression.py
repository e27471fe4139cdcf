"""Expressions from text, parsed and never evaluated.

``sympy.sympify`` runs its input as Python, so a config, a command-line option or a saved run could
carry code (``__import__('os').system(...)``). Every expression flowsim reads from text goes through
:func:`parse` instead: Python's ``ast`` reads the text, and a whitelist turns it into sympy objects.
Allowed are numbers, names (symbols, or the constants ``pi`` and ``E``), ``+ - * / **``, unary minus,
comparisons and ``& | ~`` (for Piecewise conditions), tuples inside ``Piecewise``, and calls of the
functions in :data:`FUNCTIONS`. Nothing else: no attributes, subscripts, keywords, lambdas,
comprehensions or dunder names. sympy's own parser is not used: it too ends in ``eval``.

:func:`dump` writes an expression as text plus its symbols' assumptions, which :func:`load` reads back
through the same parser.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping

import sympy as sp

from flowsim.symbolic.functions import log_softplus, logsumexp, softplus

#: the functions an expression may call, by the name it is written with
FUNCTIONS = {
    "exp": sp.exp, "log": sp.log, "sqrt": sp.sqrt, "Abs": sp.Abs, "abs": sp.Abs, "sign": sp.sign,
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "atan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh,
    "tanh": sp.tanh, "asinh": sp.asinh, "erf": sp.erf, "erfc": sp.erfc, "Heaviside": sp.Heaviside,
    "Max": sp.Max, "Min": sp.Min, "Piecewise": sp.Piecewise, "Eq": sp.Eq, "Ne": sp.Ne,
    "And": sp.And, "Or": sp.Or, "Not": sp.Not,
    "softplus": softplus, "log_softplus": log_softplus, "logsumexp": logsumexp,
}
#: names that stand for constants
CONSTANTS = {"pi": sp.pi, "E": sp.E}
#: assumptions a saved symbol may carry
ASSUMPTIONS = ("real", "positive", "negative", "nonnegative", "nonpositive", "integer", "finite", "nonzero")

_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a**b,
           ast.BitAnd: lambda a, b: sp.And(a, b), ast.BitOr: lambda a, b: sp.Or(a, b)}
_COMPARE = {ast.Lt: sp.Lt, ast.LtE: sp.Le, ast.Gt: sp.Gt, ast.GtE: sp.Ge}
_MAX_LENGTH = 20_000  # a longer text is refused before it is parsed (ast recursion, time)


class ExpressionError(ValueError):
    """An expression text that the whitelist refuses; the message names the offending token."""


def parse(text: str, symbols: Mapping[str, sp.Symbol] | None = None, *, rational: bool = False) -> sp.Basic:
    """The sympy expression ``text`` writes, built from a whitelist (module docstring).

    ``symbols`` maps each name the text may use to its symbol; None lets any other identifier stand for a
    plain ``Symbol`` of that name. ``rational``: decimals as exact rationals (``0.1`` -> 1/10) rather than
    float64 numbers. Raises :class:`ExpressionError` naming what it refused."""
    if not isinstance(text, str):
        raise ExpressionError(f"an expression must be text; got {type(text).__name__}.")
    if len(text) > _MAX_LENGTH:
        raise ExpressionError(f"expression longer than {_MAX_LENGTH} characters; refused.")
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"{text!r} is not a formula ({e.msg}).") from None
    try:
        return _Builder(source, symbols, rational).visit(tree.body)
    except RecursionError:
        raise ExpressionError("expression nested too deeply; refused.") from None
    except ExpressionError:
        raise
    except (TypeError, ValueError, ArithmeticError) as e:
        raise ExpressionError(f"{text!r} does not build a formula: {e}") from None


class _Builder(ast.NodeVisitor):
    def __init__(self, text, symbols, rational):
        self.text, self.symbols, self.rational = text, symbols, rational

    def token(self, node) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)

    def generic_visit(self, node):
        raise ExpressionError(f"{self.token(node)!r} is not allowed in an expression (only numbers, names, "
                              "+ - * / **, comparisons, & | ~ and calls of the functions of "
                              "flowsim.symbolic.expression.FUNCTIONS).")

    def visit_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            return sp.true if v else sp.false
        if isinstance(v, int):
            return sp.Integer(v)
        if not isinstance(v, float):
            return self.generic_visit(node)
        if not math.isfinite(v):
            raise ExpressionError(f"the number {self.token(node)} overflows float64.")
        return sp.Rational(self.token(node)) if self.rational else sp.Float(v)

    def visit_Name(self, node):
        name = node.id
        if name in CONSTANTS:
            return CONSTANTS[name]
        if name.startswith("_") or name in FUNCTIONS:
            raise ExpressionError(f"the name {name!r} is not allowed here" +
                                  (" (a function: call it)." if name in FUNCTIONS else "."))
        if self.symbols is None:
            return sp.Symbol(name)
        if name not in self.symbols:
            raise ExpressionError(f"unknown name {name!r}; the expression may use {sorted(self.symbols)}.")
        return self.symbols[name]

    def visit_BinOp(self, node):
        op = _BINARY.get(type(node.op))
        if op is None:
            return self.generic_visit(node)
        return op(self.visit(node.left), self.visit(node.right))

    def visit_UnaryOp(self, node):
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Invert):
            return sp.Not(operand)
        return self.generic_visit(node)

    def visit_Compare(self, node):
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            raise ExpressionError(f"{self.token(node)!r}: write one comparison <, <=, > or >= at a time "
                                  "(Eq(a, b), Ne(a, b) for = and !=).")
        return _COMPARE[type(node.ops[0])](self.visit(node.left), self.visit(node.comparators[0]))

    def visit_Call(self, node):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise ExpressionError(f"{self.token(node.func)!r} is not a function an expression may call; use one of "
                                  + ", ".join(sorted(FUNCTIONS)) + ".")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ExpressionError(f"{node.func.id}(...) takes plain arguments only (no keywords, no *).")
        if node.func.id == "Piecewise":
            return sp.Piecewise(*[self._piece(a) for a in node.args])
        return FUNCTIONS[node.func.id](*[self.visit(a) for a in node.args])

    def _piece(self, node):
        if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
            raise ExpressionError("Piecewise takes pairs (value, condition), e.g. Piecewise((m, m > 0), (0, True)).")
        return tuple(self.visit(e) for e in node.elts)


class _Printer(sp.printing.str.StrPrinter):
    """Text :func:`parse` reads back to the same expression: a float64 number as its shortest repr."""

    def _print_Float(self, expr):
        if expr._prec != 53:
            raise TypeError(f"the number {expr} has {expr._prec}-bit precision; only float64 numbers are saved.")
        return repr(float(expr))


def dump(expr: sp.Basic) -> dict:
    """``expr`` as plain data: its text and each symbol's assumptions, read back by :func:`load`. A
    TypeError where the text would not read back (a name that is not an identifier, a function outside
    the whitelist)."""
    text = _Printer().doprint(expr)
    # the assumptions each symbol was made with (real=True), not every one they imply
    symbols = {s.name: {k: bool(v) for k, v in s._assumptions_orig.items() if k in ASSUMPTIONS}
               for s in expr.free_symbols}
    out = {"text": text, "symbols": symbols}
    try:
        same = load(out) == expr
    except ExpressionError as e:
        raise TypeError(str(e)) from None
    if not same:
        raise TypeError(f"{text!r} does not read back to the same expression.")
    return out


def load(data: Mapping) -> sp.Basic:
    """The expression :func:`dump` wrote, through :func:`parse`. An ExpressionError for anything else."""
    if not isinstance(data, Mapping) or set(data) != {"text", "symbols"} or not isinstance(data["symbols"], Mapping):
        raise ExpressionError("a saved expression is {'text': ..., 'symbols': {name: {assumption: bool}}}.")
    symbols = {}
    for name, given in data["symbols"].items():
        if not (isinstance(name, str) and name.isidentifier() and not name.startswith("_")
                and isinstance(given, Mapping) and set(given) <= set(ASSUMPTIONS)
                and all(isinstance(v, bool) for v in given.values())):
            raise ExpressionError(f"saved symbol {name!r} with assumptions {given!r} is not allowed.")
        symbols[name] = sp.Symbol(name, **given)
    return parse(data["text"], symbols)
