"""The RED pipeline, task-agnostic: a task hands over its data and an encoder; the stages run; a run record comes back.

With h = h(x) in R^d the encoder's features, C classes and K domains (the paper, section 4.3):

    stage 1  base        W_c: d -> C trained with the encoder's top on a fraction of train: the global head
    stage 2  experts     each trained alone on its domain's samples, h frozen:
                           E_i: d -> C                       classifier experts (oracle, uniform, softmax MoE)
                           Delta h_i = V_i sigma(U_i h)      RED residuals, rank r = d / rank_divisor, through W_c
                           B_i A_i h                         the released code's logit experts
    stage 3  router      alpha(h) = softmax(MLP(h)) in R^K, trained on domain labels, experts frozen
             gate        the softmax MoE's own gate (the paper's 4.3.4): the same MLP trained on the answer
                         loss -log sum_i alpha_i(h) softmax(E_i h)_y, experts frozen
    stage 4  joint       residuals and a copy of the router tuned together on the answer loss
    extra    head_all    a global head W: d -> C trained on all of train (stage 1's head saw 10%)
             code_gate   (configs with CODE_MOE) the released code's MoE: a gate over the logit experts s B_i A_i h,
                         trained on the answer loss, the experts frozen

RED:  p(y|x) = softmax(W_c (h + sum_i alpha_i(h) Delta h_i(h)))                            (the paper's eq. (RED))

Every stage is stored in the cache under the hash of everything that produced it, in one of the fixed
`STAGE_KINDS`, so a re-run (or another page using the same stages) loads it instead of training again.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, ClassVar

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core.config import ExperimentConfig, ParameterError
from ..core.runtime import generator, seed_everything
from ..core.store import Store
from ..core.train import TrainConfig, fit
from ..models.combiners import ResidualMixture
from ..models.experts import HeadExpert, LowRankLogits, LowRankResidual, ScaledExpert
from ..models.routers import Router
from .encoders import Encoder

PIPELINE_VERSION = 1  # bump when a stage's training code changes, so old cache entries are not reused
# The cache kinds of the pipeline's stages (under a task's namespace, e.g. "task1/router"), and what each holds.
STAGE_KINDS = {
    "prefix": "frozen-prefix states (computed once)",
    "stage1": "stage 1: encoder top + global head",
    "features": "pooled features of every item",
    "expert": "stage 2: classifier experts (oracle, uniform, MoE)",
    "residual": "stage 2: RED residual experts",
    "code": "stage 2: code-variant experts",
    "router": "stage 3: router",
    "gate": "stage 3: the softmax MoE's own gate",
    "joint": "stage 4: residuals and router tuned jointly",
    "head_all": "global head on all of train",
    "code_gate": "stage 3: the released code's MoE gate over its logit experts",
}
SPLITS = ("train", "val", "test")


@dataclass
class RedConfig(ExperimentConfig):
    """The RED pipeline's knobs, the paper's values as defaults; a task's config adds its data's."""

    backbone_fraction: float = 0.1
    backbone_epochs: int | None = None
    head_lr: float = 1e-4
    expert_hidden: int = 256
    router_hidden: int = 256
    rank_divisor: int = 4
    code_scale: float = 0.1

    def check(self) -> None:
        super().check()
        self.require_positive("backbone_epochs", "rank_divisor")
        self.require_finite("head_lr", "code_scale")
        if not 0 < self.backbone_fraction <= 1:
            raise ParameterError(f"parameter 'backbone_fraction' must be in (0, 1], got {self.backbone_fraction}")
        if self.expert_hidden < 0 or self.router_hidden < 1:
            raise ParameterError(f"parameters 'expert_hidden' (0: a linear expert) must be >= 0 and 'router_hidden' >= 1, "
                                 f"got {self.expert_hidden} and {self.router_hidden}")

    # the released code's MoE over its residual-trained logit experts, as an extra stage (the MNIST page's)
    CODE_MOE: ClassVar[bool] = False

    def base_rows(self, labels: Tensor, seed: int) -> Tensor:
        """Rows of train that stage 1 trains on: a random `backbone_fraction` of them (the paper's 10%)."""
        return subsample(len(labels), self.backbone_fraction, seed)

    def rank(self, d: int) -> int:
        """The residual rank r = d / rank_divisor (at least 1)."""
        return max(1, d // self.rank_divisor)

    def residual(self, d: int) -> LowRankResidual:
        """One RED expert Delta h = V sigma(U h), d -> r -> d."""
        return LowRankResidual(d, self.rank(d))

    def expert(self, d: int, n_classes: int) -> HeadExpert:
        """One classifier expert E_i: d -> C."""
        return HeadExpert(d, n_classes, self.expert_hidden)

    def code_expert(self, d: int, n_classes: int) -> LowRankLogits:
        """One released-code expert B A h: d -> r -> C."""
        return LowRankLogits(d, self.rank(d), n_classes)

    def router(self, d: int, n_domains: int) -> Router:
        """The two-layer router: d -> hidden -> K."""
        return Router(d, n_domains, self.router_hidden)


@dataclass
class TaskData:
    """What a task hands the pipeline: per split, each sample's item id, class and domain (all (N,) long tensors)."""

    namespace: str  # the cache namespace of the task's stages, e.g. "task1"
    ids: dict[str, Tensor]
    labels: dict[str, Tensor]
    domains: dict[str, Tensor]
    class_names: list[str]
    domain_names: list[str]
    key: dict  # what determined the data (spec, seed): part of every stage's cache key
    domain_kind: str = "domain"  # what the tables call a domain ("range" in arithmetic)

    @property
    def n_classes(self) -> int:
        return len(self.class_names)

    @property
    def n_domains(self) -> int:
        return len(self.domain_names)


class _Base(nn.Module):
    """Encoder + global head over item ids: logits = W_c h(ids), (B,) -> (B, C)."""

    def __init__(self, encoder: Encoder, head: nn.Linear):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, idx: Tensor) -> Tensor:
        return self.head(self.encoder(idx))


class Joint(nn.Module):
    """RED logits with its own router, so residuals and router train together (stage 4)."""

    def __init__(self, red: ResidualMixture, router: Router):
        super().__init__()
        self.red, self.router = red, router

    def forward(self, h: Tensor) -> Tensor:
        return self.red.logits(h, self.router(h))  # (N, d) -> (N, C)


@dataclass
class RedRun:
    """Everything one seed of the pipeline produced: features per split and every trained stage."""

    seed: int
    data: TaskData
    features: dict[str, Tensor]  # split -> (N, d) features of each sample
    head: nn.Linear  # W_c: d -> C
    experts: list[nn.Module]  # K classifier experts E_i: d -> C
    residuals: list[nn.Module]  # K RED residuals Delta h_i: d -> d
    code_experts: list[nn.Module]  # K released-code experts: d -> C
    router: Router  # alpha: d -> K
    joint: Joint  # stage 4: tuned residuals (joint.red) and router (joint.router)
    gate: Router  # the softmax MoE's own gate: d -> K
    head_all: nn.Linear  # a global head trained on all of train: d -> C
    code_scale: float
    seconds: dict[str, float] = field(default_factory=dict)
    epochs: list[dict] = field(default_factory=list)  # per trained stage: label, epochs run, best epoch, cap
    code_gate: Router | None = None  # the released code's MoE gate over the code experts (when the config asks)


def _ce(model: nn.Module, batch) -> Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def _fit_meta(res) -> dict:
    return {"best_epoch": res.best_epoch, "epochs_run": len(res.history)}


def balanced_subsample(labels: Tensor, fraction: float, seed: int) -> Tensor:
    """Sorted indices of `fraction` of the rows with as many of each class (the research code's balanced base)."""
    classes = labels.unique()
    k = max(1, round(fraction * len(labels) / len(classes)))
    g = generator(seed)
    picks = [rows[torch.randperm(len(rows), generator=g)[:k]] for rows in (torch.nonzero(labels == c)[:, 0] for c in classes)]
    return torch.cat(picks).sort().values


def subsample(n: int, fraction: float, seed: int) -> Tensor:
    """Sorted indices of a random `fraction` of n rows (the paper's base stage uses 10% of train)."""
    k = max(1, round(fraction * n))
    return torch.randperm(n, generator=generator(seed))[:k].sort().values


class _Stages:
    """The stages of one seed, each loaded from the cache when already computed (see the module docstring)."""

    def __init__(self, cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int):
        self.cfg, self.data, self.encoder, self.store, self.seed = cfg, data, encoder, store, seed
        self.seconds: dict[str, float] = {}
        self.epochs: list[dict] = []
        self.key = {"pipeline": PIPELINE_VERSION, **encoder.key(), "data": data.key}

    def kind(self, name: str) -> str:
        assert name in STAGE_KINDS, name
        return f"{self.data.namespace}/{name}"

    def timed(self, label: str, fn: Callable[[], object]):
        t0 = time.time()
        out = fn()
        self.seconds[label] = time.time() - t0
        return out

    def base(self) -> nn.Linear:
        """Stage 1: the encoder's trainable part and W_c on a fraction of train; then both are frozen."""
        cfg, data, enc = self.cfg, self.data, self.encoder
        seed_everything(self.seed)
        enc.reset()
        head = nn.Linear(enc.dim, data.n_classes).to(enc.device)
        tc = cfg.fit_config(self.seed, "stage 1: encoder top + head", cfg.lr, cfg.backbone_epochs)
        # every later stage trains on what stage 1 made: from here on, each key carries stage 1's settings
        self.key = {**self.key, "fraction": cfg.backbone_fraction, "train": asdict(tc)}
        model = _Base(enc, head)

        def train(_: nn.Module) -> dict:
            pick = cfg.base_rows(data.labels["train"], self.seed)
            tr = (data.ids["train"][pick], data.labels["train"][pick])
            # validation repeats few distinct items: score each once (an item's class is fixed)
            val_ids, first = np.unique(data.ids["val"].numpy(), return_index=True)
            return _fit_meta(fit(model, _ce, tr, (torch.as_tensor(val_ids), data.labels["val"][first]), tc))

        meta = self.store.module(self.kind("stage1"), self.key, nn.ModuleDict({"top": enc.trainable(), "head": head}),
                                 train)
        self._epochs("stage 1", meta, tc)
        enc.eval()
        return head.requires_grad_(False)

    def features(self) -> dict[str, Tensor]:
        """Features of every item with the fixed encoder, gathered per split: split -> (N, d)."""
        h_all = self.store.tensors(self.kind("features"), self.key, lambda: ({"h": self.encoder.features()}, {}))[0]["h"]
        h_all = h_all.to(self.encoder.device)  # (n_items, d)
        return {k: h_all[v] for k, v in self.data.ids.items()}

    def train(self, name: str, label: str, model: nn.Module, loss, feats: dict[str, Tensor], targets: dict[str, Tensor],
              sel: dict[str, Tensor] | None = None, **extra) -> nn.Module:
        """Train a small module on features (the rows `sel` of each split, or all) unless cached; then freeze it."""
        tc = self.cfg.fit_config(self.seed, label, self.cfg.head_lr)
        key = {**self.key, "module": label, "train2": asdict(tc), **extra}

        def run(m: nn.Module) -> dict:
            part = {k: (sel[k] if sel else slice(None)) for k in ("train", "val")}
            return _fit_meta(fit(m, loss, (feats["train"][part["train"]], targets["train"][part["train"]]),
                                 (feats["val"][part["val"]], targets["val"][part["val"]]), tc))

        model.to(self.encoder.device)
        self._epochs(label, self.store.module(self.kind(name), key, model, run), tc)
        return model.requires_grad_(False).eval()

    def residual(self, i: int, head: nn.Linear, feats: dict[str, Tensor]) -> nn.Module:
        """Stage 2's RED residual of domain i: Delta h_i trained alone on its domain through the frozen W_c."""
        cfg, data, d = self.cfg, self.data, self.encoder.dim

        def red_loss(m: nn.Module, b) -> Tensor:
            return F.cross_entropy(head(b[0] + m(b[0])), b[1])  # W_c (h + Delta h_i)

        sel = {k: data.domains[k] == i for k in ("train", "val")}
        seed_everything(self.seed * 100 + i)
        return self.train("residual", f"residual {data.domain_names[i].split()[0]}", cfg.residual(d), red_loss, feats,
                          data.labels, sel, rank=cfg.rank(d))

    def expert(self, i: int, feats: dict[str, Tensor]) -> nn.Module:
        """Stage 2's classifier expert E_i of domain i, trained alone on its domain."""
        cfg, data, d = self.cfg, self.data, self.encoder.dim
        sel = {k: data.domains[k] == i for k in ("train", "val")}
        seed_everything(self.seed * 100 + i)
        return self.train("expert", f"expert {data.domain_names[i].split()[0]}", cfg.expert(d, data.n_classes), _ce,
                          feats, data.labels, sel, hidden=cfg.expert_hidden)

    def router(self, feats: dict[str, Tensor], domains: int | None = None) -> Router:
        """Stage 3's router on the domain labels; with `domains` = k, a router over the first k domains only, trained
        on their samples (a system deployed before the later domains' experts existed)."""
        cfg, K = self.cfg, self.data.n_domains
        seed_everything(self.seed)
        loss = lambda m, b: F.cross_entropy(m.logits(b[0]), b[1])  # noqa: E731
        if domains is None or domains == K:
            return self.train("router", "router", cfg.router(self.encoder.dim, K), loss, feats, self.data.domains,
                              hidden=cfg.router_hidden)
        sel = {k: self.data.domains[k] < domains for k in ("train", "val")}
        return self.train("router", f"router over {domains} domains", cfg.router(self.encoder.dim, domains), loss, feats,
                          self.data.domains, sel, hidden=cfg.router_hidden, domains=domains)

    def _epochs(self, label: str, meta: dict, tc: TrainConfig) -> None:
        self.epochs.append({"stage": label, "epochs run": meta.get("epochs_run"), "best epoch": meta.get("best_epoch"),
                            "max epochs": tc.max_epochs, "patience": tc.patience})


def run_red(cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int) -> RedRun:
    """All stages for one seed (each loaded from the cache when already computed), as a run record."""
    st = _Stages(cfg, data, encoder, store, seed)
    head = st.timed("stage 1 (encoder + global head)", st.base)
    feats = st.timed("pooled features", st.features)
    d, C, K = encoder.dim, data.n_classes, data.n_domains
    labels, domains = data.labels, data.domains

    def code_loss(m: nn.Module, b) -> Tensor:
        return F.cross_entropy(head(b[0]) + cfg.code_scale * m(b[0]), b[1])  # W_c h + s B_i A_i h

    def experts() -> tuple[list[nn.Module], list[nn.Module], list[nn.Module]]:
        out: tuple[list, list, list] = ([], [], [])
        for i in range(K):
            sel = {k: domains[k] == i for k in ("train", "val")}
            tag = data.domain_names[i].split()[0]
            out[0].append(st.expert(i, feats))
            out[1].append(st.residual(i, head, feats))
            seed_everything(seed * 100 + i)
            out[2].append(st.train("code", f"code {tag}", cfg.code_expert(d, C), code_loss, feats, labels, sel,
                                   rank=cfg.rank(d), scale=cfg.code_scale))
        return out

    experts_, residuals, code = st.timed(f"stage 2 ({3 * K} experts)", experts)

    router_ = st.timed("stage 3 (router)", lambda: st.router(feats))

    def joint() -> Joint:
        red = ResidualMixture([copy.deepcopy(r).requires_grad_(True) for r in residuals], head)
        # a router of another width fails to load from the cache and is retrained
        return st.train("joint", "joint stage 4", Joint(red, copy.deepcopy(router_).requires_grad_(True)), _ce, feats,
                        labels, rank=cfg.rank(d), from_router=True)

    joint_ = st.timed("stage 4 (joint tuning)", joint)

    def moe_gate(kind: str, label: str, members: list[nn.Module], **extra) -> Router:
        """A softmax gate over frozen experts, trained on the mixture's answer loss (`moe_gate_loss`)."""
        # log softmax(member(h))_y of each frozen expert at the true class, (N, K): all the gate's loss needs of them
        with torch.no_grad():
            true = {k: torch.stack([m(feats[k]).log_softmax(-1).gather(1, labels[k][:, None].to(feats[k].device))[:, 0]
                                    for m in members], 1) for k in ("train", "val")}
        seed_everything(seed)
        return st.train(kind, label, cfg.router(d, K), moe_gate_loss, feats, true, hidden=cfg.router_hidden, **extra)

    def gate() -> Router:
        return moe_gate("gate", "moe gate", experts_, experts_hidden=cfg.expert_hidden)

    def head_all() -> nn.Linear:
        seed_everything(seed)
        return st.train("head_all", "global head all train", nn.Linear(d, C), _ce, feats, labels)

    def code_gate() -> Router:
        # the code experts' own answers s * B_i A_i h, as the released MoE mixes them (without W_c h)
        scaled = [ScaledExpert(e, cfg.code_scale) for e in code]
        return moe_gate("code_gate", "code moe gate", scaled, rank=cfg.rank(d), scale=cfg.code_scale)

    gate_ = st.timed("stage 3 (MoE gate)", gate)
    head_all_ = st.timed("global head on all of train", head_all)
    code_gate_ = st.timed("stage 3 (code MoE gate)", code_gate) if cfg.CODE_MOE else None
    return RedRun(seed, data, feats, head, experts_, residuals, code, router_, joint_, gate_, head_all_, cfg.code_scale,
                  st.seconds, st.epochs, code_gate_)


def retrain_residuals(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store,
                      seed: int | None = None) -> tuple[list[nn.Module], list[dict]]:
    """A finished run's RED residuals trained again under `cfg` (another head_lr or rank, say) or with another
    `seed`, on the run's stage 1 (it must be the same, and loads from the cache); each cached like stage 2; with
    their epochs."""
    st = _restart(cfg, run, encoder, store, seed)
    return [st.residual(i, run.head, run.features) for i in range(run.data.n_domains)], st.epochs[1:]


def retrain_experts(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store,
                    seed: int | None = None) -> tuple[list[nn.Module], list[dict]]:
    """A finished run's classifier experts E_i trained again under `cfg` or with another `seed` (as `retrain_residuals`)."""
    st = _restart(cfg, run, encoder, store, seed)
    return [st.expert(i, run.features) for i in range(run.data.n_domains)], st.epochs[1:]


def router_over(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, domains: int) -> Router:
    """A router over the run's first `domains` domains, trained on their samples only (cached like stage 3)."""
    if not 1 <= domains <= run.data.n_domains:
        raise ValueError(f"router_over: domains must be in [1, {run.data.n_domains}], got {domains}")
    return _restart(cfg, run, encoder, store, None).router(run.features, domains)


def _restart(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, seed: int | None) -> _Stages:
    """The stages of a finished run, stage 1 reloaded (and checked to be the run's), ready to train more (with `seed`)."""
    st = _Stages(cfg, run.data, encoder, store, run.seed)
    head = st.base()
    if not torch.equal(head.weight, run.head.weight):
        raise ValueError("retraining a stage: the config changes stage 1 (its global head differs from the run's)")
    if seed is not None:
        st.seed = seed  # later stages' keys and initialisation carry this seed; stage 1 stays the run's
    return st


def moe_gate_loss(gate: Router, batch) -> Tensor:
    """-log sum_i alpha_i(h) p_i(y): the mixture's answer loss; batch = (h (B, d), log p_i(y) (B, K))."""
    h, log_p_true = batch
    return -(gate.logits(h).log_softmax(-1) + log_p_true).logsumexp(1).mean()
