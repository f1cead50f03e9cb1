"""The RED pipeline's shared types: the data a task hands it, the run record, the modules its config sizes and the
losses its stages train (what `pipeline.py` and `stages.py` speak; the config: `configs/red.py`).

With h = h(x) in R^d the encoder's features, C classes and K domains, see `pipeline.py` for the stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..configs.red import RedConfig
from ..core.runtime import generator
from ..core.settings import StageSettings
from ..models.combiners import ResidualMixture
from ..models.experts import HeadExpert, LowRankLogits, LowRankResidual
from ..models.routers import Router
from .encoders import Encoder

SPLITS = ("train", "val", "test")
# bump when a stage's training code changes, so old cache entries are not reused (2: text batches cut to their
# longest text, small stages on STAGE_THREADS)
PIPELINE_VERSION = 2
# The cache kinds of the pipeline's stages (under a task's namespace, e.g. "t1/router"), and what each holds.
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
Job = tuple[str, int | None]  # a small stage: (method name, domain index or None)


class Base(nn.Module):
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


def ce(model: nn.Module, batch) -> Tensor:
    """Cross-entropy of model(x) against y, batch = (x, y)."""
    x, y = batch
    return F.cross_entropy(model(x), y)


def moe_gate_loss(gate: Router, batch) -> Tensor:
    """-log sum_i alpha_i(h) p_i(y): the mixture's answer loss; batch = (h (B, d), log p_i(y) (B, K))."""
    h, log_p_true = batch
    return -(gate.logits(h).log_softmax(-1) + log_p_true).logsumexp(1).mean()


def base_rows(cfg: RedConfig, labels: Tensor, seed: int) -> Tensor:
    """Rows of train that stage 1 trains on: `backbone_fraction` of them, drawn at random (the paper's 10%) or with
    as many of each class where the config asks (`BALANCED_BASE`, the research code's MNIST base)."""
    if cfg.BALANCED_BASE:
        return balanced_subsample(labels, cfg.backbone_fraction, seed)
    return subsample(len(labels), cfg.backbone_fraction, seed)


def residual_module(cfg: RedConfig, d: int) -> LowRankResidual:
    """One RED expert Delta h = V sigma(U h), d -> r -> d."""
    return LowRankResidual(d, cfg.rank(d))


def expert_module(cfg: RedConfig, d: int, n_classes: int) -> HeadExpert:
    """One classifier expert E_i: d -> C (linear, or with a hidden layer of `expert_hidden`)."""
    return HeadExpert(d, n_classes, cfg.expert_hidden)


def code_module(cfg: RedConfig, d: int, n_classes: int) -> LowRankLogits:
    """One released-code expert B A h: d -> r -> C."""
    return LowRankLogits(d, cfg.rank(d), n_classes)


def router_module(cfg: RedConfig, d: int, n_domains: int) -> Router:
    """The two-layer router: d -> hidden -> K."""
    return Router(d, n_domains, cfg.router_hidden)


@dataclass
class TaskData:
    """What a task hands the pipeline: per split, each sample's item id, class and domain (all (N,) long tensors)."""

    namespace: str  # the cache namespace of the task's stages, e.g. "t1"
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
    code_experts: list[nn.Module]  # K released-code experts: d -> C (none where the variants did not train)
    router: Router  # alpha: d -> K
    joint: Joint | None  # stage 4: tuned residuals (joint.red) and router (joint.router), where the variants trained
    gate: Router  # the softmax MoE's own gate: d -> K
    head_all: nn.Linear | None  # a global head trained on all of train: d -> C, where the variants trained
    code_scale: float
    seconds: dict[str, float] = field(default_factory=dict)
    epochs: list[dict] = field(default_factory=list)  # per trained stage: label, epochs run, best epoch, cap
    code_gate: Router | None = None  # the released code's MoE gate over the code experts (when the config asks)
    settings: StageSettings | None = None  # the fits its stages trained under (`RedConfig.stage_settings`)


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
