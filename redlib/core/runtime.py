"""Where things live (repo root, results, cache), seeding and device selection."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import torch


def project_root() -> Path:
    """The repository root: $REDLIB_ROOT, else the checkout holding this package, else the cwd."""
    if env := os.environ.get("REDLIB_ROOT"):
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[2]  # redlib/core/runtime.py -> the checkout
    return here if (here / "_toc.yml").exists() else Path.cwd()


def cache_dir() -> Path:
    """Stage cache folder ($REDLIB_CACHE or <root>/cache); deleting it is always safe."""
    return Path(os.environ.get("REDLIB_CACHE", project_root() / "cache"))


def resolve_path(path: str | os.PathLike) -> Path:
    """A path from a parameter: absolute as given, relative to the repository root otherwise."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else project_root() / p


def not_a_folder(path: Path) -> str:
    """Why `path` is no folder, in the words of a one-line error: 'is a file, not a folder' or 'does not exist'."""
    return "is a file, not a folder" if path.exists() else "does not exist"


def read_one_byte(files) -> None:
    """Open each file and read a byte: an OSError (no permission, a dangling link, a folder named like a file) comes
    now, before any kernel starts, instead of in the middle of a run."""
    for f in files:
        with open(f, "rb") as fh:
            fh.read(1)


def os_error_words(err: OSError) -> str:
    """An OSError in the words of a one-line error: 'PermissionError: Permission denied: /the/file'."""
    return f"{type(err).__name__}: {err.strerror or err}" + (f": {err.filename}" if err.filename else "")


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
