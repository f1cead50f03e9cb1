"""On-disk cache of stage outputs (weights, features) keyed by a hash of everything that produced them.

An entry is one safetensors file whose metadata holds the full key; a file that does not load,
or whose key differs from the one asked for, is reported, removed and recomputed. Writes go to a
temporary name and are renamed into place, so a half-written entry never counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import Tensor, nn

from .runtime import cache_dir

Tensors = dict[str, Tensor]


def _canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))


class Store:
    """A folder of cached stage outputs: `Store().module(...)` loads weights if present, else trains them."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = Path(root) if root is not None else cache_dir()
        self.hits = self.misses = 0  # stages loaded vs computed through this Store, for provenance
        self.seconds: dict[str, float] = {}  # wall seconds spent computing stages, by kind

    def path(self, kind: str, config: dict[str, Any]) -> Path:
        """Where the entry for (kind, config) lives."""
        digest = hashlib.sha256(f"{kind}\n{_canonical(config)}".encode()).hexdigest()[:20]
        return self.root / kind / f"{digest}.safetensors"

    def load(self, kind: str, config: dict[str, Any]) -> tuple[Tensors, dict[str, Any]] | None:
        """The stored tensors and metadata, or None when missing, corrupt or made for another config."""
        path = self.path(kind, config)
        if not path.exists():
            return None
        try:
            with safe_open(str(path), framework="pt") as f:
                header = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
            if header.get("key") != _canonical(config):
                raise ValueError("its stored key does not match this configuration")
            meta = json.loads(header.get("meta", "{}"))
        except Exception as err:  # noqa: BLE001 - any unreadable entry is recomputed
            warnings.warn(f"cache entry {path} is unusable ({err}); removing it and recomputing", stacklevel=2)
            path.unlink(missing_ok=True)
            return None
        return tensors, meta

    def save(self, kind: str, config: dict[str, Any], tensors: Tensors, meta: dict[str, Any] | None = None) -> Path:
        """Write an entry atomically (temporary file, then rename)."""
        path = self.path(kind, config)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        data = {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}
        save_file(data, str(tmp), metadata={"key": _canonical(config), "meta": json.dumps(meta or {}, default=str)})
        os.replace(tmp, path)
        return path

    def tensors(
        self, kind: str, config: dict[str, Any], compute: Callable[[], tuple[Tensors, dict[str, Any]]]
    ) -> tuple[Tensors, dict[str, Any]]:
        """Load (kind, config) if stored, else compute, store and return it."""
        hit = self.load(kind, config)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        started = time.perf_counter()
        tensors, meta = compute()
        self._spent(kind, started)
        self.save(kind, config, tensors, meta)
        return tensors, meta

    def module(
        self, kind: str, config: dict[str, Any], model: nn.Module, train: Callable[[nn.Module], dict[str, Any]]
    ) -> dict[str, Any]:
        """Fill `model` with stored weights for config, or run `train(model)` and store them; returns the metadata."""
        hit = self.load(kind, config)
        if hit is not None:
            state, meta = hit
            try:
                model.load_state_dict(state)
                self.hits += 1
                return {**meta, "cached": True}
            except RuntimeError as err:
                warnings.warn(f"cache entry {self.path(kind, config)} does not fit the model ({err}); retraining")
        self.misses += 1
        started = time.perf_counter()
        meta = train(model)
        self._spent(kind, started)
        self.save(kind, config, model.state_dict(), meta)
        return {**meta, "cached": False}

    def _spent(self, kind: str, started: float) -> None:
        self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started


def state_equal(a: nn.Module, b: nn.Module) -> bool:
    """True when two modules hold bit-identical parameters and buffers."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
