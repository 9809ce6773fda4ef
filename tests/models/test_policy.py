"""Loading policies: names, LoRA, freezing, save/load, chat-template fallback."""

from __future__ import annotations

import pytest
import torch

from agentic_rl.models import Policy, ensure_chat_template, load_policy


def test_unknown_model_name_lists_the_embedded_ones():
    with pytest.raises(KeyError, match="smollm2-135m"):
        load_policy("no-such-model")


def test_full_policy_save_and_load_round_trip(tiny_model_path, tmp_path):
    policy = load_policy(str(tiny_model_path))
    assert policy.dtype == torch.float32 and not policy.is_lora
    with torch.no_grad():
        policy.model.lm_head.weight.add_(0.01)  # tied to the embeddings
    policy.save(tmp_path / "p")
    loaded = Policy.load(tmp_path / "p")
    ids = torch.tensor([[1, 9690, 198, 67, 2]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids).logits, policy.model(ids).logits)


def test_lora_policy_trains_only_the_adapter_and_reloads(tiny_model_path, tmp_path):
    policy = load_policy(str(tiny_model_path), lora={"r": 4})
    assert policy.is_lora
    trainable = policy.trainable_parameters()
    assert trainable and all("lora_" in n for n, p in policy.model.named_parameters() if p.requires_grad)
    assert policy.num_parameters(trainable_only=True) < policy.num_parameters() / 10
    for name, p in policy.model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)
    policy.save(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    loaded = load_policy(str(tmp_path / "adapter"))
    assert loaded.is_lora
    ids = torch.tensor([[1, 9690, 198, 67, 2]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids).logits, policy.model(ids).logits)


def test_trainable_layers_freezes_all_but_the_last(tiny_model_path):
    policy = load_policy(str(tiny_model_path), trainable_layers=1)
    names = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert names and all(n.startswith(("model.layers.1.", "model.norm")) for n in names)
    with pytest.raises(ValueError, match="trainable_layers"):
        load_policy(str(tiny_model_path), trainable_layers=5)


def test_set_trainable_layers_narrows_training_after_loading(tiny_model_path):
    """SFT of every block, then RL of the top ones: the switch refreezes in place."""
    policy = load_policy(str(tiny_model_path), trainable_layers=2)
    assert any(n.startswith("model.layers.0.") for n, p in policy.model.named_parameters() if p.requires_grad)
    policy.set_trainable_layers(1)
    names = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert names and all(n.startswith(("model.layers.1.", "model.norm")) for n in names)
    with pytest.raises(ValueError, match="trainable_layers"):
        policy.set_trainable_layers(3)
    lora = load_policy(str(tiny_model_path), lora={"r": 2})
    with pytest.raises(ValueError, match="LoRA"):
        lora.set_trainable_layers(1)


def test_tokenizer_without_chat_template_gets_chatml(tokenizer):
    import copy

    bare = copy.deepcopy(tokenizer)
    bare.chat_template = None
    ensure_chat_template(bare)
    text = bare.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
