"""The action grammar shared by every environment and the policy.

A policy turn is plain text. It may start with reasoning, then holds exactly one action::

    <think>free-form reasoning (optional)</think>
    <tool>{"name": "calculator", "arguments": {"expression": "1234*5678"}}</tool>   # kind "tool_call"
    <answer>7006652</answer>                                                          # kind "answer"
    <action>click 3</action>                                                          # kind "command"
    ```python                                                                         # kind "code"
    print("hello")
    ```

Rules (what :func:`parse` enforces):

- ``<think>`` must be closed if opened; text outside the elements is ignored.
- The *first* action element in the text is the action; later ones are ignored (``Action.extra`` says so).
- A tool call body is a JSON object with a string ``name`` and an optional object ``arguments``.
- Tags are lower-case and case-sensitive; surrounding whitespace inside a tag is stripped.
- An environment declares the kinds it accepts; any other kind is a :class:`ParseError` whose message
  lists the accepted kinds, so the env can show it to the agent.

The helpers :func:`tool_call`, :func:`answer`, :func:`command` and :func:`code` write canonical text
(experts use them, so demonstrations are in exactly the format the parser reads).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

ACTION_KINDS = ("tool_call", "answer", "command", "code")
#: Strings after which a policy turn is complete; the engine stops decoding there.
STOP_STRINGS = ("</tool>", "</answer>", "</action>")

#: The text that starts an action of each kind: forcing one and letting the policy write the rest explores
#: *which kind* of action to take (see ``explore`` in :func:`agentic_rl.rollout.rollout`).
OPENERS = {"tool_call": "<tool>", "answer": "<answer>", "command": "<action>", "code": "```"}

_TAG_KINDS = (("<tool>", "</tool>", "tool_call"), ("<answer>", "</answer>", "answer"),
              ("<action>", "</action>", "command"))
_FENCE_HEADER_RE = re.compile(r"```([A-Za-z0-9_+-]{0,32})[ \t]*\n")
_MAX_ECHO = 80


@dataclass(frozen=True)
class Action:
    """One parsed action.

    ``kind`` is one of :data:`ACTION_KINDS`. ``name``/``arguments`` are set for tool calls, ``text`` for
    answers and commands, ``code``/``language`` for code blocks. ``reasoning`` is the ``<think>`` body.
    """

    kind: str
    reasoning: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    code: str = ""
    language: str = ""
    extra: bool = False  # more than one action element was present; only the first counts

    def key(self) -> str:
        """A canonical string identifying what the action does (for loop detection, audits)."""
        if self.kind == "tool_call":
            return f"tool:{self.name}:{json.dumps(self.arguments, sort_keys=True)}"
        if self.kind == "code":
            return f"code:{self.code.strip()}"
        return f"{self.kind}:{self.text.strip()}"


@dataclass(frozen=True)
class ParseError:
    """The text is not a valid action. ``message`` is written for the agent to read."""

    message: str
    kind: str = "parse_error"

    def __bool__(self) -> bool:  # lets callers write `if not result:` for errors
        return False


def _short(text: str) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= _MAX_ECHO else text[: _MAX_ECHO - 3] + "..."


def parse(text: Any, accept: Iterable[str] | None = None) -> Action | ParseError:
    """Parse one policy turn into an :class:`Action`, or a :class:`ParseError` naming the problem.

    ``accept`` restricts the kinds (default: all). Never raises for any string input; a non-string
    raises :class:`TypeError` (that is a programming error, not an agent error).
    """
    if not isinstance(text, str):
        raise TypeError(f"action must be a str, got {type(text).__name__}")
    accepted = tuple(accept) if accept is not None else ACTION_KINDS
    for kind in accepted:
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {kind!r}; valid kinds: {', '.join(ACTION_KINDS)}")
    hint = "expected one of: " + ", ".join(_TEMPLATES[k] for k in accepted)

    reasoning = ""
    body = text
    # str.find-based scanning keeps parsing linear in the text length (a regex with lazy bodies is
    # quadratic on many unclosed tags, and actions can be a megabyte of adversarial text).
    think_open = text.find("<think>")
    if think_open >= 0:
        think_close = text.find("</think>", think_open + 7)
        if think_close < 0:
            return ParseError("unclosed <think>: close your reasoning with </think>, then act. " + hint)
        reasoning = text[think_open + 7 : think_close].strip()
        body = text[:think_open] + text[think_close + 8 :]

    element = _first_element(body)
    if element is None:
        if not body.strip():
            return ParseError("empty action. " + hint)
        return ParseError(f"no action found in {_short(body.strip())!r}. " + hint)
    kind, content, lang, end = element
    extra = _first_element(body[end:]) is not None
    if kind not in accepted:
        return ParseError(f"this environment does not accept {kind} actions; " + hint)

    if kind == "tool_call":
        raw = content.strip()
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # ValueError also covers ints over Python's digit limit
            msg = getattr(exc, "msg", None) or ("too deeply nested" if isinstance(exc, RecursionError) else str(exc))
            return ParseError(f"tool call is not valid JSON ({msg}): {_short(raw)!r}. " + hint)
        if not isinstance(obj, dict):
            return ParseError('tool call must be a JSON object like {"name": ..., "arguments": {...}}')
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            return ParseError('tool call needs a string "name"')
        arguments = obj.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return ParseError(f'tool call "arguments" must be a JSON object, got {type(arguments).__name__}')
        unknown = set(obj) - {"name", "arguments"}
        if unknown:
            return ParseError(f'tool call has unknown key(s) {sorted(unknown)}; use "name" and "arguments"')
        return Action("tool_call", reasoning, name=name, arguments=arguments, extra=extra)
    if kind == "code":
        return Action("code", reasoning, code=content, language=lang, extra=extra)
    value = content.strip()
    if not value:
        return ParseError(f"empty <{_TAGS[kind]}> element. " + hint)
    return Action(kind, reasoning, text=value, extra=extra)


_TAGS = {"answer": "answer", "command": "action"}
_TEMPLATES = {
    "tool_call": '<tool>{"name": TOOL, "arguments": {...}}</tool>',
    "answer": "<answer>...</answer>",
    "command": "<action>...</action>",
    "code": "```python ... ```",
}


def _first_element(text: str) -> tuple[str, str, str, int] | None:
    """The earliest complete action element: (kind, body, code language, end index) or None."""
    best: tuple[int, str, str, str, int] | None = None
    for open_tag, close_tag, kind in _TAG_KINDS:
        start = text.find(open_tag)
        if start < 0 or (best is not None and start > best[0]):
            continue
        close = text.find(close_tag, start + len(open_tag))
        if close >= 0:
            best = (start, kind, text[start + len(open_tag) : close], "", close + len(close_tag))
    start = text.find("```")
    while start >= 0 and (best is None or start < best[0]):
        header = _FENCE_HEADER_RE.match(text, start)
        if header is None:
            start = text.find("```", start + 3)
            continue
        close = text.find("```", header.end())
        if close >= 0:
            best = (start, "code", text[header.end() : close], header.group(1), close + 3)
        break
    return None if best is None else best[1:]


def grammar_help(accept: Iterable[str]) -> str:
    """One line per accepted kind, for system prompts and error messages."""
    return "\n".join(_TEMPLATES[k] for k in accept)


# -- canonical writers (used by experts and tests) ---------------------------------------------
def _with_reasoning(reasoning: str, body: str) -> str:
    return f"<think>{reasoning}</think>{body}" if reasoning else body


def tool_call(name: str, arguments: dict[str, Any] | None = None, reasoning: str = "") -> str:
    payload = json.dumps({"name": name, "arguments": arguments or {}}, ensure_ascii=False)
    return _with_reasoning(reasoning, f"<tool>{payload}</tool>")


def answer(text: Any, reasoning: str = "") -> str:
    return _with_reasoning(reasoning, f"<answer>{text}</answer>")


def command(text: str, reasoning: str = "") -> str:
    return _with_reasoning(reasoning, f"<action>{text}</action>")


def code(source: str, language: str = "python", reasoning: str = "") -> str:
    if not source.endswith("\n"):
        source += "\n"
    return _with_reasoning(reasoning, f"```{language}\n{source}```")
