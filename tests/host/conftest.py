"""Fixtures for advanced-mode tests: a tiny synthetic chat model (random weights, a locally trained
tokenizer, a Qwen-style chat template with tools) and teacher-forced replies through it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(scope="session")
def chat_model_dir(tmp_path_factory) -> Path:
    """The synthetic chat checkpoint folder (loads with stock ``from_pretrained``)."""
    import torch
    from chatmodel import make_chat_model

    torch.set_num_threads(1)
    return make_chat_model(tmp_path_factory.mktemp("chat-model"))


@pytest.fixture(scope="session")
def chat_model(chat_model_dir):
    """(model, tokenizer) of the synthetic chat checkpoint."""
    from qwengpu.host.repliers import load_chat_model

    return load_chat_model(str(chat_model_dir))
