import os

import pytest
import torch

from redlib.models.folders import embedded_path

os.environ.setdefault("REDLIB_PROGRESS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    """A throwaway results root; returns the path to pass as results_dir."""
    return tmp_path / "results"


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory):
    """A randomly initialised 4-block Qwen3 saved to disk with a (BERT) tokenizer: the decoder path, offline."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

    path = tmp_path_factory.mktemp("tiny_qwen3")
    tok = AutoTokenizer.from_pretrained(embedded_path(), local_files_only=True)
    cfg = Qwen3Config(vocab_size=tok.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8)
    torch.manual_seed(0)
    Qwen3Model(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path
