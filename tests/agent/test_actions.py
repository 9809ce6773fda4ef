import pytest

from agentic_rl.agent import Action, ParseError, answer, code, command, parse, tool_call


def test_tool_call_round_trip_with_reasoning():
    text = tool_call("calculator", {"expression": "12*34"}, reasoning="big product")
    act = parse(text)
    assert isinstance(act, Action)
    assert (act.kind, act.name, act.arguments, act.reasoning) == ("tool_call", "calculator", {"expression": "12*34"}, "big product")


@pytest.mark.parametrize(
    ("text", "kind", "field", "value"),
    [
        (answer("42"), "answer", "text", "42"),
        (command("go north"), "command", "text", "go north"),
        (code("print(1)"), "code", "code", "print(1)\n"),
        ("noise before <answer> 7 </answer> noise after", "answer", "text", "7"),
    ],
)
def test_each_kind_parses(text, kind, field, value):
    act = parse(text)
    assert act.kind == kind and getattr(act, field) == value


def test_first_action_wins_and_extra_is_flagged():
    act = parse("<answer>1</answer><answer>2</answer>")
    assert act.text == "1" and act.extra


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty action"),
        ("I think it is 5", "no action found"),
        ("<tool>{not json}</tool>", "not valid JSON"),
        ('<tool>["calculator"]</tool>', "JSON object"),
        ('<tool>{"arguments": {}}</tool>', '"name"'),
        ('<tool>{"name": "x", "arguments": 3}</tool>', "arguments"),
        ("<think>unclosed <answer>1</answer>", "unclosed <think>"),
        ("<answer>   </answer>", "empty <answer>"),
    ],
)
def test_errors_explain_the_problem(text, needle):
    result = parse(text)
    assert isinstance(result, ParseError) and needle in result.message


def test_kind_not_accepted_lists_accepted_kinds():
    result = parse(command("ls"), accept=("tool_call", "answer"))
    assert isinstance(result, ParseError)
    assert "<answer>" in result.message and "<tool>" in result.message


def test_non_string_is_a_type_error():
    with pytest.raises(TypeError):
        parse(b"<answer>1</answer>")


@pytest.mark.parametrize("text", ["<tool>" * 200_000, "<think>" * 200_000, "```" * 200_000,
                                  '<tool>{"name": "x", "arguments": {"n": ' + "9" * 5000 + "}}</tool>", "\x00" * 10, "<tool>" + "[" * 100000 + "</tool>", "\ud800", "<" * 5000, "x" * (1 << 20)])
def test_adversarial_strings_never_raise(text):
    assert isinstance(parse(text), (Action, ParseError))
