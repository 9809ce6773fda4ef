"""Adversarial and random action texts for :func:`agentic_rl.env.checker.check_env`.

An env must answer every string with an observation and a reward, never an exception. These inputs are
what a weak or adversarial policy writes: empty turns, megabytes, NUL bytes, broken JSON, exotic
Unicode, control characters, lone surrogates, JSON nested past the recursion limit, numbers past float
range or past Python's int-string limit, and well-formed actions with hostile contents.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence

from agentic_rl.agent.actions import answer, code, command, tool_call

#: The largest action the checker sends (the base Env's action space allows up to 1 MiB characters).
ONE_MB = 1 << 20

_CONTROL = "".join(chr(i) for i in range(32)) + "\x7f"
_UNICODE = "中文 العربية עברית Ελληνικά 😀🚀👨‍👩‍👧 e\u0301 \u202eRTL\u202c \u200bzero\u200d width \ufeff"
_HOSTILE_CONTENTS = (
    "",
    " ",
    "\x00" * 16,
    _CONTROL,
    "\x1b[2J\x1b[31mred\x1b[0m\r\r\n",
    _UNICODE,
    "\ud800 lone \udfff surrogates",
    "9" * 5000,  # past Python's int-from-string limit (4300 digits)
    "1e309",
    "-0",
    "nan",
    "inf",
    "-1",
    "0x7fffffffffffffff",
    "../../../../etc/passwd",
    "'; DROP TABLE users; --",
    "${HOME} $(echo hi) `echo hi`",
    "{{7*7}} %s %n",
    "</answer></action></tool>",
    "x" * 100_000,
)


def _nested_json(depth: int) -> str:
    return '{"name": "x", "arguments": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


def adversarial_actions() -> list[tuple[str, str]]:
    """``(label, action_text)`` pairs: raw hostile strings, then hostile contents inside every action kind."""
    raw: list[tuple[str, str]] = [
        ("empty", ""),
        ("whitespace", " \n\t\r "),
        ("1 MB of text", "a" * ONE_MB),
        ("1 MB answer", answer("x" * (ONE_MB - len(answer(""))))),
        ("NUL bytes", "\x00" * 64),
        ("control characters", _CONTROL),
        ("unicode", _UNICODE),
        ("lone surrogate", "\ud800"),
        ("invalid JSON: truncated", '<tool>{"name": </tool>'),
        ("invalid JSON: not JSON", "<tool>not json at all</tool>"),
        ("invalid JSON: a list", '<tool>["calculator", 1]</tool>'),
        ("invalid JSON: name not a string", '<tool>{"name": 5}</tool>'),
        ("invalid JSON: arguments a list", '<tool>{"name": "x", "arguments": [1, 2]}</tool>'),
        ("invalid JSON: NaN", '<tool>{"name": "x", "arguments": {"a": NaN}}</tool>'),
        ("invalid JSON: extra keys", '<tool>{"name": "x", "arguments": {}, "evil": true}</tool>'),
        ("deeply nested JSON array", "<tool>" + "[" * 100_000 + "]" * 100_000 + "</tool>"),
        ("deeply nested JSON object", "<tool>" + _nested_json(5_000) + "</tool>"),
        ("huge float", '<tool>{"name": "x", "arguments": {"n": 1e999999}}</tool>'),
        ("huge integer", '<tool>{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}</tool>"),
        ("unclosed think", "<think>I will now"),
        ("empty think", "<think></think>"),
        ("empty answer", "<answer></answer>"),
        ("empty tool", "<tool></tool>"),
        ("empty command", "<action></action>"),
        ("empty code block", "```python\n```"),
        ("unclosed code block", "```python\nprint(1)\n"),
        ("nested tags", "<answer><answer>x</answer></answer>"),
        ("reversed tags", "</answer>x<answer>"),
        ("many open tags", "<tool>" * 2000),
        ("two actions", answer("a") + answer("b")),
    ]
    wrapped: list[tuple[str, str]] = []
    for i, content in enumerate(_HOSTILE_CONTENTS):
        label = f"hostile content #{i}"
        wrapped += [
            (f"{label} as answer", f"<answer>{content}</answer>"),
            (f"{label} as command", f"<action>{content}</action>"),
            (f"{label} as tool name", "<tool>" + json.dumps({"name": content, "arguments": {}}) + "</tool>"),
            (f"{label} as tool argument", "<tool>" + json.dumps({"name": "x", "arguments": {"q": content}}) + "</tool>"),
            (f"{label} as code", f"```python\n{content}\n```"),
        ]
    return raw + wrapped


_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,30}|\d{1,12}")


class RandomActions:
    """Random action texts, biased toward what the env might accept so that the fuzzing reaches past
    the parser: words and numbers seen in observations, admissible actions, the env's tool names."""

    def __init__(self, rng: random.Random, accepted: Sequence[str]):
        self.rng = rng
        self.accepted = list(accepted) or ["answer"]
        self.vocabulary: list[str] = ["0", "1", "-1", "yes", "no", "help", "search", "open", "look"]

    def observe(self, text: str) -> None:
        """Learn words from an observation or system prompt (kept to a bounded vocabulary)."""
        words = _WORD_RE.findall(text[:4000])
        self.vocabulary.extend(words[:50])
        if len(self.vocabulary) > 2000:
            self.vocabulary = self.vocabulary[-1000:]

    def next(self, admissible: Sequence[str] = ()) -> str:
        roll = self.rng.random()
        if admissible and roll < 0.15:
            return self.rng.choice(list(admissible))
        if roll < 0.30:
            return self._noise()
        if roll < 0.40:
            return self._mutate(self._well_formed())
        return self._well_formed()

    def _phrase(self) -> str:
        return " ".join(self.rng.choice(self.vocabulary) for _ in range(self.rng.randint(1, 4)))

    def _value(self) -> object:
        kind = self.rng.randrange(6)
        if kind == 0:
            return self.rng.randint(-10**6, 10**6)
        if kind == 1:
            return self.rng.uniform(-1e6, 1e6)
        if kind == 2:
            return None
        if kind == 3:
            return [self.rng.choice(self.vocabulary)]
        return self._phrase()

    def _well_formed(self) -> str:
        kind = self.rng.choice(self.accepted)
        if kind == "tool_call":
            name = self.rng.choice(self.vocabulary)
            arguments = {self.rng.choice(self.vocabulary): self._value() for _ in range(self.rng.randint(0, 3))}
            return tool_call(name, arguments)
        if kind == "command":
            return command(self._phrase())
        if kind == "code":
            return code(f"print({self._phrase()!r})")
        return answer(self._phrase())

    def _noise(self) -> str:
        length = self.rng.randint(0, 200)
        points = []
        for _ in range(length):
            band = self.rng.random()
            if band < 0.6:
                points.append(self.rng.randint(32, 126))
            elif band < 0.7:
                points.append(self.rng.randint(0, 31))
            elif band < 0.95:
                points.append(self.rng.randint(0x80, 0xFFFF))
            else:
                points.append(self.rng.randint(0x10000, 0x10FFFF))
        return "".join(map(chr, points))  # may contain lone surrogates (0xD800-0xDFFF) on purpose

    def _mutate(self, text: str) -> str:
        if not text:
            return text
        cut = self.rng.randrange(len(text))
        how = self.rng.randrange(3)
        if how == 0:
            return text[:cut]
        if how == 1:
            return text[:cut] + self._noise()[:10] + text[cut:]
        return text[:cut] + text[cut + 1:]
