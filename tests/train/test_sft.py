"""SFT: loss only on the agent's tokens, it learns the demonstrations, bad data files are named."""

from __future__ import annotations

import json

import pytest
from toy import FAST

from agentic_rl.train import load_demonstrations, train_sft
from agentic_rl.train.sft import demonstration_samples


def _write_conversations(path, n=12):
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"system": "Answer briefly.", "messages": [
                {"role": "user", "content": f"Question {i}: what is the colour?"},
                {"role": "assistant", "content": "<answer>blue</answer>"},
                {"role": "user", "content": "Tool output: ok"},
                {"role": "assistant", "content": "<answer>green</answer>"}]}) + "\n")


def test_loss_mask_covers_only_assistant_tokens(tokenizer, tmp_path):
    path = tmp_path / "demos.jsonl"
    _write_conversations(path, n=1)
    [sample] = demonstration_samples(tokenizer, load_demonstrations(path))
    trained = tokenizer.decode([t for t, m in zip(sample.token_ids, sample.loss_mask, strict=True) if m])
    assert "blue" in trained and "green" in trained
    assert "colour" not in trained and "Tool output" not in trained and "Answer briefly" not in trained


def test_sft_learns_the_demonstrations(tiny_policy, tmp_path):
    path = tmp_path / "demos.jsonl"
    _write_conversations(path)
    result = train_sft(policy=tiny_policy, run_dir=str(tmp_path / "run"), sft_data=str(path), sft_epochs=4,
                       sft_lr=0.01, sft_batch_size=4, val_fraction=0.25, sft_eval_success=False,
                       tensorboard=False)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["loss/sft_val"] < 0.5 * rows[0]["loss/sft_val"]
    assert (tmp_path / "run" / "checkpoints" / "best" / "trainer_state.json").exists()
    assert result.val_loss == rows[-1]["loss/sft_val"]


def test_sft_then_rl_with_sft_mixing(tiny_policy, tmp_path):
    from toy import LetterEnv, letter_tasks

    from agentic_rl.train import train_rl

    path = tmp_path / "demos.jsonl"
    _write_conversations(path, n=4)
    sft = train_sft(policy=tiny_policy, run_dir=str(tmp_path / "sft"), sft_data=str(path), sft_epochs=1,
                    val_fraction=0.0, sft_eval_success=False, tensorboard=False)
    mix = demonstration_samples(tiny_policy.tokenizer, load_demonstrations(path))
    result = train_rl(policy=sft.policy, env=LetterEnv, tasks=letter_tasks(), run_dir=str(tmp_path / "rl"),
                      sft_samples=mix, sft_mix_coef=0.5, iterations=2, lr=0.01, eval_every=0,
                      **dict(FAST, group_size=4, tasks_per_iteration=2))
    assert result.stop_reason == "completed"


def test_bad_conversation_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n"
                    + json.dumps({"messages": [{"role": "assistant", "content": "a"}]}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: no assistant message"):
        load_demonstrations(path)
    path.write_text(json.dumps({"messages": [{"role": "assistant", "content": "a"}]}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: messages\[0\] must be \{'role': 'user'"):
        load_demonstrations(path)
