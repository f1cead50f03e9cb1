"""The small stages of one seed as *jobs* ("expert", i), ("router", None), ...: each job's key function (`WHAT`: its
label and what its cache key adds, known without building a module) and its function (`JOBS`: build the module and
train it, or load it, through the seed's `Stages`). Each job seeds itself, so it trains the same in any process and
order (`schedule.py`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..configs.red import RedConfig
from ..core.runtime import seed_everything
from ..core.stacked import LogitsFn
from ..models.combiners import ResidualMixture
from ..models.experts import ScaledExpert
from ..models.routers import Router
from .types import Job, Joint, TaskData, ce, code_module, expert_module, moe_gate_loss, residual_module, router_module


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


class StageInputs(Protocol):
    """What a job reads of its seed's stages (`stages.Stages`): the config, data, stage 1's head and features, and
    the calls that train a module or get another job's."""

    cfg: RedConfig
    data: TaskData
    seed: int
    dim: int
    head: nn.Linear | None
    feats: dict[str, Tensor]

    def train(self, name: str, label: str, model: nn.Module, loss, targets: dict[str, Tensor],
              sel: dict[str, Tensor] | None = None, **extra) -> nn.Module: ...

    def train_spec(self, spec: Spec) -> nn.Module: ...

    def get(self, job: Job) -> nn.Module: ...

    def inputs_lr(self, *names: str) -> dict[str, float]: ...

    def domain_rows(self, i: int) -> dict[str, Tensor]: ...

    def tag(self, i: int) -> str: ...


# ---- each job's key function: its label and what its cache key adds, known without building a module ----

def expert_what(st: StageInputs, i: int) -> tuple[str, dict]:
    return f"expert {st.tag(i)}", {"hidden": st.cfg.expert_hidden}


def residual_what(st: StageInputs, i: int) -> tuple[str, dict]:
    return f"residual {st.tag(i)}", {"rank": st.cfg.rank(st.dim)}


def code_what(st: StageInputs, i: int) -> tuple[str, dict]:
    return f"code {st.tag(i)}", {"rank": st.cfg.rank(st.dim), "scale": st.cfg.code_scale}


def router_what(st: StageInputs, domains: int | None = None) -> tuple[str, dict]:
    if domains is None or domains == st.data.n_domains:
        return "router", {"hidden": st.cfg.router_hidden}
    return f"router over {domains} domains", {"hidden": st.cfg.router_hidden, "domains": domains}


def joint_what(st: StageInputs) -> tuple[str, dict]:
    return "joint stage 4", {"rank": st.cfg.rank(st.dim), "from_router": True,
                             "inputs_lr": st.inputs_lr("residual", "router")}


def gate_what(st: StageInputs) -> tuple[str, dict]:
    return "moe gate", {"hidden": st.cfg.router_hidden, "experts_hidden": st.cfg.expert_hidden,
                        "inputs_lr": st.inputs_lr("expert")}


def code_gate_what(st: StageInputs) -> tuple[str, dict]:
    return "code moe gate", {"hidden": st.cfg.router_hidden, "rank": st.cfg.rank(st.dim), "scale": st.cfg.code_scale,
                             "inputs_lr": st.inputs_lr("code")}


def head_all_what(st: StageInputs) -> tuple[str, dict]:
    return "global head all train", {}


# every job's key function, by the job's name: `Stages.job_path` asks it, and the job trains under it
WHAT: dict[str, Callable[..., tuple[str, dict]]] = {
    "expert": expert_what, "residual": residual_what, "code": code_what, "router": router_what, "joint": joint_what,
    "gate": gate_what, "code_gate": code_gate_what, "head_all": head_all_what}


def expert_spec(st: StageInputs, i: int) -> Spec:
    """Stage 2's classifier expert E_i of domain i, trained alone on its domain."""
    label, extra = expert_what(st, i)
    seed_everything(st.seed * 100 + i)
    return Spec("expert", label, expert_module(st.cfg, st.dim, st.data.n_classes), ce, st.data.labels,
                st.domain_rows(i), extra, lambda m, h: m(h))


def residual_spec(st: StageInputs, i: int) -> Spec:
    """Stage 2's RED residual of domain i: Delta h_i trained alone on its domain through the frozen W_c."""
    head = st.head

    def logits(m: nn.Module, h: Tensor) -> Tensor:
        return head(h + m(h))  # W_c (h + Delta h_i)

    label, extra = residual_what(st, i)
    seed_everything(st.seed * 100 + i)
    return Spec("residual", label, residual_module(st.cfg, st.dim), _ce_of(logits), st.data.labels,
                st.domain_rows(i), extra, logits)


def code_spec(st: StageInputs, i: int) -> Spec:
    """Stage 2's released-code expert of domain i: logits W_c h + s B_i A_i h, trained alone on its domain."""
    cfg, head = st.cfg, st.head

    def logits(m: nn.Module, h: Tensor) -> Tensor:
        return head(h) + cfg.code_scale * m(h)  # W_c h + s B_i A_i h

    label, extra = code_what(st, i)
    seed_everything(st.seed * 100 + i)
    return Spec("code", label, code_module(cfg, st.dim, st.data.n_classes), _ce_of(logits), st.data.labels,
                st.domain_rows(i), extra, logits)


def _ce_of(logits: LogitsFn):
    """The loss cross-entropy(logits(m, h), y) on a batch (h, y)."""
    return lambda m, b: F.cross_entropy(logits(m, b[0]), b[1])


# the stage-2 kinds whose experts (one per domain, same shapes, disjoint data) train as one stack, each a Spec
SPECS: dict[str, Callable[[StageInputs, int], Spec]] = {"expert": expert_spec, "residual": residual_spec, "code": code_spec}
STACKED = tuple(SPECS)


def expert(st: StageInputs, i: int) -> nn.Module:
    """Stage 2's classifier expert E_i (trained in its kind's stack unless cached)."""
    return st.train_spec(expert_spec(st, i))


def residual(st: StageInputs, i: int) -> nn.Module:
    """Stage 2's RED residual Delta h_i (trained in its kind's stack unless cached)."""
    return st.train_spec(residual_spec(st, i))


def code(st: StageInputs, i: int) -> nn.Module:
    """Stage 2's released-code expert B_i A_i (trained in its kind's stack unless cached)."""
    return st.train_spec(code_spec(st, i))


def router(st: StageInputs, domains: int | None = None) -> Router:
    """Stage 3's router on the domain labels; with `domains` = k, a router over the first k domains only, trained
    on their samples (a system deployed before the later domains' experts existed)."""
    K, (label, extra) = st.data.n_domains, router_what(st, domains)
    seed_everything(st.seed)
    loss = lambda m, b: F.cross_entropy(m.logits(b[0]), b[1])  # noqa: E731
    if domains is None or domains == K:
        return st.train("router", label, router_module(st.cfg, st.dim, K), loss, st.data.domains, **extra)
    sel = {k: st.data.domains[k] < domains for k in ("train", "val")}
    return st.train("router", label, router_module(st.cfg, st.dim, domains), loss, st.data.domains, sel, **extra)


def joint(st: StageInputs) -> Joint:
    """Stage 4: copies of the residuals and the router tuned together on the answer loss."""
    K, (label, extra) = st.data.n_domains, joint_what(st)
    residuals = [copy.deepcopy(st.get(("residual", i))).requires_grad_(True) for i in range(K)]
    router_ = copy.deepcopy(st.get(("router", None))).requires_grad_(True)
    # a router of another width fails to load from the cache and is retrained
    return st.train("joint", label, Joint(ResidualMixture(residuals, st.head), router_), ce, st.data.labels, **extra)


def _moe_gate(st: StageInputs, kind: str, members: list[nn.Module]) -> Router:
    """A softmax gate over frozen experts, trained on the mixture's answer loss (`moe_gate_loss`)."""
    labels, feats, (label, extra) = st.data.labels, st.feats, WHAT[kind](st)
    with torch.no_grad():  # log softmax(member(h))_y of each frozen expert at the true class, (N, K): all the loss needs
        true = {k: torch.stack([m(feats[k]).log_softmax(-1).gather(1, labels[k][:, None].to(feats[k].device))[:, 0]
                                for m in members], 1) for k in ("train", "val")}
    seed_everything(st.seed)
    return st.train(kind, label, router_module(st.cfg, st.dim, st.data.n_domains), moe_gate_loss, true, **extra)


def gate(st: StageInputs) -> Router:
    """Stage 3's softmax-MoE gate over the classifier experts (the paper's 4.3.4)."""
    return _moe_gate(st, "gate", [st.get(("expert", i)) for i in range(st.data.n_domains)])


def code_gate(st: StageInputs) -> Router:
    """The released code's MoE: a gate over its logit experts' own answers s B_i A_i h (without W_c h)."""
    scaled = [ScaledExpert(st.get(("code", i)), st.cfg.code_scale) for i in range(st.data.n_domains)]
    return _moe_gate(st, "code_gate", scaled)


def head_all(st: StageInputs) -> nn.Linear:
    """A global head W: d -> C trained on all of train (stage 1's head saw a fraction)."""
    label, extra = head_all_what(st)
    seed_everything(st.seed)
    return st.train("head_all", label, nn.Linear(st.dim, st.data.n_classes), ce, st.data.labels, **extra)


# every job's function, by the job's name (a stage kind of STAGE_KINDS)
JOBS: dict[str, Callable[..., nn.Module]] = {"expert": expert, "residual": residual, "code": code, "router": router,
                                              "joint": joint, "gate": gate, "code_gate": code_gate,
                                              "head_all": head_all}
