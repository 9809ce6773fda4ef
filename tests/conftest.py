"""Shared fixtures. Tests use tiny random models; `slow` tests load the real embedded 135M model."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_path():
    """Directory of a tiny random Llama with the embedded model's tokenizer and chat template."""
    from agentic_rl.models import tiny_model_dir

    return tiny_model_dir()


@pytest.fixture(scope="session")
def tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)
