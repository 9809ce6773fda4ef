"""The tools of ``tool-use-v0`` as pure functions, and the answer checker.

Each tool takes the call's ``arguments`` dict and returns the value, or raises :class:`ToolFailure` with
a short message for the agent (the env turns it into an error observation; nothing here ever crashes the
episode). The calculator is an ``ast`` walker, never ``eval``: only numbers, ``+ - * / // % **``, unary
signs and parentheses, with bounds on the expression length and on the size of every intermediate result.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any

#: Canonical tool names and their argument names (in the order the system prompt shows them).
TOOL_ARGS: dict[str, tuple[str, ...]] = {
    "calculator": ("expression",),
    "lookup": ("entity", "field"),
    "convert": ("value", "from_unit", "to_unit"),
}

_MAX_EXPRESSION_CHARS = 200
_MAX_MAGNITUDE = 1e18  # keeps every intermediate result printable and cheap
_MAX_EXPONENT = 64


class ToolFailure(Exception):
    """The call was well-formed but the tool could not answer. ``kind`` is the ``info["error"]`` kind."""

    def __init__(self, message: str, kind: str = "tool_error"):
        super().__init__(message)
        self.kind = kind


# -- calculator ---------------------------------------------------------------------------------
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _checked(value: float) -> float:
    if isinstance(value, complex) or not math.isfinite(value) or abs(value) > _MAX_MAGNITUDE:
        raise ToolFailure("result out of range")
    return value


def _eval_node(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval_node(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > _MAX_EXPONENT
                                             or (abs(left) > 1 and right * math.log10(abs(left)) > 18)):
            raise ToolFailure("exponent too large")
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ToolFailure("division by zero") from None
        except (OverflowError, ValueError):
            raise ToolFailure("result out of range") from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise ToolFailure("unsupported operator ^ (use **)")
    raise ToolFailure("only numbers, + - * / // % ** and parentheses are allowed")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression safely. Raises :class:`ToolFailure` on anything else."""
    expression = expression.strip()
    if not expression:
        raise ToolFailure("empty expression")
    if len(expression) > _MAX_EXPRESSION_CHARS:
        raise ToolFailure(f"expression longer than {_MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.replace(",", ""), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        raise ToolFailure("cannot parse the expression") from None
    try:
        return _eval_node(tree.body)
    except RecursionError:
        raise ToolFailure("expression nested too deeply") from None


def has_operation(expression: str) -> bool:
    """True when the expression computes something (not just a bare number)."""
    try:
        node = ast.parse(expression.replace(",", "").strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return False
    return isinstance(node, ast.BinOp)


def format_number(value: float) -> str:
    """Integers without a decimal point; other floats with up to 10 significant digits."""
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.10g}"


# -- unit conversion ----------------------------------------------------------------------------
#: unit -> (dimension, size in the dimension's base unit)
UNITS: dict[str, tuple[str, float]] = {
    "km": ("length", 1000.0), "m": ("length", 1.0), "cm": ("length", 0.01),
    "mile": ("length", 1609.344), "ft": ("length", 0.3048), "inch": ("length", 0.0254),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "lb": ("mass", 0.45359237), "oz": ("mass", 0.028349523125),
    "liter": ("volume", 1.0), "gallon": ("volume", 3.785411784),
}
_ALIASES = {
    "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "meter": "m", "meters": "m", "metre": "m", "metres": "m",
    "centimeter": "cm", "centimeters": "cm", "miles": "mile", "mi": "mile",
    "foot": "ft", "feet": "ft", "inches": "inch", "in": "inch",
    "kilogram": "kg", "kilograms": "kg", "kgs": "kg", "gram": "g", "grams": "g",
    "pound": "lb", "pounds": "lb", "lbs": "lb", "ounce": "oz", "ounces": "oz",
    "liters": "liter", "litre": "liter", "litres": "liter", "l": "liter", "gallons": "gallon", "gal": "gallon",
}


def canonical_unit(name: Any) -> str | None:
    """The canonical unit for a name or alias (case-insensitive), or None."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().rstrip(".")
    key = _ALIASES.get(key, key)
    return key if key in UNITS else None


def to_number(value: Any) -> float | None:
    """A number from an int/float or a numeric string (commas allowed); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.replace(",", "").strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def convert(value: float, from_unit: str, to_unit: str) -> float:
    """``value`` in ``from_unit`` expressed in ``to_unit``, rounded to 2 decimals."""
    source, target = canonical_unit(from_unit), canonical_unit(to_unit)
    for given, unit in ((from_unit, source), (to_unit, target)):
        if unit is None:
            raise ToolFailure(f"unknown unit {str(given)[:20]!r}")
    (dim_a, size_a), (dim_b, size_b) = UNITS[source], UNITS[target]
    if dim_a != dim_b:
        raise ToolFailure(f"cannot convert {source} to {target}")
    if abs(value) > _MAX_MAGNITUDE:
        raise ToolFailure("value out of range")
    return round(value * size_a / size_b, 2)


# -- lookup -------------------------------------------------------------------------------------
def lookup(kb: dict[str, dict[str, Any]], entity: str, field: str) -> tuple[str, str, Any]:
    """``(entity, field, value)`` with the KB's spelling; case-insensitive match on both names.

    Error messages name only what the agent asked for, never the KB's contents.
    """
    by_name = {name.lower(): name for name in kb}
    name = by_name.get(entity.strip().lower())
    if name is None:
        raise ToolFailure(f"no entity named {entity.strip()[:30]!r}")
    fields = {f.lower(): f for f in kb[name]}
    key = fields.get(field.strip().lower())
    if key is None:
        raise ToolFailure(f"{name} has no field {field.strip()[:30]!r}")
    return name, key, kb[name][key]


# -- answers ------------------------------------------------------------------------------------
_NUMBER_ANSWER = re.compile(r"^\$?\s*(-?\d+(?:\.\d+)?)\s*(?:[A-Za-z]{1,12})?\s*\.?$")


def normalise_text(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed (for string answers)."""
    return " ".join(re.sub(r"[^\w\s-]", " ", text.lower()).split())


def parse_numeric_answer(text: str) -> float | None:
    """The single number an answer states (``10,063``, ``59.55 km``, ``$12``), else None.

    An answer listing several numbers is not a number: listing candidates must not pass.
    """
    match = _NUMBER_ANSWER.match(text.strip().replace(",", ""))
    return float(match.group(1)) if match else None


def answer_is_correct(text: str, truth: Any) -> bool:
    """Numeric truths compare with a tolerance of 0.011 (answers are rounded to 2 decimals at most);
    string truths compare after :func:`normalise_text`."""
    if isinstance(truth, (int, float)) and not isinstance(truth, bool):
        number = parse_numeric_answer(text)
        return number is not None and abs(number - float(truth)) <= max(0.011, 1e-9 * abs(float(truth)))
    return normalise_text(text) == normalise_text(str(truth))
