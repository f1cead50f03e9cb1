"""The stages of one pipeline seed, each cached: what a stage is (its inputs, cache key, training and epochs row).

Stage 1 trains the encoder's top on the page's thread count (in the page, or beforehand in a worker:
`experiments/stage1_runs.py`); every later stage trains a small module on stage 1's frozen features. Those small
stages are *jobs* ("expert", i), ("router", None), ... whose inputs are stage 1's head and features and, for stage
4 and the gates, other jobs' results; each job has a key function and a function (`jobs.py`). `schedule.py` trains
the jobs not cached yet side by side in worker processes before the page asks for them; the page then loads them from the
cache in its usual order, so its modules, tables, epochs and cache keys are those of a serial run, bit for bit
(`tests/test_pipeline.py`). `clock.py` counts what each stage cost.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..configs.red import RedConfig
from ..core.runtime import seed_everything
from ..core.stacked import fit_stacked
from ..core.settings import StageSettings
from ..core.store import Store
from ..core.train import TrainConfig, evaluate_loss, fit
from ..speed import kernels, parallel
from .encoders import Encoder
from .jobs import JOBS, SPECS, STACKED, WHAT, Spec
from .types import PIPELINE_VERSION, STAGE_KINDS, Base, Job, TaskData, base_rows, ce

__all__ = ["Stages", "JOBS", "STACKED", "STAGE_KINDS", "PIPELINE_VERSION"]


def _fit_meta(res) -> dict:
    # every epoch's validation loss too: the convergence a page shows
    return {"best_epoch": res.best_epoch, "epochs_run": len(res.history), "cap": res.cap,
            "stopped_early": res.stopped_early, "val_losses": [h["val_loss"] for h in res.history]}


class Stages:
    """The stages of one seed, each loaded from the cache when already computed (see `pipeline`'s docstring)."""

    def __init__(self, cfg: RedConfig, data: TaskData, encoder: Encoder | None, store: Store, seed: int,
                 key: dict | None = None, dim: int | None = None, settings: StageSettings | None = None):
        self.cfg, self.data, self.encoder, self.store, self.seed = cfg, data, encoder, store, seed
        # every stage's fit, resolved once for the run (None: the config's protocol, `cfg.stage_settings()`)
        self.settings = settings or cfg.stage_settings()
        kernels.configure()  # the matmul kernels a worker takes, whoever calls the pipeline (not only a page)
        self.seconds: dict[str, float] = {}
        self.epochs: list[dict] = []
        self.key = key or {"pipeline": PIPELINE_VERSION, **encoder.key(), "data": data.key}
        self.dim = dim or encoder.dim
        self.device = encoder.device if encoder is not None else torch.device("cpu")
        self.head: nn.Linear | None = None  # W_c, set by `base`
        self.feats: dict[str, Tensor] = {}  # split -> (N, d), set by `features`
        self.done: dict[Job, nn.Module] = {}  # jobs got so far
        self.stacked: set[str] = set()  # the kinds whose stack this object has trained or found cached

    def kind(self, name: str) -> str:
        assert name in STAGE_KINDS, name
        return f"{self.data.namespace}/{name}"

    def inputs_lr(self, *names: str) -> dict[str, float]:
        """The learning rates of the stage kinds a stage trains on: part of its cache key, so a gate or stage 4 over
        modules trained at other rates is trained again, never loaded."""
        return {n: self.settings.lr(n) for n in names}

    def _stage1_settings(self) -> tuple[TrainConfig, dict]:
        """Stage 1's training settings and its cache key (the key of every later stage builds on it)."""
        tc = self.settings.fit("stage1", self.seed)
        return tc, {**self.key, "fraction": self.cfg.backbone_fraction, "train": asdict(tc)}

    def stage1_key(self) -> dict:
        """Stage 1's cache key."""
        return self._stage1_settings()[1]

    def stage1_cached(self) -> bool:
        """Whether stage 1's cache entry exists (nothing is trained to find out)."""
        return self.store.path(self.kind("stage1"), self.stage1_key()).exists()

    def base(self) -> nn.Linear:
        """Stage 1: the encoder's trainable part and W_c on a fraction of train; then both are frozen."""
        cfg, data, enc = self.cfg, self.data, self.encoder
        seed_everything(self.seed)
        enc.reset()
        head = nn.Linear(enc.dim, data.n_classes).to(enc.device)
        tc, stage1_key = self._stage1_settings()
        self.key = stage1_key  # every later stage trains on what stage 1 made: from here on, each key carries it
        model, val = Base(enc, head), _distinct_val(data, enc)

        def train(_: nn.Module) -> dict:
            pick = base_rows(cfg, data.labels["train"], self.seed)
            res = fit(model, ce, (data.ids["train"][pick], data.labels["train"][pick]), val, tc)
            return {**_fit_meta(res), "val_loss": res.best_val_loss}  # the kept state's: stage 1's rate is chosen on it

        meta = self.store.module(self.kind("stage1"), self.key, nn.ModuleDict({"top": enc.trainable(), "head": head}),
                                 train)
        enc.eval()
        if "val_loss" not in meta:  # an entry made before stage 1 recorded it: the same loss, computed on its state
            with torch.no_grad():
                meta["val_loss"] = evaluate_loss(model, ce, val)
        self._epochs("stage 1", meta, tc, meta["val_loss"])
        self.head = head.requires_grad_(False)
        return self.head

    def features(self) -> dict[str, Tensor]:
        """Features of every item with the fixed encoder, gathered per split: split -> (N, d)."""
        h_all = _features(self.store, self.kind("features"), self.key, self.encoder).to(self.device)  # (n_items, d)
        if self.encoder is not None:  # (a worker has none)
            self.encoder.release()  # every later stage trains on the features
        self.feats = {k: h_all[v] for k, v in self.data.ids.items()}
        return self.feats

    def train(self, name: str, label: str, model: nn.Module, loss, targets: dict[str, Tensor],
              sel: dict[str, Tensor] | None = None, **extra) -> nn.Module:
        """Train a small module on features (the rows `sel` of each split, or all) unless cached; then freeze it."""
        return self.train_spec(Spec(name, label, model, loss, targets, sel, extra))

    def _settings(self, name: str, label: str, extra: dict) -> tuple[TrainConfig, dict]:
        """A small stage's fit settings and cache key, from its kind, label and what its key adds (`WHAT`)."""
        tc = self.settings.fit(name, self.seed, label)
        # the thread count is in the key: another count can split a sum differently, so it trains other bits
        key = {**self.key, "module": label, "train2": asdict(tc), "threads": parallel.STAGE_THREADS, **extra}
        return tc, key | ({"fit": "stacked"} if name in STACKED else {})

    def job_path(self, job: Job) -> Path:
        """Where a job's cache entry lives, from its key function (`WHAT`): no module is built and nothing trains."""
        name, i = job
        label, extra = WHAT[name](self, *(() if i is None else (i,)))
        return self.store.path(self.kind(name), self._settings(name, label, extra)[1])

    def _rows(self, spec: Spec, split: str) -> tuple[Tensor, Tensor]:
        """A stage's (features, targets) in `split`: the rows `spec.sel` picks, or all."""
        part = spec.sel[split] if spec.sel else slice(None)
        return self.feats[split][part], spec.targets[split][part]

    def train_spec(self, spec: Spec) -> nn.Module:
        """Train a small stage unless cached (its kind's stack first, if its kind trains stacked); then freeze it."""
        tc, key = self._settings(spec.name, spec.label, spec.extra)
        val = self._rows(spec, "val")

        def run(m: nn.Module) -> dict:  # train's rows are gathered only when the stage trains (a load needs none)
            with parallel.torch_threads(parallel.STAGE_THREADS):
                return _fit_meta(fit(m, spec.loss, self._rows(spec, "train"), val, tc))

        spec.model.to(self.device)
        meta = self.store.module(self.kind(spec.name), key, spec.model, run)
        spec.model.requires_grad_(False)
        # the loss of the kept state on validation: what the learning rate is chosen on (computed the same way
        # whether the stage was trained now, by a worker or loaded)
        val_loss = evaluate_loss(spec.model, spec.loss, val)
        self._epochs(spec.label, meta, tc, val_loss)
        return spec.model.eval()

    def stack(self, name: str) -> None:
        """Train the stages of kind `name` (one per domain) that are not cached yet as one stack (`core/stacked.py`),
        each into its own cache entry; the page then loads each in its usual order."""
        if name in self.stacked:
            return
        self.stacked.add(name)
        specs = [SPECS[name](self, i) for i in range(self.data.n_domains)]
        todo = [(spec, *self._settings(spec.name, spec.label, spec.extra)) for spec in specs]
        todo = [t for t in todo if not self.store.path(self.kind(name), t[2]).exists()]
        if not todo:
            return
        for spec, _, _ in todo:
            spec.model.to(self.device)

        def run(models: list[nn.Module]) -> list[dict]:
            with parallel.torch_threads(parallel.STAGE_THREADS):
                fits = fit_stacked(models, todo[0][0].logits, [self._rows(s, "train") for s, _, _ in todo],
                                   [self._rows(s, "val") for s, _, _ in todo], [tc for _, tc, _ in todo],
                                   desc=f"seed {self.seed}: {len(todo)} {name} stacked")
            return [_fit_meta(f) for f in fits]

        self.store.modules(self.kind(name), [key for _, _, key in todo], [s.model for s, _, _ in todo], run)

    def _epochs(self, label: str, meta: dict, tc: TrainConfig, val_loss: float = float("nan")) -> None:
        self.epochs.append({"stage": label, "epochs run": meta.get("epochs_run"), "best epoch": meta.get("best_epoch"),
                            "max epochs": meta.get("cap") or tc.max_epochs, "patience": tc.patience,
                            "stopped by patience": meta.get("stopped_early"), "lr": tc.lr, "val loss": val_loss})

    def cached(self, job: Job) -> bool:
        """Whether the job's cache entry exists (nothing is built or trained to find out)."""
        return self.job_path(job).exists()

    def get(self, job: Job) -> nn.Module:
        """A small stage's trained module (loaded when cached, or trained by a worker beforehand), once per seed."""
        if job not in self.done:
            if job[0] in STACKED:
                self.stack(job[0])
            self.done[job] = self._run(job)
        return self.done[job]

    def _run(self, job: Job) -> nn.Module:
        name, i = job
        with parallel.torch_threads(parallel.STAGE_THREADS):  # all of it, inputs too, as in a worker
            return JOBS[name](self, *(() if i is None else (i,)))

    def domain_rows(self, i: int) -> dict[str, Tensor]:
        """The rows of domain i in train and val."""
        return {k: self.data.domains[k] == i for k in ("train", "val")}

    def tag(self, i: int) -> str:
        """Domain i's short name, in a stage's label."""
        return self.data.domain_names[i].split()[0]


_FEATURES: dict[str, Tensor] = {}  # in a worker: the last features loaded, by cache entry


def _features(store: Store, kind: str, key: dict, encoder: Encoder | None) -> Tensor:
    """Every item's features (n_items, d) from the cache, computed with `encoder` when missing (a worker has none)."""
    path = str(store.path(kind, key))

    def compute() -> tuple[dict[str, Tensor], dict]:
        if encoder is None:
            raise RuntimeError(f"worker: the features {path} are not cached")
        return {"h": encoder.features()}, {}

    if encoder is None and path in _FEATURES:
        return _FEATURES[path]
    h = store.tensors(kind, key, compute)[0]["h"]
    if encoder is None:
        _FEATURES.clear()
        _FEATURES[path] = h
    return h


def _distinct_val(data: TaskData, enc: Encoder) -> tuple[Tensor, Tensor]:
    """Stage 1's validation: it repeats few distinct items, so each is scored once (an item's class is fixed),
    shortest texts first: (ids (V,), labels (V,))."""
    val_ids, first = np.unique(data.ids["val"].numpy(), return_index=True)
    val_ids, val_labels = torch.as_tensor(val_ids), data.labels["val"][first]
    order = enc.length_order(val_ids)
    return val_ids[order], val_labels[order]
