"""Unit tests for code tasks as *calls* plus *outside predicates*.

A test like ``assert abs(candidate(1.33) - 0.33) < 1e-6`` is split in two:

- the **calls** (``candidate(1.33)``): only their arguments are sent into the sandbox, where the agent's
  function runs and its return value is serialised;
- the **predicate** (``abs(__r0 - 0.33) < 1e-06``): evaluated *outside* the sandbox, in a trusted
  namespace, with ``__r0`` bound to the decoded return value.

So the expected values and the assert never enter the agent's sandbox, and an object whose ``__eq__``
always returns ``True`` cannot pass (it cannot be serialised in the first place).

:func:`convert_check` converts a HumanEval-style ``def check(candidate): ...`` body; :func:`convert_asserts`
converts a list of assert strings (the format users write in task files). Statements that cannot be
converted safely (asserts inside loops, calls whose arguments depend on the candidate's own results...)
are dropped and reported in :attr:`Conversion.dropped` with the reason.

JSON form of a test (what task files store)::

    {"id": "t0", "calls": [{"id": "t0.0", "args": "[1.0, 2.0], 0.3"}], "predicate": "__r0 == True",
     "source": "assert candidate([1.0, 2.0], 0.3) == True"}
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Modules a predicate may use (imported outside the sandbox, so only harmless stdlib modules).
ALLOWED_IMPORTS = frozenset({"math", "string", "re", "collections", "itertools", "fractions", "decimal", "copy",
                             "random", "functools", "operator", "statistics", "heapq", "bisect", "hashlib"})
RESULT_PREFIX = "__r"
_BUILTIN_NAMES = frozenset(dir(builtins))


class TestConversionError(ValueError):
    """A test cannot be converted (the message says which and why)."""

    __test__ = False  # not a pytest test class


@dataclass(frozen=True)
class CallSpec:
    id: str
    args: str  # source of the call's positional arguments, e.g. "[1, 2], 3"

    def args_tuple(self) -> str:
        """The arguments as one tuple expression (what the sandbox harness evaluates)."""
        return f"({self.args},)" if self.args.strip() else "()"


@dataclass(frozen=True)
class TestSpec:
    """One test: calls evaluated inside the sandbox, ``predicate`` evaluated outside."""

    __test__ = False  # not a pytest test class

    id: str
    calls: tuple[CallSpec, ...]
    predicate: str
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "calls": [{"id": c.id, "args": c.args} for c in self.calls],
                "predicate": self.predicate, "source": self.source}

    @classmethod
    def from_dict(cls, raw: Any, where: str = "test") -> TestSpec:
        if not isinstance(raw, dict):
            raise TestConversionError(f"{where}: expected an object, got {type(raw).__name__}")
        for key in ("id", "calls", "predicate"):
            if key not in raw:
                raise TestConversionError(f"{where}: missing field '{key}'")
        calls = raw["calls"]
        if not isinstance(calls, list) or not calls:
            raise TestConversionError(f"{where}: 'calls' must be a non-empty list")
        specs = []
        for i, c in enumerate(calls):
            if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not isinstance(c.get("args"), str):
                raise TestConversionError(f"{where}: calls[{i}] must be {{'id': str, 'args': str}}, got {c!r}")
            specs.append(CallSpec(c["id"], c["args"]))
        try:
            ast.parse(raw["predicate"], mode="eval")
        except SyntaxError as exc:
            raise TestConversionError(f"{where}: predicate is not a Python expression ({exc.msg})") from None
        return cls(str(raw["id"]), tuple(specs), raw["predicate"], str(raw.get("source", "")))


@dataclass
class Conversion:
    tests: list[TestSpec] = field(default_factory=list)
    imports: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # "line N: reason"


def with_display_name(tests: Iterable[TestSpec], param: str, name: str) -> list[TestSpec]:
    """The tests with ``param`` (e.g. ``candidate``) written as ``name`` in their display ``source``
    (what the agent reads); calls and predicates are unchanged."""
    pattern = re.compile(rf"\b{re.escape(param)}\b")
    return [TestSpec(t.id, t.calls, t.predicate, pattern.sub(name, t.source)) for t in tests]


def predicate_namespace(imports: Iterable[str] = ()) -> dict[str, Any]:
    """The trusted namespace predicates are evaluated in: builtins plus the allowed ``imports``."""
    namespace: dict[str, Any] = {"__builtins__": builtins}
    for name in imports:
        if name not in ALLOWED_IMPORTS:
            raise TestConversionError(f"import {name!r} is not allowed in tests; allowed: {sorted(ALLOWED_IMPORTS)}")
        namespace[name] = importlib.import_module(name)
    return namespace


def evaluate_predicate(test: TestSpec, values: Mapping[str, Any], namespace: Mapping[str, Any]) -> tuple[bool, str]:
    """Evaluate ``test.predicate`` with ``values`` (call id → decoded return value).

    Returns ``(passed, message)``; never raises (a failing or crashing predicate is a failed test).
    """
    scope = dict(namespace)
    for i, call in enumerate(test.calls):
        scope[f"{RESULT_PREFIX}{i}"] = values[call.id]
    try:
        ok = bool(eval(test.predicate, scope))  # noqa: S307 - trusted test code on plain decoded data
    except Exception as exc:  # the agent's value made the check itself fail: a failed test
        return False, f"{type(exc).__name__}: {exc}"
    return ok, "" if ok else "assertion failed"


# -- conversion ------------------------------------------------------------------------------------
class _CallExtractor(ast.NodeTransformer):
    """Replaces every ``candidate(...)`` with ``__rN`` and records the argument sources."""

    def __init__(self, func_name: str):
        self.func_name = func_name
        self.calls: list[ast.Call] = []

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id == self.func_name:
            for arg in [*node.args, *node.keywords]:
                if _mentions(arg, self.func_name):
                    raise TestConversionError("candidate call nested in another candidate call's arguments")
            self.calls.append(node)
            return ast.copy_location(ast.Name(f"{RESULT_PREFIX}{len(self.calls) - 1}", ast.Load()), node)
        return self.generic_visit(node)


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def _literal_source(value: Any) -> str | None:
    """``repr(value)`` when it reads back as an equal literal of the same type, else ``None``."""
    try:
        text = repr(value)
        back = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return text if type(back) is type(value) and back == value else None


def _free_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _args_source(call: ast.Call, namespace: dict[str, Any]) -> str:
    """The call's arguments as source the sandbox can evaluate on its own.

    Arguments are evaluated here (trusted test code) and written back as literals, so test-local helper
    variables never need to exist inside the sandbox. Non-literal values fall back to the original source
    when it uses builtins only.
    """
    parts: list[str] = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            raise TestConversionError("starred arguments are not supported")
        parts.append(_one_arg(arg, namespace))
    if call.keywords:
        raise TestConversionError("keyword arguments are not supported (calls take positional arguments)")
    return ", ".join(parts)


def _one_arg(node: ast.expr, namespace: dict[str, Any]) -> str:
    source = ast.unparse(node)
    try:
        value = eval(compile(ast.Expression(node), "<test>", "eval"), dict(namespace))  # noqa: S307 - trusted
    except Exception as exc:
        raise TestConversionError(f"argument {source!r} cannot be evaluated ({type(exc).__name__}: {exc})") from None
    literal = _literal_source(value)
    if literal is not None:
        return literal
    if _free_names(node) <= _BUILTIN_NAMES:
        return source
    raise TestConversionError(f"argument {source!r} is neither a literal nor builtins-only")


def _inline_names(expr: ast.expr, namespace: dict[str, Any], imports: set[str]) -> ast.expr:
    """Replace test-local names in a predicate by literal values so it is self-contained."""

    class Inliner(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            name = node.id
            if name.startswith(RESULT_PREFIX) or name in imports:
                return node
            if name in namespace and name != "__builtins__":
                literal = _literal_source(namespace[name])
                if literal is None:
                    raise TestConversionError(f"name {name!r} in the check is not a literal value")
                return ast.copy_location(ast.parse(literal, mode="eval").body, node)
            if name in _BUILTIN_NAMES:
                return node
            raise TestConversionError(f"unknown name {name!r} in the check")

    bound = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(expr) if isinstance(n, ast.Lambda) for a in n.args.args}
    if bound:
        raise TestConversionError("comprehensions/lambdas in a check are not supported")
    return Inliner().visit(expr)


def _convert_assert(node: ast.Assert, func_name: str, namespace: dict[str, Any], imports: set[str],
                    test_id: str, source: str) -> TestSpec | None:
    if not _mentions(node.test, func_name):
        return None  # e.g. `assert True, "..."`: tests nothing about the candidate
    extractor = _CallExtractor(func_name)
    expr = extractor.visit(ast.parse(ast.unparse(node.test), mode="eval").body)
    if _mentions(expr, func_name):
        raise TestConversionError("the candidate is used other than by calling it")
    calls = tuple(CallSpec(f"{test_id}.{i}", _args_source(c, namespace)) for i, c in enumerate(extractor.calls))
    predicate = ast.unparse(_inline_names(expr, namespace, imports))
    return TestSpec(test_id, calls, predicate, source)


def _run_setup(stmt: ast.stmt, namespace: dict[str, Any], imports: set[str]) -> None:
    """Execute a trusted setup statement (import or assignment) of a check outside the sandbox."""
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        modules = [a.name for a in stmt.names] if isinstance(stmt, ast.Import) else [stmt.module or ""]
        for module in modules:
            if module.split(".")[0] not in ALLOWED_IMPORTS:
                raise TestConversionError(f"import of {module!r} is not allowed")
        if isinstance(stmt, ast.Import):
            imports.update(a.asname or a.name for a in stmt.names if "." not in a.name)
    exec(compile(ast.Module([stmt], []), "<check>", "exec"), namespace)  # noqa: S102 - trusted test code


def convert_statements(body: list[ast.stmt], func_name: str, lines: list[str], start_index: int = 0,
                       imports: Iterable[str] = ()) -> Conversion:
    """Convert the statements of a check body (see the module docstring). ``imports``: modules the
    statements may use without importing them (e.g. a task file's ``"imports": ["math"]``)."""
    out = Conversion()
    namespace = predicate_namespace(imports)
    imports = set(imports)
    for stmt in body:
        where = f"line {stmt.lineno}"
        text = "\n".join(lines[stmt.lineno - 1: stmt.end_lineno]).strip() if lines else ast.unparse(stmt)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring / bare string
        if isinstance(stmt, ast.Assert):
            try:
                test = _convert_assert(stmt, func_name, namespace, imports, f"t{start_index + len(out.tests)}", text)
            except TestConversionError as exc:
                out.dropped.append(f"{where}: {exc}")
                continue
            if test is not None:
                out.tests.append(test)
            continue
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Assign | ast.AugAssign) and not _mentions(stmt, func_name):
            try:
                _run_setup(stmt, namespace, imports)
            except Exception as exc:
                out.dropped.append(f"{where}: setup statement failed ({type(exc).__name__}: {exc})")
            continue
        kind = type(stmt).__name__.lower()
        out.dropped.append(f"{where}: {kind} statement is not convertible (asserts inside loops/branches)")
    out.imports = sorted(imports)
    return out


def convert_check(test_source: str, func_name: str = "candidate") -> Conversion:
    """Convert the ``check(candidate)`` function of a HumanEval-style test module."""
    try:
        tree = ast.parse(test_source)
    except SyntaxError as exc:
        raise TestConversionError(f"test source does not parse: line {exc.lineno}: {exc.msg}") from None
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks:
        raise TestConversionError("test source has no 'def check(candidate):'")
    check = checks[0]
    param = check.args.args[0].arg if check.args.args else func_name
    return convert_statements(check.body, param, test_source.splitlines())


def convert_asserts(asserts: list[str], func_name: str = "candidate", imports: Iterable[str] = ()) -> Conversion:
    """Convert assert statements written as strings (``"assert f(1) == 2"``; ``assert`` is optional).

    ``func_name`` is the name the asserts call (the task's entry point, or ``candidate``).
    Setup lines (``import math``, ``xs = [1, 2]``) may appear between them.
    """
    body: list[ast.stmt] = []
    for i, text in enumerate(asserts):
        if not isinstance(text, str):
            raise TestConversionError(f"tests[{i}]: expected a string, got {type(text).__name__}")
        stripped = text.strip()
        try:
            tree = ast.parse(stripped)
        except SyntaxError:
            tree = None
        if tree is None or (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
                            and not isinstance(tree.body[0].value, ast.Constant)):
            try:
                tree = ast.parse(f"assert {stripped}")
            except SyntaxError as exc:
                raise TestConversionError(f"tests[{i}]: not a Python assert ({exc.msg}): {stripped!r}") from None
        for stmt in tree.body:
            ast.increment_lineno(stmt, i)
            body.append(stmt)
    return convert_statements(body, func_name, [], imports=imports)
