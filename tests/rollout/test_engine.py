"""RolloutEngine turn mechanics: stop strings, limits, the Engine protocol."""

from __future__ import annotations

from agentic_rl.rollout import Engine, SamplingParams


def _run_turn(engine, prompt, params):
    engine.prepare(seed=3)
    seq = engine.open(prompt)[0]
    engine.generate(seq, [], params)
    outputs = []
    while engine.has_work():
        outputs += engine.step()
    engine.close(seq)
    return outputs[0]


def test_engine_satisfies_the_protocol(engine):
    assert isinstance(engine, Engine)


def test_turn_ends_at_a_stop_string_or_the_token_limit(engine):
    fmt = engine.format
    prompt = fmt.prompt_ids("S", "Say something.")
    free = _run_turn(engine, prompt, SamplingParams(max_new_tokens=6, stop=()))
    assert free.finish_reason == "length" and len(free.token_ids) == 6
    texts = [fmt.decode(free.token_ids[:k]) for k in range(7)]
    k = next(k for k in range(2, 7) if fmt.decode(free.token_ids[k - 1:k]).strip()
             and fmt.decode(free.token_ids[k - 1:k]) not in texts[k - 1])
    stop = fmt.decode(free.token_ids[k - 1:k])
    stopped = _run_turn(engine, prompt, SamplingParams(max_new_tokens=6, stop=(stop,)))
    assert stopped.finish_reason == "stop" and stopped.token_ids == free.token_ids[:k]
    assert stopped.logprobs == free.logprobs[:k]


def test_turn_stops_at_max_context(tiny_policy):
    from agentic_rl.rollout import RolloutEngine

    small = RolloutEngine(tiny_policy, max_context=40, max_batch=2)
    prompt = small.format.prompt_ids("S", "Say something.")
    out = _run_turn(small, prompt, SamplingParams(greedy=True, max_new_tokens=100, stop=()))
    assert out.finish_reason == "context" and len(prompt) + len(out.token_ids) == 40
