"""A Hugging Face backbone from a local folder: mean pooling, top-k trainable blocks, frozen-prefix forward.

Works for encoders (BERT-like: `encoder.layer`) and decoders (Qwen/Llama-like: `layers`). The bottom
L - k blocks are frozen, so their output for a dataset is computed once (`prefix`) and only the top k
blocks run while training (`top`); `top(prefix(x))` equals the full forward to float tolerance.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from .folders import EMBEDDED, resolve_backbone

# the files that decide what a model folder computes: config, weights, tokenizer (not READMEs or git metadata)
IDENTITY_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".tiktoken")


def _identity_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in IDENTITY_SUFFIXES
                  and not any(part.startswith(".") for part in p.relative_to(path).parts))


def fingerprint(path: Path) -> str:
    """What a model folder holds, not where: '<model_type>-<sha256 of its config, weight and tokenizer files>'."""
    files = _identity_files(path)
    return _fingerprint(path, tuple((f, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


@functools.cache
def _fingerprint(path: Path, files: tuple[tuple[Path, int, int], ...]) -> str:
    """The hash itself, memoised per folder state (a weight file rewritten in place is hashed again)."""
    h = hashlib.sha256()
    for f, _, _ in files:
        h.update(f.relative_to(path).as_posix().encode() + b"\0")
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 24):
                h.update(chunk)
        h.update(b"\0")
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type", "model")
    except (OSError, ValueError):
        model_type = "model"
    return f"{model_type}-{h.hexdigest()[:20]}"


def blocks_of(model: nn.Module) -> nn.ModuleList:
    """The transformer block list of an encoder (`encoder.layer`) or decoder (`layers`) model."""
    for attr in ("layers", "encoder.layer", "h", "transformer.h"):
        obj = model
        try:
            for part in attr.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        if isinstance(obj, nn.ModuleList):
            return obj
    raise TypeError(f"cannot find the transformer blocks of {type(model).__name__}")


def set_blocks(model: nn.Module, blocks: nn.ModuleList) -> None:
    """Replace the block list of `model` in place."""
    if hasattr(model, "layers"):
        model.layers = blocks
    else:
        model.encoder.layer = blocks
    model.config.num_hidden_layers = len(blocks)


class _PassThrough(nn.Module):
    """Stands in for an encoder's embedding layer so that `inputs_embeds` enter the first top block unchanged."""

    def forward(self, input_ids=None, inputs_embeds=None, **_: object) -> Tensor:
        return inputs_embeds


class _Stop(Exception):
    pass


def mean_pool(hidden: Tensor, mask: Tensor) -> Tensor:
    """Mean of the token states where the attention mask is 1: (N, T, d), (N, T) -> (N, d)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


@dataclass
class Tokens:
    """Tokenised texts, right-padded: input ids and attention mask, both (N, T)."""

    input_ids: Tensor
    attention_mask: Tensor


class Backbone(nn.Module):
    """A pretrained model split into a frozen prefix (bottom L - k blocks) and a trainable top (k blocks)."""

    def __init__(self, name: str = EMBEDDED, k_trainable: int = 2, device: str | torch.device = "cpu"):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = resolve_backbone(name)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.name, self.path = name, path
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "right"
        model = AutoModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
        model.config.use_cache = False
        blocks = blocks_of(model)
        if not 0 <= k_trainable <= len(blocks):
            raise ValueError(f"k_trainable must be in [0, {len(blocks)}] for {path}, got {k_trainable}")
        self.n_blocks, self.k = len(blocks), k_trainable
        self.full = model.eval().requires_grad_(False)
        # the top model shares the top k blocks (and final norm) with the full model
        top = copy.copy(model)
        top._modules = dict(model._modules)
        if hasattr(model, "encoder"):
            top._modules["embeddings"] = _PassThrough()
            top._modules["encoder"] = copy.copy(model.encoder)
            top.encoder._modules = dict(model.encoder._modules)
            top._modules["pooler"] = None
        top.config = copy.deepcopy(model.config)
        set_blocks(top, nn.ModuleList(list(blocks)[self.n_blocks - k_trainable:]))
        self.top = top
        for block in self.top_blocks():
            block.requires_grad_(True)
        self._top_init = copy.deepcopy(self.top_blocks().state_dict())
        self.to(device)

    @property
    def identity(self) -> str:
        """The model by what it is (type and content hash), for cache keys: the same in any folder or venv."""
        return fingerprint(self.path.resolve())

    def reset_top(self) -> None:
        """Put the trainable blocks back to their pretrained weights (before each independent stage-1 run)."""
        self.top_blocks().load_state_dict(self._top_init)

    @property
    def device(self) -> torch.device:
        """Where the backbone's weights live."""
        return next(self.full.parameters()).device

    @property
    def dim(self) -> int:
        """Hidden size d of the pooled features."""
        return self.full.config.hidden_size

    def top_blocks(self) -> nn.ModuleList:
        """The k trainable blocks."""
        return blocks_of(self.top)

    def tokenize(self, texts: list[str]) -> Tokens:
        """Right-padded token ids and mask for a list of texts, on the backbone's device."""
        enc = self.tokenizer(texts, padding=True, return_tensors="pt")
        return Tokens(enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device))

    @torch.no_grad()
    def prefix(self, tokens: Tokens, batch_size: int = 256) -> Tensor:
        """Hidden states entering the first trainable block, (N, T, d): computed once, then cached by callers. The
        frozen blocks run in eval mode (no dropout) even when called from inside a training loop."""
        modes = {m: m.training for m in self.full.modules()}
        self.full.eval()
        try:
            return self._prefix(tokens, batch_size)
        finally:
            for m, training in modes.items():
                m.training = training

    def _prefix(self, tokens: Tokens, batch_size: int) -> Tensor:
        target = blocks_of(self.full)[self.n_blocks - self.k] if self.k else None
        n = len(tokens.input_ids)
        out: Tensor | None = None  # (N, T, d), filled batch by batch: no second copy for a concatenation
        for s in range(0, n, batch_size):
            ids, mask = tokens.input_ids[s:s + batch_size], tokens.attention_mask[s:s + batch_size]
            if target is None:
                states = self.full(input_ids=ids, attention_mask=mask).last_hidden_state
            else:
                captured: list[Tensor] = []

                def grab(_module, args, kwargs):
                    captured.append(args[0] if args else kwargs["hidden_states"])
                    raise _Stop

                handle = target.register_forward_pre_hook(grab, with_kwargs=True)
                try:
                    self.full(input_ids=ids, attention_mask=mask)
                except _Stop:
                    pass
                finally:
                    handle.remove()
                states = captured[0]
            if out is None:
                out = states.new_empty((n, *states.shape[1:]))
            out[s:s + batch_size] = states
        return out

    def forward_top(self, hidden: Tensor, mask: Tensor) -> Tensor:
        """Run the top k blocks on prefix states and mean-pool: (N, T, d), (N, T) -> (N, d)."""
        if self.k == 0:
            return mean_pool(hidden, mask)
        out = self.top(inputs_embeds=hidden, attention_mask=mask).last_hidden_state
        return mean_pool(out, mask)

    def forward(self, tokens: Tokens) -> Tensor:
        """The naive path: the full model on token ids, mean-pooled, (N, d)."""
        out = self.full(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask).last_hidden_state
        return mean_pool(out, tokens.attention_mask)
