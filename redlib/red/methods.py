"""Every way of answering from a run's stages, behind one interface, and their evaluation.

A method is a gate and a combiner: alpha = gate(h, domain) (N, K), then logits = combine(h, alpha) (N, C).
`method(h, domains, alpha=...)` returns (logits, alpha); `alpha` overrides the gate's weights, either as a
tensor (N, K) or as a function of them (routing noise, an expert removed or added), so evaluation, the
robustness study and the plug-in study treat every method alike. Mixtures of probabilities return
log-probabilities as their logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core.metrics import accuracy, macro_f1, wilson
from ..models.combiners import LogitMixture, ProbMixture, ResidualMixture
from ..models.experts import BasePlusResidual, ScaledExpert
from .pipeline import RedRun

Gate = Callable[[Tensor, Tensor], Tensor]  # (h (N, d), true domain (N,)) -> alpha (N, K)
Override = Union[Tensor, Callable[[Tensor], Tensor], None]


@dataclass
class Method:
    """One deployable (or oracle) way to answer; `gate` is None for methods that do not route."""

    name: str
    combine: Callable[[Tensor, Tensor | None], Tensor]  # (h (N, d), alpha (N, K)) -> logits (N, C)
    gate: Gate | None = None
    mixture: ProbMixture | None = None  # a probability mixture's experts (its float32 ties are counted)

    @torch.no_grad()
    def __call__(self, h: Tensor, domains: Tensor | None = None, alpha: Override = None) -> tuple[Tensor, Tensor | None]:
        """Class logits (N, C) and the routing weights used (N, K), or None for a method that does not route."""
        a = None
        if self.gate is not None:
            a = self.gate(h, domains)
            if alpha is not None:
                a = (alpha(a) if callable(alpha) else alpha).to(h.device)
        return self.combine(h, a), a


# name -> builder from a run record; the order is the order of every table
METHODS: dict[str, Callable[[RedRun], Method | None]] = {}


def register(name: str):
    """Decorator: add a method builder to the registry under `name`."""
    def add(builder: Callable[[RedRun], Method | None]) -> Callable[[RedRun], Method | None]:
        METHODS[name] = builder
        return builder
    return add


def _router(run: RedRun) -> Gate:
    return lambda h, _: run.router(h)


def _mixture(name: str, experts: Sequence[nn.Module], gate: Gate) -> Method:
    """A probability mixture sum_i alpha_i softmax(E_i h), computed in log space (`ProbMixture.log_probs`)."""
    mix = ProbMixture(experts)
    return Method(name, mix.log_probs, gate, mix)


@torch.no_grad()
def float32_ties(method: Method, h: Tensor, domains: Tensor) -> np.ndarray:
    """Which inputs (N,) the mixture summed as float32 probabilities (the computation before log space) leaves with
    two or more classes exactly tied at the top, so that argmax picked the lowest class; all False for a method
    that is not a probability mixture."""
    if method.mixture is None:
        return np.zeros(len(h), bool)
    probs = method.mixture(h, method.gate(h, domains))
    return ((probs == probs.max(-1, keepdim=True).values).sum(-1) > 1).cpu().numpy()


@register("global head")
def global_head(run: RedRun) -> Method:
    """W_c h: the stage-1 head alone."""
    return Method("global head", lambda h, _: run.head(h))


@register("global head (all of train)")
def global_head_all(run: RedRun) -> Method | None:
    """A head W: d -> C trained on all of train over the fixed features (a labelled variant of the baseline; only
    where the run trained the variants)."""
    if run.head_all is None:
        return None
    return Method("global head (all of train)", lambda h, _: run.head_all(h))


@register("oracle experts")
def oracle(run: RedRun) -> Method:
    """The true domain picks the classifier expert: a bound on the methods mixing the same experts (not on RED, whose
    experts are residuals), not deployable."""
    K = run.data.n_domains
    return _mixture("oracle experts", run.experts, lambda h, d: F.one_hot(d.to(h.device), K).float())


@register("uniform averaging")
def uniform(run: RedRun) -> Method:
    """alpha_i = 1/K: the experts' softmax outputs averaged."""
    K = run.data.n_domains
    return _mixture("uniform averaging", run.experts, lambda h, _: torch.full((len(h), K), 1 / K, device=h.device))


@register("softmax MoE")
def softmax_moe(run: RedRun) -> Method:
    """The paper's classical MoE (4.3.4): sum_i alpha_i(h) softmax(E_i h), alpha from its own gate (answer loss)."""
    return _mixture("softmax MoE", run.experts, lambda h, _: run.gate(h))


@register("softmax MoE (RED's router)")
def softmax_moe_shared(run: RedRun) -> Method:
    """The same mixture with RED's range-supervised router as its gate (a labelled variant)."""
    return _mixture("softmax MoE (RED's router)", run.experts, _router(run))


@register("RED")
def red(run: RedRun) -> Method:
    """W_c (h + sum_i alpha_i Delta h_i(h)), the paper's form."""
    mix = ResidualMixture(run.residuals, run.head)
    return Method("RED", mix.logits, _router(run))


@register("RED (true range)")
def red_oracle(run: RedRun) -> Method:
    """RED with the true range as its routing: RED's own upper bound."""
    K = run.data.n_domains
    mix = ResidualMixture(run.residuals, run.head)
    return Method("RED (true range)", mix.logits, lambda h, d: F.one_hot(d.to(h.device), K).float())


@register("RED stage 4")
def red_joint(run: RedRun) -> Method | None:
    """RED with residuals and router tuned together (stage 4; only where the run trained the variants)."""
    if run.joint is None:
        return None
    return Method("RED stage 4", run.joint.red.logits, lambda h, _: run.joint.router(h))


@register("RED code variant")
def red_code(run: RedRun) -> Method | None:
    """The released code's form: W_c h + scale * sum_i alpha_i B_i A_i h (only where the run trained the variants)."""
    if not run.code_experts:
        return None
    mix = LogitMixture(run.code_experts, run.head, run.code_scale)
    return Method("RED code variant", mix.logits, _router(run))


CODE_MOE = "softmax MoE (code experts)"  # the released code's MoE


@register(CODE_MOE)
def softmax_moe_code(run: RedRun) -> Method | None:
    """The released code's MoE as we read it: sum_i alpha_i(h) softmax(s B_i A_i h), its own gate trained on the
    answer loss over the logit experts trained as residuals (only where the run trained that gate)."""
    if run.code_gate is None:
        return None
    scaled = [ScaledExpert(e, run.code_scale) for e in run.code_experts]
    return _mixture(CODE_MOE, scaled, lambda h, _: run.code_gate(h))


def residual_gating(run: RedRun) -> Method:
    """The no-residual ablation (4.9.1): RED's own experts and router, each expert answering softmax(W_c (h + Delta h_i))
    and alpha mixing those answers as probabilities (plain softmax gating) instead of summing residuals in hidden
    space. Not registered: only the ablation uses it."""
    experts = [nn.Sequential(BasePlusResidual(nn.Identity(), r), run.head) for r in run.residuals]
    return _mixture(NO_RESIDUAL, experts, _router(run))


NO_RESIDUAL = "RED's experts, softmax gating"
# the overall table's count of inputs a float32 probability mixture leaves with a tie at the top (`float32_ties`)
TIES = "float32 ties"


def methods(run: RedRun, names: list[str] | None = None) -> dict[str, Method]:
    """The registered methods (or those named) built on one run; unnamed ones the run lacks a stage for are left out."""
    built = {n: METHODS[n](run) for n in names or METHODS}
    missing = [n for n, m in built.items() if m is None and names]
    if missing:
        raise ValueError(f"this run has no stage for {', '.join(missing)}")
    return {n: m for n, m in built.items() if m is not None}


def predict(run: RedRun, split: str = "test", alpha: dict[str, Override] | None = None,
            names: list[str] | None = None) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Predicted classes (N,) and routing weights (N, K) of each method on a split; `alpha` overrides by method."""
    h, d = run.features[split], run.data.domains[split]
    out = {}
    for name, m in methods(run, names).items():
        logits, a = m(h, d, (alpha or {}).get(name))
        out[name] = (logits.argmax(-1).cpu().numpy(), None if a is None else a.cpu().numpy())
    return out


def score(run: RedRun, split: str = "test", subsets: dict[str, np.ndarray] | None = None,
          alpha: dict[str, Override] | None = None,
          preds: dict[str, tuple[np.ndarray, np.ndarray | None]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy and macro-F1 of every method overall (plus accuracy on each boolean `subsets` mask) and per domain.

    Per domain, a 95% Wilson interval counts distinct inputs, not samples: a repeated input is one observation.
    Each probability mixture's row counts the inputs (`TIES`) the float32 sum of its probabilities left tied.
    `preds` reuses predictions already made by `predict` on the same split.
    """
    y, dom, ids = run.data.labels[split].numpy(), run.data.domains[split].numpy(), run.data.ids[split].numpy()
    kind, overall, per_domain = run.data.domain_kind, [], []
    built = methods(run) if alpha is None else {}
    for name, (pred, _) in (preds if preds is not None else predict(run, split, alpha)).items():
        row = {"method": name, "accuracy": accuracy(y, pred), "macro_f1": macro_f1(y, pred, np.unique(y))}
        if name in built and built[name].mixture is not None:  # what the float32 sum of probabilities left tied
            row[TIES] = int(float32_ties(built[name], run.features[split], run.data.domains[split]).sum())
        for sub, mask in (subsets or {}).items():
            row[f"{sub}_accuracy"] = accuracy(y[mask], pred[mask]) if mask.any() else np.nan
        overall.append(row)
        for i, dname in enumerate(run.data.domain_names):
            sel = dom == i
            acc, distinct = accuracy(y[sel], pred[sel]), len(np.unique(ids[sel]))
            lo, hi = wilson(acc, distinct)
            per_domain.append({"method": name, kind: dname, "accuracy": acc,
                               "macro_f1": macro_f1(y[sel], pred[sel], np.unique(y[sel])),
                               "distinct inputs": distinct, "ci95 low": lo, "ci95 high": hi})
    return pd.DataFrame(overall).assign(seed=run.seed), pd.DataFrame(per_domain).assign(seed=run.seed)


@torch.no_grad()
def router_accuracy(run: RedRun) -> pd.DataFrame:
    """The router's own domain accuracy (argmax alpha against the true domain) on train, val and test."""
    rows = [{"split_part": s, "router_accuracy": accuracy(run.data.domains[s].numpy(),
                                                          run.router(run.features[s]).argmax(-1).cpu().numpy())}
            for s in ("train", "val", "test")]
    return pd.DataFrame(rows).assign(seed=run.seed)
