"""Seeding and device selection (where things live: `paths.py`, re-exported here)."""

from __future__ import annotations

import random

import numpy as np
import torch

# re-exported: the executed notebooks of record import these from here
from .paths import cache_dir, not_a_folder, os_error_words, project_root, read_one_byte, resolve_path  # noqa: F401


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch, and ask torch for deterministic kernels (on a GPU too: see `_deterministic_cuda`)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    if torch.cuda.is_available():
        _deterministic_cuda()


def _deterministic_cuda() -> None:
    """Attention on its plain kernels: the fused ones (flash, memory-efficient) have no deterministic backward pass,
    so a rerun would train other weights."""
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)


def derived_seed(seed: int, index: int, per: int = 100) -> int:
    """The seed of the index-th stage (or draw) under a run's seed: seed * per + index, distinct for index < per."""
    return seed * per + index


def generator(seed: int) -> torch.Generator:
    """An explicit torch generator, for data splits and shuffling that must not depend on global state."""
    return torch.Generator().manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    """'cpu', 'cuda', 'cuda:N', 'mps' or 'auto' -> a torch.device; a clear error if it is not available."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {name!r} requested but CUDA is not available here; use device='cpu'")
    if name == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError("device 'mps' requested but MPS is not available here; use device='cpu'")
    return torch.device(name)


def device_key(device: torch.device | str) -> dict[str, str]:
    """What a cache key says about the device: nothing on the CPU (the published runs' keys), else its type, so a
    stage trained on a GPU (other floating-point sums) is never loaded by a CPU run, nor the other way round."""
    kind = torch.device(device).type
    return {} if kind == "cpu" else {"device": kind}
