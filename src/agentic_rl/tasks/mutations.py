"""Deterministic bug injection into Python source with ``ast``.

:func:`find_mutations` lists every place an operator applies inside a line range (e.g. the canonical
solution of a function); :func:`apply_mutations` rewrites only those source segments, so the rest of
the file (docstring, comments, formatting) stays byte-identical and the inverse of a mutation is
simply the original text of the lines it touched.

Operators (``OPERATORS``; the ``kind`` decides the difficulty level of a task, see ``LEVEL_OF``):

===================  ==========================================================================
``flip_comparison``  ``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``, ``in`` ↔ ``not in``, ``is`` ↔ ``is not``
``wrong_operator``   ``+`` ↔ ``-``, ``*`` ↔ ``//``, ``/`` → ``*``, ``%`` → ``//``, ``and`` ↔ ``or``, ...
``off_by_one``       an integer constant ``n`` → ``n + 1`` (``n - 1`` for odd sites); ``range(a)`` → ``range(a - 1)``
``wrong_constant``   ``True`` ↔ ``False``, a string loses its last character (``''`` → ``' '``), ``k`` → ``2k``
``swap_arguments``   the first two positional arguments of a call are swapped
``drop_negation``    ``not x`` → ``x``, ``-x`` → ``x``
``wrong_return``     ``return x`` → ``return y`` (another local name), otherwise ``return None``
``delete_line``      a simple statement (assignment, call, augmented assignment) is removed
``syntax_error``     a block header loses its ``:`` or a line loses its last ``)`` (level 0 only)
===================  ==========================================================================
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass

LEVEL_OF = {
    "syntax_error": 0,
    "flip_comparison": 1, "wrong_operator": 1, "off_by_one": 1, "wrong_constant": 1,
    "swap_arguments": 2, "drop_negation": 2, "wrong_return": 2, "delete_line": 2,
}
OPERATORS = tuple(LEVEL_OF)

_FLIP_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SWAP_BINOP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
               ast.Div: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr,
               ast.BitOr: ast.BitAnd, ast.LShift: ast.RShift, ast.RShift: ast.LShift}


@dataclass(frozen=True)
class Mutation:
    """One edit: replace source ``(line, col)``–``(end_line, end_col)`` (1-based lines, character
    columns) with ``replacement``. ``original`` is the replaced text (the inverse edit)."""

    operator: str
    line: int
    col: int
    end_line: int
    end_col: int
    original: str
    replacement: str

    @property
    def level(self) -> int:
        return LEVEL_OF[self.operator]

    def describe(self) -> str:
        return f"{self.operator} at line {self.line}: {self.original!r} -> {self.replacement!r}"

    def to_dict(self) -> dict:
        return asdict(self)


def _char_col(line_text: str, byte_col: int) -> int:
    """ast columns are UTF-8 byte offsets; convert to a character offset."""
    return len(line_text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


class _Sites:
    """Enumerates mutation sites of one source text within a line range."""

    def __init__(self, source: str, first_line: int, last_line: int):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.tree = ast.parse(source)
        self.first, self.last = first_line, last_line
        self.docstrings = {id(n.body[0].value) for n in ast.walk(self.tree)
                           if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.Module) and n.body
                           and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}

    def inside(self, node: ast.AST) -> bool:
        return self.first <= node.lineno and node.end_lineno <= self.last  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> tuple[int, int, int, int, str]:
        line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
        col = _char_col(self.lines[line - 1], node.col_offset)  # type: ignore[attr-defined]
        end_col = _char_col(self.lines[end_line - 1], node.end_col_offset)  # type: ignore[attr-defined]
        if line == end_line:
            text = self.lines[line - 1][col:end_col]
        else:
            text = self.lines[line - 1][col:] + "".join(self.lines[line:end_line - 1]) + self.lines[end_line - 1][:end_col]
        return line, col, end_line, end_col, text

    def replace(self, operator: str, node: ast.AST, new_source: str) -> Mutation | None:
        line, col, end_line, end_col, text = self.segment(node)
        if text == new_source:
            return None
        return Mutation(operator, line, col, end_line, end_col, text, new_source)

    def all(self) -> Iterator[Mutation]:
        for node in ast.walk(self.tree):
            # a block's statements may be in range while the block itself (a `def` line) is not
            yield from filter(None, self._delete(node))
            if not hasattr(node, "lineno") or not self.inside(node):
                continue
            for maker in (self._compare, self._binop, self._constant, self._call, self._unary, self._return):
                yield from filter(None, maker(node))
        yield from self._syntax()

    # one method per operator family -------------------------------------------------------------
    def _compare(self, node: ast.AST) -> list[Mutation | None]:
        if not isinstance(node, ast.Compare) or len(node.ops) != 1 or type(node.ops[0]) not in _FLIP_CMP:
            return []
        new = copy.deepcopy(node)
        new.ops = [_FLIP_CMP[type(node.ops[0])]()]
        return [self.replace("flip_comparison", node, ast.unparse(new))]

    def _binop(self, node: ast.AST) -> list[Mutation | None]:
        if isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BINOP:
            new = copy.deepcopy(node)
            new.op = _SWAP_BINOP[type(node.op)]()
            return [self.replace("wrong_operator", node, ast.unparse(new))]
        if isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BINOP:
            new = copy.deepcopy(node)
            new.op = _SWAP_BINOP[type(node.op)]()
            return [self.replace("wrong_operator", node, ast.unparse(new))]
        if isinstance(node, ast.BoolOp) and len(node.values) == 2:
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            return [self.replace("wrong_operator", node, ast.unparse(new))]
        return []

    def _constant(self, node: ast.AST) -> list[Mutation | None]:
        if not isinstance(node, ast.Constant) or id(node) in self.docstrings:
            return []
        value = node.value
        if isinstance(value, bool):
            return [self.replace("wrong_constant", node, repr(not value))]
        if isinstance(value, int):
            delta = 1 if (node.lineno + node.col_offset) % 2 == 0 else -1
            out = [self.replace("off_by_one", node, repr(value + delta))]
            if abs(value) > 1:
                out.append(self.replace("wrong_constant", node, repr(value * 2)))
            return out
        if isinstance(value, float):
            return [self.replace("wrong_constant", node, repr(value * 2 if value else 1.0))]
        if isinstance(value, str) and "\n" not in value:
            return [self.replace("wrong_constant", node, repr(value[:-1] if value else " "))]
        return []

    def _call(self, node: ast.AST) -> list[Mutation | None]:
        if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args):
            return []
        out: list[Mutation | None] = []
        if len(node.args) >= 2 and ast.dump(node.args[0]) != ast.dump(node.args[1]):
            new = copy.deepcopy(node)
            new.args[0], new.args[1] = new.args[1], new.args[0]
            out.append(self.replace("swap_arguments", node, ast.unparse(new)))
        if isinstance(node.func, ast.Name) and node.func.id == "range" and node.args:
            stop = node.args[0] if len(node.args) == 1 else node.args[1]
            if not isinstance(stop, ast.Constant):
                out.append(self.replace("off_by_one", stop, f"{_paren(stop)} - 1"))
        return out

    def _unary(self, node: ast.AST) -> list[Mutation | None]:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
            if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
                return []  # a negative literal: that is a constant, not a negation
            return [self.replace("drop_negation", node, _paren(node.operand))]
        return []

    def _return(self, node: ast.AST) -> list[Mutation | None]:
        if not isinstance(node, ast.Return) or node.value is None:
            return []
        if isinstance(node.value, ast.Name):
            func = self._enclosing_function(node)
            names = sorted({n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                           | {a.arg for a in func.args.args}) if func else []
            others = [n for n in names if n != node.value.id]
            if others:
                return [self.replace("wrong_return", node, f"return {others[0]}")]
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            return []
        return [self.replace("wrong_return", node, "return None")]

    def _delete(self, node: ast.AST) -> list[Mutation | None]:
        out: list[Mutation | None] = []
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) >= 2:
                out += self._deletable(body)
        return out

    def _deletable(self, body: list[ast.stmt]) -> list[Mutation | None]:
        out: list[Mutation | None] = []
        for stmt in body:
            if (isinstance(stmt, ast.Assign | ast.AugAssign | ast.Expr) and self.inside(stmt)
                    and stmt.lineno == stmt.end_lineno and not (isinstance(stmt, ast.Expr)
                                                                and isinstance(stmt.value, ast.Constant))):
                text = self.lines[stmt.lineno - 1]
                if text[: stmt.col_offset].strip():
                    continue  # shares its line with other code (`a = 1; b = 2`)
                out.append(Mutation("delete_line", stmt.lineno, 0, stmt.lineno + 1, 0, text, ""))
        return out

    def _syntax(self) -> Iterator[Mutation]:
        for number in range(self.first, self.last + 1):
            text = self.lines[number - 1]
            body = text.rstrip("\r\n")
            stripped = body.rstrip()
            if not stripped or stripped.lstrip().startswith("#"):
                continue
            if stripped.endswith(":"):
                yield Mutation("syntax_error", number, len(stripped) - 1, number, len(stripped), ":", "")
            elif stripped.endswith(")"):
                yield Mutation("syntax_error", number, len(stripped) - 1, number, len(stripped), ")", "")

    def _enclosing_function(self, target: ast.AST) -> ast.FunctionDef | None:
        best = None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef) and node.lineno <= target.lineno <= node.end_lineno:  # type: ignore
                best = node  # walk is breadth-first: the last match is the innermost
        return best


def _paren(node: ast.AST) -> str:
    text = ast.unparse(node)
    simple = isinstance(node, ast.Name | ast.Constant | ast.Call | ast.Attribute | ast.Subscript | ast.List)
    return text if simple else f"({text})"


def find_mutations(source: str, first_line: int = 1, last_line: int | None = None) -> list[Mutation]:
    """Every mutation site of every operator in lines ``first_line..last_line`` (1-based, inclusive),
    in a deterministic order. Raises ``SyntaxError`` if ``source`` does not parse."""
    last = last_line if last_line is not None else len(source.splitlines())
    sites = _Sites(source, first_line, last)
    seen: set[tuple] = set()
    out = []
    for m in sites.all():
        key = (m.operator, m.line, m.col, m.end_line, m.end_col, m.replacement)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def overlaps(a: Mutation, b: Mutation) -> bool:
    """Whether two mutations touch a common stretch of source (they then cannot both be applied)."""
    return (a.line, a.col) < (b.end_line, b.end_col) and (b.line, b.col) < (a.end_line, a.end_col)


def apply_mutations(source: str, mutations: list[Mutation]) -> str:
    """Apply non-overlapping mutations (all computed on ``source``) and return the new text."""
    ordered = sorted(mutations, key=lambda m: (m.line, m.col), reverse=True)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if overlaps(a, b):
            raise ValueError(f"mutations overlap: {a.describe()} / {b.describe()}")
    lines = source.splitlines(keepends=True)
    text = source
    for m in ordered:
        start = _offset(lines, m.line, m.col)
        end = _offset(lines, m.end_line, m.end_col)
        if text[start:end] != m.original:
            raise ValueError(f"mutation does not match the source: {m.describe()}")
        text = text[:start] + m.replacement + text[end:]
    return text


def _offset(lines: list[str], line: int, col: int) -> int:
    return sum(len(x) for x in lines[: line - 1]) + col


def choose(mutations: list[Mutation], key: str, count: int) -> list[Mutation]:
    """A deterministic pseudo-random order of ``mutations`` for ``key`` (first ``count``)."""
    def rank(m: Mutation) -> str:
        return hashlib.sha256(f"{key}|{m.operator}|{m.line}|{m.col}|{m.replacement}".encode()).hexdigest()

    return sorted(mutations, key=rank)[:count]
