"""The stages of one pipeline seed, each cached: what a stage is (its inputs, cache key, training and epochs row).

Stage 1 trains the encoder's top on the page's thread count (in the page, or beforehand in a worker:
`experiments/stage1_runs.py`); every later stage trains a small module on stage 1's frozen features. Those small
stages are *jobs* ("expert", i), ("router", None), ... whose inputs are stage 1's head and features and, for stage
4 and the gates, other jobs' results; each job is one function below (`JOBS`). `schedule.py` trains the jobs
not cached yet side by side in worker processes before the page asks for them; the page then loads them from the
cache in its usual order, so its modules, tables, epochs and cache keys are those of a serial run, bit for bit
(`tests/test_pipeline.py`). `clock.py` counts what each stage cost.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core.runtime import seed_everything
from ..core.store import Store
from ..core.stacked import LogitsFn, fit_stacked
from ..core.train import TrainConfig, evaluate_loss, fit
from ..models.combiners import ResidualMixture
from ..models.experts import ScaledExpert
from ..models.routers import Router
from ..speed import kernels, parallel
from .encoders import Encoder
from .types import PIPELINE_VERSION, STAGE_KINDS, Base, Job, Joint, RedConfig, TaskData, ce, moe_gate_loss

__all__ = ["Stages", "JOBS", "STACKED", "STAGE_KINDS", "PIPELINE_VERSION"]


@dataclass
class Spec:
    """A small stage before it trains: its kind, label, fresh module, loss, targets per split, the rows it trains
    on (None: all), what its cache key adds, and (for the kinds that train stacked) its answer logits(m, h), whose
    cross-entropy is its loss."""

    name: str
    label: str
    model: nn.Module
    loss: Callable
    targets: dict[str, Tensor]
    sel: dict[str, Tensor] | None = None
    extra: dict = field(default_factory=dict)
    logits: LogitsFn | None = None


def _fit_meta(res) -> dict:
    # every epoch's validation loss too: what a selection that stops its tries early would have seen
    return {"best_epoch": res.best_epoch, "epochs_run": len(res.history), "cap": res.cap,
            "stopped_early": res.stopped_early, "val_losses": [h["val_loss"] for h in res.history]}


class _Probe(Exception):
    """Raised instead of training while `Stages.cached` asks whether a job's entry exists."""

    def __init__(self, path):
        self.path = path


class Stages:
    """The stages of one seed, each loaded from the cache when already computed (see `pipeline`'s docstring)."""

    def __init__(self, cfg: RedConfig, data: TaskData, encoder: Encoder | None, store: Store, seed: int,
                 key: dict | None = None, dim: int | None = None, lrs: dict[str, float] | None = None,
                 caps: dict[str, int] | None = None):
        self.cfg, self.data, self.encoder, self.store, self.seed = cfg, data, encoder, store, seed
        kernels.configure()  # the matmul kernels a worker takes, whoever calls the pipeline (not only a page)
        self.lrs = dict(lrs or {})  # stage kind -> learning rate; a kind not named: cfg.lr (stage 1) or cfg.head_lr
        self.caps = dict(caps or {})  # stage kind -> a lower epoch cap (a selection's rung tries; its own cache entry)
        self.seconds: dict[str, float] = {}
        self.epochs: list[dict] = []
        self.curves: list[list[float]] = []  # per row of `epochs`: its validation loss per epoch ([]: an older entry)
        self.key = key or {"pipeline": PIPELINE_VERSION, **encoder.key(), "data": data.key}
        self.dim = dim or encoder.dim
        self.device = encoder.device if encoder is not None else torch.device("cpu")
        self.head: nn.Linear | None = None  # W_c, set by `base`
        self.feats: dict[str, Tensor] = {}  # split -> (N, d), set by `features`
        self.done: dict[Job, nn.Module] = {}  # jobs got so far
        self.probing = False
        self.stacked: set[str] = set()  # the kinds whose stack this object has trained or found cached

    def kind(self, name: str) -> str:
        assert name in STAGE_KINDS, name
        return f"{self.data.namespace}/{name}"

    def lr(self, name: str) -> float:
        """The learning rate of the stages of kind `name` (chosen on validation loss, or the config's: lr for stage 1,
        head_lr for the small stages)."""
        return self.lrs.get(name, self.cfg.lr if name == "stage1" else self.cfg.head_lr)

    def inputs_lr(self, *names: str) -> dict[str, float]:
        """The learning rates of the stage kinds a stage trains on: part of its cache key, so a gate or stage 4 over
        modules trained at other rates is trained again, never loaded."""
        return {n: self.lr(n) for n in names}

    def fork(self, lrs: dict[str, float], caps: dict[str, int] | None = None) -> "Stages":
        """These stages after stage 1 (same head, features and keys), training the small stages at `lrs` (capped at
        `caps` epochs)."""
        st = Stages(self.cfg, self.data, self.encoder, self.store, self.seed, self.key, self.dim, lrs, caps)
        st.head, st.feats = self.head, self.feats
        return st

    def _stage1_settings(self) -> tuple[TrainConfig, dict]:
        """Stage 1's training settings and its cache key (the key of every later stage builds on it)."""
        tc = self._capped("stage1", self.cfg.stage1_config(self.seed, self.lr("stage1")))
        return tc, {**self.key, "fraction": self.cfg.backbone_fraction, "train": asdict(tc)}

    def stage1_key(self) -> dict:
        """Stage 1's cache key."""
        return self._stage1_settings()[1]

    def _capped(self, name: str, tc: TrainConfig) -> TrainConfig:
        """`tc` with the epoch cap `caps` sets for kind `name`, if lower."""
        cap = self.caps.get(name)
        return tc if cap is None or cap >= tc.max_epochs else replace(tc, max_epochs=cap)

    def stage1_meta(self) -> dict | None:
        """Stage 1's cache entry's record (epochs, validation loss), or None if not cached (nothing is loaded)."""
        hit = self.store.load(self.kind("stage1"), self.stage1_key())
        return None if hit is None else hit[1]

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
            pick = cfg.base_rows(data.labels["train"], self.seed)
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

    def _settings(self, spec: Spec) -> tuple[TrainConfig, dict]:
        """A small stage's fit settings and cache key."""
        tc = self._capped(spec.name, self.cfg.fit_config(self.seed, spec.label, self.lr(spec.name)))
        # the thread count is in the key: another count can split a sum differently, so it trains other bits
        key = {**self.key, "module": spec.label, "train2": asdict(tc), "threads": parallel.STAGE_THREADS, **spec.extra}
        return tc, key | ({"fit": "stacked"} if spec.name in STACKED else {})

    def _rows(self, spec: Spec, split: str) -> tuple[Tensor, Tensor]:
        """A stage's (features, targets) in `split`: the rows `spec.sel` picks, or all."""
        part = spec.sel[split] if spec.sel else slice(None)
        return self.feats[split][part], spec.targets[split][part]

    def train_spec(self, spec: Spec) -> nn.Module:
        """Train a small stage unless cached (its kind's stack first, if its kind trains stacked); then freeze it."""
        tc, key = self._settings(spec)
        if self.probing:
            raise _Probe(self.store.path(self.kind(spec.name), key))
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
        todo = [(spec, *self._settings(spec)) for spec in specs]
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
        self.curves.append(list(meta.get("val_losses", [])))

    def cached(self, job: Job) -> bool:
        """Whether the job's cache entry exists (nothing is trained to find out)."""
        self.probing = True
        try:
            self._run(job)
        except _Probe as probe:
            return probe.path.exists()
        finally:
            self.probing = False
        raise AssertionError(f"job {job} trains nothing")

    def get(self, job: Job) -> nn.Module:
        """A small stage's trained module (loaded when cached, or trained by a worker beforehand), once per seed."""
        if self.probing and job not in self.done:
            return nn.Module()  # a stand-in input: a job's cache key never depends on its inputs' weights
        if job not in self.done:
            if job[0] in STACKED and not self.probing:
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


# ---- the small stages, as jobs: each seeds itself, so it trains the same in any process and order ----

def expert_spec(st: Stages, i: int) -> Spec:
    """Stage 2's classifier expert E_i of domain i, trained alone on its domain."""
    cfg = st.cfg
    seed_everything(st.seed * 100 + i)
    return Spec("expert", f"expert {st.tag(i)}", cfg.expert(st.dim, st.data.n_classes), ce, st.data.labels,
                st.domain_rows(i), {"hidden": cfg.expert_hidden}, lambda m, h: m(h))


def residual_spec(st: Stages, i: int) -> Spec:
    """Stage 2's RED residual of domain i: Delta h_i trained alone on its domain through the frozen W_c."""
    head = st.head

    def logits(m: nn.Module, h: Tensor) -> Tensor:
        return head(h + m(h))  # W_c (h + Delta h_i)

    seed_everything(st.seed * 100 + i)
    return Spec("residual", f"residual {st.tag(i)}", st.cfg.residual(st.dim), _ce_of(logits), st.data.labels,
                st.domain_rows(i), {"rank": st.cfg.rank(st.dim)}, logits)


def code_spec(st: Stages, i: int) -> Spec:
    """Stage 2's released-code expert of domain i: logits W_c h + s B_i A_i h, trained alone on its domain."""
    cfg, head = st.cfg, st.head

    def logits(m: nn.Module, h: Tensor) -> Tensor:
        return head(h) + cfg.code_scale * m(h)  # W_c h + s B_i A_i h

    seed_everything(st.seed * 100 + i)
    return Spec("code", f"code {st.tag(i)}", cfg.code_expert(st.dim, st.data.n_classes), _ce_of(logits),
                st.data.labels, st.domain_rows(i), {"rank": cfg.rank(st.dim), "scale": cfg.code_scale}, logits)


def _ce_of(logits: LogitsFn):
    """The loss cross-entropy(logits(m, h), y) on a batch (h, y)."""
    return lambda m, b: F.cross_entropy(logits(m, b[0]), b[1])


# the stage-2 kinds whose experts (one per domain, same shapes, disjoint data) train as one stack, each a Spec
SPECS: dict[str, Callable[[Stages, int], Spec]] = {"expert": expert_spec, "residual": residual_spec, "code": code_spec}
STACKED = tuple(SPECS)


def expert(st: Stages, i: int) -> nn.Module:
    """Stage 2's classifier expert E_i (trained in its kind's stack unless cached)."""
    return st.train_spec(expert_spec(st, i))


def residual(st: Stages, i: int) -> nn.Module:
    """Stage 2's RED residual Delta h_i (trained in its kind's stack unless cached)."""
    return st.train_spec(residual_spec(st, i))


def code(st: Stages, i: int) -> nn.Module:
    """Stage 2's released-code expert B_i A_i (trained in its kind's stack unless cached)."""
    return st.train_spec(code_spec(st, i))


def router(st: Stages, domains: int | None = None) -> Router:
    """Stage 3's router on the domain labels; with `domains` = k, a router over the first k domains only, trained
    on their samples (a system deployed before the later domains' experts existed)."""
    cfg, K = st.cfg, st.data.n_domains
    seed_everything(st.seed)
    loss = lambda m, b: F.cross_entropy(m.logits(b[0]), b[1])  # noqa: E731
    if domains is None or domains == K:
        return st.train("router", "router", cfg.router(st.dim, K), loss, st.data.domains, hidden=cfg.router_hidden)
    sel = {k: st.data.domains[k] < domains for k in ("train", "val")}
    return st.train("router", f"router over {domains} domains", cfg.router(st.dim, domains), loss, st.data.domains,
                    sel, hidden=cfg.router_hidden, domains=domains)


def joint(st: Stages) -> Joint:
    """Stage 4: copies of the residuals and the router tuned together on the answer loss."""
    K, cfg = st.data.n_domains, st.cfg
    residuals = [copy.deepcopy(st.get(("residual", i))).requires_grad_(True) for i in range(K)]
    router_ = copy.deepcopy(st.get(("router", None))).requires_grad_(True)
    # a router of another width fails to load from the cache and is retrained
    return st.train("joint", "joint stage 4", Joint(ResidualMixture(residuals, st.head), router_), ce, st.data.labels,
                    rank=cfg.rank(st.dim), from_router=True, inputs_lr=st.inputs_lr("residual", "router"))


def _moe_gate(st: Stages, kind: str, label: str, members: list[nn.Module], **extra) -> Router:
    """A softmax gate over frozen experts, trained on the mixture's answer loss (`moe_gate_loss`)."""
    labels, feats = st.data.labels, st.feats
    true = {}  # probing: the key does not depend on the members' outputs
    if not st.probing:  # log softmax(member(h))_y of each frozen expert at the true class, (N, K): all the loss needs
        with torch.no_grad():
            true = {k: torch.stack([m(feats[k]).log_softmax(-1).gather(1, labels[k][:, None].to(feats[k].device))[:, 0]
                                    for m in members], 1) for k in ("train", "val")}
    seed_everything(st.seed)
    return st.train(kind, label, st.cfg.router(st.dim, st.data.n_domains), moe_gate_loss, true, **extra)


def gate(st: Stages) -> Router:
    """Stage 3's softmax-MoE gate over the classifier experts (the paper's 4.3.4)."""
    experts = [st.get(("expert", i)) for i in range(st.data.n_domains)]
    return _moe_gate(st, "gate", "moe gate", experts, hidden=st.cfg.router_hidden, experts_hidden=st.cfg.expert_hidden,
                     inputs_lr=st.inputs_lr("expert"))


def code_gate(st: Stages) -> Router:
    """The released code's MoE: a gate over its logit experts' own answers s B_i A_i h (without W_c h)."""
    cfg = st.cfg
    scaled = [ScaledExpert(st.get(("code", i)), cfg.code_scale) for i in range(st.data.n_domains)]
    return _moe_gate(st, "code_gate", "code moe gate", scaled, hidden=cfg.router_hidden, rank=cfg.rank(st.dim),
                     scale=cfg.code_scale, inputs_lr=st.inputs_lr("code"))


def head_all(st: Stages) -> nn.Linear:
    """A global head W: d -> C trained on all of train (stage 1's head saw a fraction)."""
    seed_everything(st.seed)
    return st.train("head_all", "global head all train", nn.Linear(st.dim, st.data.n_classes), ce, st.data.labels)


# every job's function, by the job's name (a stage kind of STAGE_KINDS)
JOBS: dict[str, Callable[..., nn.Module]] = {"expert": expert, "residual": residual, "code": code, "router": router,
                                              "joint": joint, "gate": gate, "code_gate": code_gate,
                                              "head_all": head_all}
