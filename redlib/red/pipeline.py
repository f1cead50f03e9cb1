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
`experiments/stage1_runs.py`); the small stages after it train side by side in `workers` processes
(`schedule.py`). The shared types are in `types.py`; what each stage is, in `stages.py`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..core.settings import StageSettings
from ..core.store import Store
from ..models.routers import Router
from .schedule import prefetch
from .clock import timed
from .encoders import Encoder
from .jobs import router
from .stages import Stages
from .types import (PIPELINE_VERSION, STAGE_KINDS, Job, RedConfig, RedRun, TaskData, balanced_subsample, moe_gate_loss,
                    subsample)

__all__ = ["PIPELINE_VERSION", "STAGE_KINDS", "RedConfig", "TaskData", "RedRun", "run_red", "small_jobs", "retrain_residuals",
           "retrain_experts", "router_over", "moe_gate_loss", "balanced_subsample", "subsample"]


def run_red(cfg: RedConfig, data: TaskData, encoder: Encoder, store: Store, seed: int,
            settings: StageSettings | None = None, variants: bool | None = None) -> RedRun:
    """All stages for one seed (each loaded from the cache when already computed), as a run record, every stage
    trained under `settings` (None: the config's protocol, `cfg.stage_settings()`; an extension passes its rates or
    epoch budget there). The variant methods' stages (the code's logit experts and gate, stage 4, the head on all of
    train) train only where `variants` (None: `cfg.variants_on(seed)`); elsewhere the record holds none of them. The
    small stages train side by side in `parallel.worker_count()` processes; the page then loads them in this order."""
    st = Stages(cfg, data, encoder, store, seed, settings=settings)
    clock = lambda label, fn: timed(st.seconds, store, label, fn)  # noqa: E731
    head = clock("stage 1 (encoder + global head)", st.base)
    feats = clock("pooled features", st.features)
    K = data.n_domains
    with_variants = cfg.variants_on(seed) if variants is None else variants
    kinds = ("expert", "residual", "code") if with_variants else ("expert", "residual")
    prefetch(st, *small_jobs(cfg, K, with_variants))
    clock(f"stage 2 ({len(kinds) * K} experts)", lambda: [st.get((name, i)) for i in range(K) for name in kinds])
    router_ = clock("stage 3 (router)", lambda: st.get(("router", None)))
    def variant(label: str, job: tuple, on: bool = True) -> nn.Module | None:
        return clock(label, lambda: st.get(job)) if with_variants and on else None

    joint_ = variant("stage 4 (joint tuning)", ("joint", None))
    gate_ = clock("stage 3 (MoE gate)", lambda: st.get(("gate", None)))
    head_all_ = variant("global head on all of train", ("head_all", None))
    code_gate_ = variant("stage 3 (code MoE gate)", ("code_gate", None), cfg.CODE_MOE)
    experts, residuals, code = ([st.get((name, i)) for i in range(K)] if name in kinds else []
                                for name in ("expert", "residual", "code"))
    return RedRun(seed, data, feats, head, experts, residuals, code, router_, joint_, gate_, head_all_, cfg.code_scale,
                  st.seconds, st.epochs, code_gate_, st.settings)


def small_jobs(cfg: RedConfig, K: int, with_variants: bool) -> tuple[list[Job], dict[Job, list[Job]]]:
    """A seed's small stages over K domains as jobs, in the order workers start them, and the jobs each comes after
    (the variant methods' only `with_variants`). With workers, stage 4 (the longest) starts as soon as its inputs are
    done and the rest fills in around it, the short code experts last, so that neither worker idles long at the end."""
    every = lambda name: [(name, i) for i in range(K)]  # noqa: E731
    after = {("joint", None): every("residual") + [("router", None)], ("gate", None): every("expert"),
             ("code_gate", None): every("code")}
    variant_jobs = {("joint", None), ("head_all", None), *every("code"), ("code_gate", None)}
    jobs = [("router", None), *every("residual"), ("joint", None), *every("expert"), ("gate", None), ("head_all", None),
            *every("code"), *([("code_gate", None)] if cfg.CODE_MOE else [])]
    return [j for j in jobs if with_variants or j not in variant_jobs], after


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


def router_over(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store,
                domains: int) -> tuple[Router, list[dict]]:
    """A router over the run's first `domains` domains, trained on their samples only (cached like stage 3); with
    its epochs."""
    if not 1 <= domains <= run.data.n_domains:
        raise ValueError(f"router_over: domains must be in [1, {run.data.n_domains}], got {domains}")
    st = _restart(cfg, run, encoder, store, None)
    return router(st, domains), st.epochs[1:]


def _retrain(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, seed: int | None,
             name: str) -> tuple[list[nn.Module], list[dict]]:
    """Every domain's stage-2 module `name` trained again (side by side in worker processes), with epochs."""
    st = _restart(cfg, run, encoder, store, seed)
    jobs = [(name, i) for i in range(run.data.n_domains)]
    prefetch(st, jobs, {})
    return [st.get(job) for job in jobs], st.epochs[1:]


def _restart(cfg: RedConfig, run: RedRun, encoder: Encoder, store: Store, seed: int | None) -> Stages:
    """The stages of a finished run, stage 1 reloaded (and checked to be the run's), ready to train more (with `seed`)
    under `cfg`, at the rates the run's extension gave its stage kinds."""
    rates = run.settings.lrs if run.settings else None  # an extension's rates, under `cfg`'s protocol
    st = Stages(cfg, run.data, encoder, store, run.seed, settings=cfg.stage_settings(rates))
    head = st.base()
    st.feats = run.features
    if not torch.equal(head.weight, run.head.weight):
        raise ValueError("retraining a stage: the config changes stage 1 (its global head differs from the run's)")
    if seed is not None:
        st.seed = seed  # later stages' keys and initialisation carry this seed; stage 1 stays the run's
    return st

