from agentic_rl import make


def test_invalid_action_budget_truncates_and_resets():
    env = make("tool-use-v0", max_invalid_actions=2)
    env.reset(seed=0)
    assert env.step("not an action")[3] is False
    _, reward, terminated, truncated, info = env.step("<tool>{broken</tool>")
    assert truncated and not terminated and info["error"] == "parse_error" and reward < 0
    env.reset(seed=0)  # the budget is per episode
    assert env.step("still not an action")[3] is False


def test_no_budget_by_default():
    env = make("tool-use-v0", max_steps=20)
    env.reset(seed=0)
    assert not any(env.step("junk")[3] for _ in range(5))
