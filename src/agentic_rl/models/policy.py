"""The policy: a causal LM + its tokenizer, optionally LoRA-wrapped, with save/load.

``load_policy("smollm2-135m")`` loads the embedded model (converted once, see :mod:`.hub`);
a local HF directory or a hub id works too. ``lora=`` wraps the model with ``peft``;
``trainable_layers=n`` (full fine-tuning only) freezes everything except the last ``n`` decoder
layers and the final norm — on a 2-core CPU LoRA is *slower* than full fine-tuning of a 135M model,
so freezing layers is the cheap way to cut backward cost.

``dtype="auto"`` means fp32 on CPU (bf16 matmul is ~400x slower on CPUs without AVX-512 BF16) and
bf16 on CUDA when supported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from agentic_rl.models.hub import EMBEDDED, resolve

#: ChatML, used only when a tokenizer ships no chat template (documented fallback).
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_POLICY_META = "agentic_rl_policy.json"


def pick_device(device: str = "auto") -> torch.device:
    """``auto`` → CUDA when available, else CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str | torch.dtype = "auto", device: torch.device | None = None) -> torch.dtype:
    """``auto`` → bf16 on a bf16-capable GPU, fp32 everywhere else."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device is not None and device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
             "float16": torch.float16, "fp16": torch.float16}
    if dtype not in table:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(table)}, got {dtype!r}")
    return table[dtype]


def ensure_chat_template(tokenizer: Any) -> Any:
    """Give a tokenizer without a chat template the ChatML fallback (and its two special tokens).

    Adding tokens grows the vocabulary; :func:`load_policy` resizes the embeddings to match.
    """
    if getattr(tokenizer, "chat_template", None):
        return tokenizer
    missing = [t for t in ("<|im_start|>", "<|im_end|>") if t not in tokenizer.get_vocab()]
    if missing:
        tokenizer.add_special_tokens({"additional_special_tokens": missing})
    tokenizer.chat_template = CHATML_TEMPLATE
    if tokenizer.eos_token is None:
        tokenizer.eos_token = "<|im_end|>"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


@dataclass
class Policy:
    """A causal LM and its tokenizer. ``model`` may be a ``peft.PeftModel`` (then ``is_lora``)."""

    model: Any
    tokenizer: Any
    name: str = ""
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    dtype: torch.dtype = torch.float32

    @property
    def is_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    @property
    def base_model(self) -> Any:
        """The underlying ``*ForCausalLM`` (unwrapped from peft)."""
        return self.model.get_base_model() if self.is_lora else self.model

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def set_trainable_layers(self, trainable_layers: int) -> None:
        """Train only the last ``trainable_layers`` decoder blocks (and the final norm) from now on.

        Full fine-tuning only: e.g. SFT of every block, then RL of the top ones (cheaper updates).
        """
        if self.is_lora:
            raise ValueError("set_trainable_layers applies to full fine-tuning; a LoRA policy trains its adapter")
        _freeze_all_but_last(self.model, trainable_layers)

    def num_parameters(self, trainable_only: bool = False) -> int:
        params = self.trainable_parameters() if trainable_only else list(self.model.parameters())
        return sum(p.numel() for p in params)

    def save(self, directory: str | Path) -> Path:
        """Write the adapter (LoRA) or the full weights, plus the tokenizer, into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        meta = {"name": self.name, "lora": self.is_lora, "dtype": str(self.dtype).removeprefix("torch.")}
        if self.is_lora:
            meta["base"] = str(self.model.peft_config["default"].base_model_name_or_path or self.name)
        (directory / _POLICY_META).write_text(json.dumps(meta, indent=1))
        return directory

    @classmethod
    def load(cls, directory: str | Path, *, dtype: str | torch.dtype = "auto", device: str = "auto",
             is_trainable: bool = True) -> Policy:
        """Load what :meth:`save` wrote (an adapter directory is applied to its recorded base model)."""
        directory = Path(directory)
        meta_path = directory / _POLICY_META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if meta.get("lora") or (directory / "adapter_config.json").exists():
            from peft import PeftModel

            base_name = meta.get("base") or json.loads((directory / "adapter_config.json").read_text()).get(
                "base_model_name_or_path")
            base = load_policy(base_name, dtype=dtype, device=device)
            model = PeftModel.from_pretrained(base.model, directory, is_trainable=is_trainable)
            tokenizer = _load_tokenizer(directory)
            return cls(model, tokenizer, meta.get("name", base.name), base.device, base.dtype)
        return load_policy(str(directory), dtype=dtype, device=device)


def _load_tokenizer(source: Any) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    ensure_chat_template(tokenizer)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _lora_config(lora: Any) -> Any:
    from peft import LoraConfig

    if isinstance(lora, LoraConfig):
        return lora
    if not isinstance(lora, dict):
        raise TypeError(f"lora must be None, a dict of LoraConfig fields or a peft.LoraConfig, got {type(lora).__name__}")
    options = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "task_type": "CAUSAL_LM",
               "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}
    options.update(lora)
    return LoraConfig(**options)


def _freeze_all_but_last(model: Any, trainable_layers: int) -> None:
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError(f"trainable_layers needs a decoder with model.layers; {type(model).__name__} has none")
    if not 0 <= trainable_layers <= len(layers):
        raise ValueError(f"trainable_layers must be in [0, {len(layers)}], got {trainable_layers}")
    for p in model.parameters():
        p.requires_grad_(False)
    for layer in list(layers)[len(layers) - trainable_layers:] if trainable_layers else []:
        for p in layer.parameters():
            p.requires_grad_(True)
    norm = getattr(model.model, "norm", None)
    if norm is not None and trainable_layers:
        for p in norm.parameters():
            p.requires_grad_(True)


def load_policy(name_or_path: str = "smollm2-135m", lora: Any = None, *, dtype: str | torch.dtype = "auto",
                device: str = "auto", trainable_layers: int | None = None) -> Policy:
    """Load a policy.

    ``name_or_path``: an embedded name (``smollm2-135m``), a local HF model directory, a directory
    written by :meth:`Policy.save`, or a hub id (only when the hub is reachable). An unknown name raises
    ``KeyError`` listing the embedded models. ``lora``: ``None`` (full fine-tuning), a dict of
    ``peft.LoraConfig`` fields (defaults r=16, alpha=32, all projections) or a ``LoraConfig``.
    """
    from transformers import AutoModelForCausalLM

    path = Path(str(name_or_path)).expanduser()
    if (path / "adapter_config.json").exists():
        return Policy.load(path, dtype=dtype, device=device)
    source = resolve(str(name_or_path))
    torch_device = pick_device(device)
    torch_dtype = pick_dtype(dtype, torch_device)
    tokenizer = _load_tokenizer(source)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    if model.get_input_embeddings().weight.shape[0] < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))  # the ChatML fallback added tokens
    model.to(torch_device)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if trainable_layers is not None:
        if lora is not None:
            raise ValueError("trainable_layers applies to full fine-tuning; with lora= the adapter is what trains")
        _freeze_all_but_last(model, trainable_layers)
    if lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, _lora_config(lora))
    name = name_or_path if name_or_path in EMBEDDED else str(name_or_path)
    return Policy(model, tokenizer, name, torch_device, torch_dtype)
