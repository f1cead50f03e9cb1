"""On-disk cache of stage outputs (weights, features) keyed by a hash of everything that produced them.

An entry is one safetensors file whose metadata holds the full key and a SHA-256 of its tensors'
contents; a file that does not load, whose key differs from the one asked for, or whose contents no
longer match their checksum (bytes overwritten in place) is reported, removed and recomputed. Writes
go to a temporary name and are renamed into place, so a half-written entry never counts. Every
load, computation and rebuild (with its reason) is kept in `events`, for the run's provenance.
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

from .paths import cache_dir

Tensors = dict[str, Tensor]


def _canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))


def checksum(tensors: Tensors) -> str:
    """SHA-256 of the tensors' names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy())  # the tensor's own buffer: no copy of a large entry
    return h.hexdigest()


class StageLog:
    """What a `Store` did in this session, stage by stage: each entry loaded, computed or rebuilt (`events`), the
    compute seconds by kind, and the entries another process computed for it (`merge`), so that every stage and its
    cost count once, wherever it trained. (A part of `Store`: its entries' paths are the store's.)"""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}  # wall seconds spent computing stages, by kind
        # {"kind", "event": loaded | computed | rebuilt, "why", "entry", "train_seconds"} per stage
        self.events: list[dict[str, Any]] = []
        self._header_seconds: float | None = None  # the compute seconds recorded in the entry last loaded
        self._open: list[dict[str, Any]] = []  # computations in progress, outermost first
        self._unusable: dict[Path, str] = {}  # entries found unusable in this session, and why
        self._merged: set[str] = set()  # entries another process computed for this one (see `merge`)
        self._fresh: set[str] = set()  # entries computed together (`modules`): their first load is not a new event
        # the compute seconds of those entries, added as this process loads them: its timings count a stage a worker
        # trained for it where the stage is loaded (`Stages.timed`), as they count one trained in this process
        self.borrowed = 0.0

    def path(self, kind: str, config: dict[str, Any]) -> Path:
        """Where the entry for (kind, config) lives: the store's."""
        raise NotImplementedError

    @property
    def hits(self) -> int:
        """Stages loaded from the cache through this Store."""
        return sum(e["event"] == "loaded" for e in self.events)

    @property
    def misses(self) -> int:
        """Stages computed (or rebuilt) through this Store."""
        return len(self.events) - self.hits

    def merge(self, events: list[dict[str, str]], seconds: dict[str, float]) -> None:
        """Record what a worker process did for this one: its events and compute seconds. Loading one of the
        entries it computed here afterwards is not recorded again (each stage counts once)."""
        self.events += events
        self.mark_merged(events)
        for kind, sec in seconds.items():
            self.seconds[kind] = self.seconds.get(kind, 0.0) + sec

    def mark_merged(self, events: list[dict[str, str]]) -> None:
        """The entries these events computed are recorded already: loading them later adds no event."""
        entries = {e["entry"] for e in events if e["event"] != "loaded"}
        self._merged |= entries
        self._fresh -= entries

    def _loaded(self, kind: str, config: dict[str, Any]) -> None:
        entry = self.path(kind, config).name
        if entry in self._fresh:
            self._fresh.discard(entry)
            return
        if entry in self._merged:
            self._merged.discard(entry)
            self.borrowed += self._header_seconds or 0.0
            return
        self.events.append({"kind": kind, "event": "loaded", "why": "", "entry": entry,
                            "train_seconds": self._header_seconds})

    def _computing(self, kind: str, config: dict[str, Any]) -> tuple[dict[str, Any], float]:
        path = self.path(kind, config)
        why = self._unusable.pop(path, "")
        event = {"kind": kind, "event": "rebuilt" if why else "computed", "why": why, "entry": path.name}
        self.events.append(event)
        self._open.append(event)
        return event, time.perf_counter()

    def rebuilt(self) -> list[dict[str, str]]:
        """The stages this session recomputed because their cache entry was unusable, with the reason."""
        return [e for e in self.events if e["event"] == "rebuilt"]

    def _spent(self, started: tuple[dict[str, Any], float]) -> float:
        """Close a computation: its seconds, less those of the stages computed inside it (a lazily made prefix inside
        stage 1, say), so that every second is counted once."""
        event, t0 = started
        self._open.remove(event)
        spent = time.perf_counter() - t0
        event["train_seconds"] = own = spent - event.pop("_nested", 0.0)
        if self._open:
            self._open[-1]["_nested"] = self._open[-1].get("_nested", 0.0) + spent
        self.seconds[event["kind"]] = self.seconds.get(event["kind"], 0.0) + own
        return own

    def train_seconds(self) -> tuple[dict[str, float], int]:
        """What the stages this run used cost to compute, by kind, whether computed now or loaded (the cost recorded
        in the entry when it was made), and how many loaded stages carry no recorded cost (made before it was kept)."""
        by_kind: dict[str, float] = {}
        unknown = 0
        for e in self.events:
            if e.get("train_seconds") is None:
                unknown += 1
                continue
            by_kind[e["kind"]] = by_kind.get(e["kind"], 0.0) + float(e["train_seconds"])
        return by_kind, unknown



class Store(StageLog):
    """A folder of cached stage outputs: `Store().module(...)` loads weights if present, else trains them."""

    def __init__(self, root: str | os.PathLike | None = None):
        super().__init__()
        self.root = Path(root) if root is not None else cache_dir()

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
            if header.get("sha256") != checksum(tensors):
                raise ValueError("its contents do not match their checksum" if "sha256" in header
                                 else "it has no content checksum")
            meta = json.loads(header.get("meta", "{}"))
            self._header_seconds = float(header["train_seconds"]) if "train_seconds" in header else None
        except Exception as err:  # noqa: BLE001 - any unreadable entry is recomputed
            why = f"cache entry {path} is unusable ({err}); removing it and recomputing"
            warnings.warn(why, stacklevel=2)
            self._unusable[path] = why
            path.unlink(missing_ok=True)
            return None
        return tensors, meta

    def save(self, kind: str, config: dict[str, Any], tensors: Tensors, meta: dict[str, Any] | None = None,
             train_seconds: float | None = None) -> Path:
        """Write an entry atomically (temporary file, then rename), with the seconds it took to compute."""
        path = self.path(kind, config)
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphaned_temporaries(path.parent)
        data = _writable(tensors)
        header = {"key": _canonical(config), "sha256": checksum(data), "meta": json.dumps(meta or {}, default=str)}
        if train_seconds is not None:  # what computing it cost (a page's memory is sampled by its run: speed/usage.py)
            header["train_seconds"] = f"{train_seconds:.3f}"
        _write(path, data, header)
        return path

    def tensors(
        self, kind: str, config: dict[str, Any], compute: Callable[[], tuple[Tensors, dict[str, Any]]]
    ) -> tuple[Tensors, dict[str, Any]]:
        """Load (kind, config) if stored, else compute, store and return it."""
        hit = self.load(kind, config)
        if hit is not None:
            self._loaded(kind, config)
            return hit
        started = self._computing(kind, config)
        tensors, meta = compute()
        self.save(kind, config, tensors, meta, self._spent(started))
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
                self._loaded(kind, config)
                return {**meta, "cached": True}
            except RuntimeError as err:
                why = f"cache entry {self.path(kind, config)} does not fit the model ({err}); retraining"
                warnings.warn(why)
                self._unusable[self.path(kind, config)] = why.splitlines()[0]
        started = self._computing(kind, config)
        meta = train(model)
        self.save(kind, config, model.state_dict(), meta, self._spent(started))
        return {**meta, "cached": False}

    def modules(self, kind: str, configs: list[dict[str, Any]], models: list[nn.Module],
                train: Callable[[list[nn.Module]], list[dict[str, Any]]]) -> None:
        """Run `train(models)` (which trains them together and returns each one's metadata) and store each under its
        config, with an even share of the seconds it took. The first load of each afterwards (`module`) is the same
        stage, not a new event."""
        started = self._computing(kind, configs[0])  # one computation, for the seconds of nested work
        metas = train(models)
        share = self._spent(started) / len(models)
        events = [started[0]] + [{"kind": kind, "event": "computed", "why": "", "entry": self.path(kind, c).name}
                                 for c in configs[1:]]
        self.events += events[1:]
        for event, config, model, meta in zip(events, configs, models, metas):
            event["train_seconds"] = share
            self.save(kind, config, model.state_dict(), meta, share)
            self._fresh.add(event["entry"])

    def restate_seconds(self, kind: str, config: dict[str, Any], seconds: float) -> None:
        """Record `seconds` as what computing an entry of this session cost (its share of the machine, when it trained
        beside others): in the entry's header, in this store's seconds by kind and in the event that computed it."""
        path = self.path(kind, config)
        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        _write(path, tensors, header | {"train_seconds": f"{seconds:.3f}"})
        made = [e for e in self.events if e["entry"] == path.name and e["event"] != "loaded"]
        old = float(made[-1]["train_seconds"]) if made else float(header.get("train_seconds", 0.0))
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds - old
        for e in made:
            e["train_seconds"] = seconds



def _write(path: Path, tensors: Tensors, header: dict[str, str]) -> None:
    """Write an entry atomically: a temporary file of this process, then renamed over `path`."""
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    save_file(tensors, str(tmp), metadata=header)
    os.replace(tmp, path)


def remove_orphaned_temporaries(root: Path | None = None) -> None:
    """Delete the half-written entries that stopped processes left anywhere in the stage cache."""
    root = root or cache_dir()
    if root.is_dir():
        for folder in {p.parent for p in root.rglob("*.tmp*")}:
            _remove_orphaned_temporaries(folder)


def _remove_orphaned_temporaries(folder: Path) -> None:
    """Delete half-written entries (`*.tmp<pid>`) of processes that no longer run (a run killed mid-write)."""
    for tmp in folder.glob("*.tmp*"):
        pid = tmp.suffix.removeprefix(".tmp")
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _writable(tensors: Tensors) -> Tensors:
    """The tensors as safetensors writes them: on the CPU, contiguous, each alone in its storage. A tensor that
    already is (a large cached prefix, say) is written as it is; a view or one sharing storage is copied."""
    out: Tensors = {}
    seen: set[int] = set()
    for name, t in tensors.items():
        t = t.detach().to("cpu").contiguous()
        storage = t.untyped_storage()
        if storage.data_ptr() in seen or t.storage_offset() or storage.nbytes() != t.numel() * t.element_size():
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[name] = t
    return out


def state_equal(a: nn.Module, b: nn.Module) -> bool:
    """True when two modules hold bit-identical parameters and buffers."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
