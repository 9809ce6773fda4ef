"""Strict, type-tagged JSON codec for values crossing the sandbox boundary.

Only exact builtin types pass: None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset.
Subclasses and every other object are refused (`Unserialisable`), so an object with a rigged `__eq__`
can never reach the comparison outside. Encoding never calls user-defined code: exact builtin types
have no overridable methods. This file is stdlib-only: the grading harness loads it inside the sandbox.
"""

from __future__ import annotations

MAX_DEPTH = 100
MAX_NODES = 1_000_000

_SCALARS = {type(None): "none", bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}
_SEQUENCES = {list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}


class Unserialisable(ValueError):
    """A value outside the allowed exact builtin types (or too deep / too large)."""


def encode(value, _depth: int = 0, _budget: list | None = None):
    """`value` as JSON-compatible nested lists `[tag, payload]`. Raises Unserialisable."""
    budget = _budget if _budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise Unserialisable("value too large")
    if _depth > MAX_DEPTH:
        raise Unserialisable("value nested too deeply (or contains itself)")
    kind = type(value)
    if kind in _SCALARS:
        tag = _SCALARS[kind]
        if kind is int:
            return [tag, format(value, "x")]  # hex: no int-to-decimal digit limit, exact
        if kind is float:
            return [tag, value.hex()]
        if kind is bytes:
            return [tag, value.hex()]
        return [tag] if value is None else [tag, value]
    if kind in _SEQUENCES:
        return [_SEQUENCES[kind], [encode(item, _depth + 1, budget) for item in value]]
    if kind is dict:
        return ["dict", [[encode(k, _depth + 1, budget), encode(v, _depth + 1, budget)] for k, v in value.items()]]
    raise Unserialisable(f"type {kind.__module__}.{kind.__qualname__} is not an exact builtin type")


def decode(data, _depth: int = 0):
    """Inverse of `encode`. Raises ValueError on anything malformed (the data came from a sandbox)."""
    if _depth > MAX_DEPTH + 1 or not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise ValueError("malformed encoded value")
    tag, payload = data[0], data[1:]
    if tag == "none" and not payload:
        return None
    if len(payload) != 1:
        raise ValueError(f"malformed encoded {tag!r}")
    (raw,) = payload
    if tag == "bool" and type(raw) is bool:
        return raw
    if tag == "int" and isinstance(raw, str):
        return int(raw, 16)
    if tag == "float" and isinstance(raw, str):
        return float.fromhex(raw)
    if tag == "str" and isinstance(raw, str):
        return raw
    if tag == "bytes" and isinstance(raw, str):
        return bytes.fromhex(raw)
    if tag in ("list", "tuple", "set", "frozenset") and isinstance(raw, list):
        items = [decode(item, _depth + 1) for item in raw]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict" and isinstance(raw, list):
        pairs = []
        for pair in raw:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError("malformed encoded dict item")
            pairs.append((decode(pair[0], _depth + 1), decode(pair[1], _depth + 1)))
        return dict(pairs)
    raise ValueError(f"unknown or malformed encoded type {tag!r}")
