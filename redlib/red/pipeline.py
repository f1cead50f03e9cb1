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
`STAGE_KINDS`, so a re-run (or another page using the same stages) loads it instead of training again. Stage 1
runs in the page's process (the arithmetic pages train their runs' stage 1 side by side beforehand,
`experiments/stage1_runs.py`); the small stages after it train side by side in `workers` processes (`stages.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor, nn

from ..core.config import MAX_EPOCHS, MAX_WIDTH, ExperimentConfig, ParameterError, param
from ..core.runtime import generator
from ..core.store import Store
from ..models.experts import HeadExpert, LowRankLogits, LowRankResidual
from ..models.routers import Router
from .encoders import Encoder
from .stages import PIPELINE_VERSION, STAGE_KINDS, Joint, Stages, moe_gate_loss

__all__ = ["PIPELINE_VERSION", "STAGE_KINDS", "RedConfig", "TaskData", "RedRun", "run_red", "retrain_residuals",
           "retrain_experts", "router_over", "moe_gate_loss", "balanced_subsample", "subsample"]

SPLITS = ("train", "val", "test")
MAX_LR_STEPS = 4  # head_lr_extend's bound: 3e-3 -> 1e-2 -> 3e-2 -> 1e-1 -> 3e-1 (rates stay <= 1)


@dataclass
class RedConfig(ExperimentConfig):
    """The RED pipeline's knobs, the paper's values as defaults; a task's config adds its data's."""

    lr: float = param(1e-4, 'AdamW learning rate of stage 1 with head_lr_grid "none" (the paper: 1e-4)')
    max_epochs: int | None = param(None, "epoch cap of the experts, residuals, routers and heads (the paper: 60)")
    backbone_fraction: float = param(0.1, "share of train used for the backbone stage (the finalized setup: 10%)")
    backbone_epochs: int | None = param(None, "cap for stage 1 (the paper: 60)")
    head_lr: float = param(1e-4, 'AdamW lr of every expert, router and residual with head_lr_grid "none" (the paper: '
                                 "1e-4)")
    head_lr_grid: str = param("0.0001,0.0003,0.001,0.003", "each stage kind's lr, stage 1 included, chosen on validation "
                                                           "loss from these (\"none\": lr for stage 1, head_lr for the "
                                                           "rest, the paper's)")
    head_lr_extend: int = param(2, "a kind whose best rate is the largest tried is tried at the next rate up (1, 3, 10 "
                                   "series), at most this many times (0: the grid only)")
    expert_hidden: int = param(256, "hidden width of the classifier experts (0: a linear expert d -> C)")
    router_hidden: int = param(256, "hidden width of the two-layer router (the paper: 256)")
    rank_divisor: int = param(4, "the residual rank is d / rank_divisor (the paper: d/4)")
    code_scale: float = param(0.1, "the released code's scale on the routed expert logits")

    def check(self) -> None:
        super().check()
        self.require_positive("backbone_epochs", "rank_divisor")
        self.require_at_most(MAX_EPOCHS, "backbone_epochs")
        self.require_at_most(MAX_WIDTH, "expert_hidden", "router_hidden", "rank_divisor")
        self.require_finite("head_lr", "code_scale")
        self.lr_grid()
        if not 0 <= self.head_lr_extend <= MAX_LR_STEPS:
            raise ParameterError(f"parameter 'head_lr_extend' must be in [0, {MAX_LR_STEPS}], got {self.head_lr_extend}")
        if not 0 < self.backbone_fraction <= 1:
            raise ParameterError(f"parameter 'backbone_fraction' must be in (0, 1], got {self.backbone_fraction}")
        if self.expert_hidden < 0 or self.router_hidden < 1:
            raise ParameterError(f"parameters 'expert_hidden' (0: a linear expert) must be >= 0 and 'router_hidden' >= 1, "
                                 f"got {self.expert_hidden} and {self.router_hidden}")

    def lr_grid(self) -> list[float]:
        """The learning rates each stage kind is tried at ([]: "none", stage 1 at `lr` and the rest at `head_lr`)."""
        text = str(self.head_lr_grid).strip()
        if text == "none":
            return []
        try:
            grid = [float(v) for v in text.split(",")]
        except ValueError:
            grid = []
        if not grid or len(grid) > 8 or len(set(grid)) < len(grid) or not all(0 < v <= 1 for v in grid):
            raise ParameterError(f"parameter 'head_lr_grid' must be 'none' or 1 to 8 distinct comma-separated learning "
                                 f"rates in (0, 1], e.g. '0.0001,0.001', got {self.head_lr_grid!r}")
        return grid

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
    lrs: dict[str, float] = field(default_factory=dict)  # stage kind -> learning rate (absent: the config's head_lr)


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


def run_red(cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int,
            lrs: dict[str, float] | None = None) -> RedRun:
    """All stages for one seed (each loaded from the cache when already computed), as a run record, the small
    stages of each kind at its learning rate in `lrs` (`selection.py`; a kind not named: the config's head_lr).
    They train side by side in `parallel.worker_count()` processes; the page then loads them in this order."""
    st = Stages(cfg, data, encoder, store, seed, lrs=lrs)
    head = st.timed("stage 1 (encoder + global head)", st.base)
    feats = st.timed("pooled features", st.features)
    K = data.n_domains
    stage2 = [(name, i) for i in range(K) for name in ("expert", "residual", "code")]
    every = lambda name: [(name, i) for i in range(K)]  # noqa: E731
    # with workers, stage 4 (the longest) starts as soon as its inputs are done and the rest fills in around it,
    # the short code experts last, so that neither worker idles long at the end
    after = {("joint", None): every("residual") + [("router", None)], ("gate", None): every("expert"),
             ("code_gate", None): every("code")}
    st.prefetch([("router", None), *every("residual"), ("joint", None), *every("expert"), ("gate", None),
                 ("head_all", None), *every("code"), *([("code_gate", None)] if cfg.CODE_MOE else [])], after)
    st.timed(f"stage 2 ({3 * K} experts)", lambda: [st.get(job) for job in stage2])
    router_ = st.timed("stage 3 (router)", lambda: st.get(("router", None)))
    joint_ = st.timed("stage 4 (joint tuning)", lambda: st.get(("joint", None)))
    gate_ = st.timed("stage 3 (MoE gate)", lambda: st.get(("gate", None)))
    head_all_ = st.timed("global head on all of train", lambda: st.get(("head_all", None)))
    code_gate_ = st.timed("stage 3 (code MoE gate)", lambda: st.get(("code_gate", None))) if cfg.CODE_MOE else None
    return RedRun(seed, data, feats, head, *([st.get((name, i)) for i in range(K)] for name in ("expert", "residual", "code")),
                  router_, joint_, gate_, head_all_, cfg.code_scale, st.seconds, st.epochs, code_gate_, st.lrs)


def retrain_residuals(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store,
                      seed: int | None = None) -> tuple[list[nn.Module], list[dict]]:
    """A finished run's RED residuals trained again under `cfg` (another head_lr or rank, say) or with another
    `seed`, on the run's stage 1 (it must be the same, and loads from the cache); each cached like stage 2; with
    their epochs."""
    return _retrain(cfg, run, encoder, store, seed, "residual")


def retrain_experts(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store,
                    seed: int | None = None) -> tuple[list[nn.Module], list[dict]]:
    """A finished run's classifier experts E_i trained again under `cfg` or with another `seed` (as `retrain_residuals`)."""
    return _retrain(cfg, run, encoder, store, seed, "expert")


def router_over(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, domains: int) -> Router:
    """A router over the run's first `domains` domains, trained on their samples only (cached like stage 3)."""
    if not 1 <= domains <= run.data.n_domains:
        raise ValueError(f"router_over: domains must be in [1, {run.data.n_domains}], got {domains}")
    return _restart(cfg, run, encoder, store, None).router(domains)


def _retrain(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, seed: int | None,
             name: str) -> tuple[list[nn.Module], list[dict]]:
    """Every domain's stage-2 module `name` trained again (side by side in worker processes), with epochs."""
    st = _restart(cfg, run, encoder, store, seed)
    jobs = [(name, i) for i in range(run.data.n_domains)]
    st.prefetch(jobs, {})
    return [st.get(job) for job in jobs], st.epochs[1:]


def _restart(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, seed: int | None) -> Stages:
    """The stages of a finished run, stage 1 reloaded (and checked to be the run's), ready to train more (with `seed`)
    at the run's learning rates."""
    st = Stages(cfg, run.data, encoder, store, run.seed, lrs=run.lrs)
    head = st.base()
    st.feats = run.features
    if not torch.equal(head.weight, run.head.weight):
        raise ValueError("retraining a stage: the config changes stage 1 (its global head differs from the run's)")
    if seed is not None:
        st.seed = seed  # later stages' keys and initialisation carry this seed; stage 1 stays the run's
    return st

