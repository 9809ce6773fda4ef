"""Models: the embedded SmolLM2-135M, HF directories, LoRA, the KV-cache decoder and logprob utilities."""

from agentic_rl.models.hub import (
    EMBEDDED,
    cache_dir,
    embedded_gguf,
    ensure_converted,
    load_tokenizer,
    resolve,
    tiny_model_dir,
)
from agentic_rl.models.logprobs import sequence_logprobs
from agentic_rl.models.policy import Policy, ensure_chat_template, load_policy

__all__ = [
    "EMBEDDED",
    "Policy",
    "cache_dir",
    "embedded_gguf",
    "ensure_chat_template",
    "ensure_converted",
    "load_policy",
    "load_tokenizer",
    "resolve",
    "sequence_logprobs",
    "tiny_model_dir",
]
