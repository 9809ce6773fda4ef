"""Models: the embedded SmolLM2-135M, HF directories, LoRA, and the generation engine."""

from agentic_rl.models.hub import (
    EMBEDDED,
    cache_dir,
    embedded_gguf,
    ensure_converted,
    load_tokenizer,
    resolve,
    tiny_model_dir,
)

__all__ = ["EMBEDDED", "cache_dir", "embedded_gguf", "ensure_converted", "load_tokenizer", "resolve", "tiny_model_dir"]
