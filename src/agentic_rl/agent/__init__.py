"""The agent side of the text interface: action grammar, prompt rendering and episode memory."""

from agentic_rl.agent.actions import (
    ACTION_KINDS,
    STOP_STRINGS,
    Action,
    ParseError,
    answer,
    code,
    command,
    grammar_help,
    parse,
    tool_call,
)

__all__ = [
    "ACTION_KINDS",
    "STOP_STRINGS",
    "Action",
    "ParseError",
    "answer",
    "code",
    "command",
    "grammar_help",
    "parse",
    "tool_call",
]
