"""Routing noise, plug-in modularity, the rank and no-residual ablations, and cost (the paper's RQ2-RQ4, 4.9, 4.10).

Nothing here trains from scratch what a section's page trains: the runs of Task 1, Task 2 (the paper's iid
protocol) and MNIST are the same pipeline calls with the same configs as their pages, so their stages load
from the cache (and train, on a fresh machine). New are only the stages the studies need: residuals of other
ranks, experts retrained with another seed, a router over the first domains. Its knobs:
`configs/robustness_and_cost.py`.
"""

from __future__ import annotations

import copy
import gc
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from ..configs.mnist_label5 import MnistConfig
from ..configs.robustness_and_cost import RobustnessConfig
from ..configs.task1_addition import Task1Config
from ..configs.task2_mixed import Task2Config
from ..core.metrics import accuracy
from ..core.runtime import derived_seed
from ..core.store import Store, state_equal
from ..models.backbone import Backbone
from ..core.settings import progress_enabled
from ..red import cost, methods, perturbation
from ..red.encoders import Encoder
from ..red.pipeline import RedConfig, RedRun, retrain_experts, retrain_residuals, router_over, run_red
from . import mnist_label5, ranges, task1_addition, task2_mixed
from . import robustness_and_cost_report as report
from ..configs.ranges import Setting
from .robustness_and_cost_report import ROUTED, profile_words  # noqa: F401 (the page's opening line)

REFERENCE = ("uniform averaging", "global head")  # routing-free references
T1, T2, MN = Task1Config.KEY, Task2Config.KEY, MnistConfig.KEY  # the source pages, by their keys
FRAMES = {T1: task1_addition.frames, T2: task2_mixed.frames}  # the range pages' data
TASKS = {T1: "Task 1", T2: "Task 2", MN: "MNIST"}
# the bare verdicts the findings glue (`book/agreement.py`): Task 1's plug-in verdict is the claim's; MNIST's is an
# extension's, which no ledger row holds
FINDINGS_VERDICTS = {"rb_t1_plug_in": "mod.plug_in", "rb_mn_plug_in": None}


@dataclass
class Loaded:
    """One seed of a source page's run, in the paper's protocol: the pipeline's record and what trained it."""

    task: str  # a key of TASKS
    cfg: RedConfig
    red: RedRun
    encoder: Encoder
    range_run: ranges.RangeRun | None = None  # the arithmetic tasks' frames (boundary sums)


def load(cfg: RobustnessConfig, task: str, seed: int, store: Store, bb: Backbone | None = None,
         digits: dict | None = None) -> Loaded:
    """The run of one seed of a source page (Task 1 and Task 2 on the paper's iid split; cached stages load)."""
    src = cfg.sources()[task]
    if task == MN:
        data, enc = mnist_label5.task(src, digits if digits is not None else mnist_label5.load(src, seed), seed)
        return Loaded(task, src, run_red(src, data, enc, store, seed), enc)
    rr = ranges.run(src, FRAMES[task], seed, Setting(src.split), bb, store)
    return Loaded(task, src, rr.red, rr.encoder, rr)


def train_sources(cfg: RobustnessConfig, store: Store, progress: bool = True) -> int:
    """Train (or load) into `store` every source page's run this page reuses, each task and seed, exactly as the page
    loads them, and nothing of its own: the stage cache `bench --warm-from` times this page after, without running
    the source pages' extensions. Returns how many stages were computed."""
    from tqdm.auto import tqdm

    bb = ranges.backbone(cfg.sources()[T1])
    for task in TASKS:
        for s in tqdm(cfg.seeds, desc=f"{TASKS[task]}: the runs this page reuses", disable=not progress):
            load(cfg, task, s, store, bb)
    return store.misses


def run(cfg: RobustnessConfig, store: Store) -> dict[str, pd.DataFrame]:
    """Every study on every seed of the source pages' runs (loaded): routing perturbations on Task 1, Task 2 and
    MNIST; plug-in modularity on Task 1 and MNIST; the no-residual and rank ablations on Task 1 and Task 2; the
    boundary sums on Task 1; and what RED adds in parameters and compute. (What other pages' runs cost is read, not
    trained: `book/costs.py`.)"""
    from tqdm.auto import tqdm

    src = cfg.sources()
    bb = ranges.backbone(src[T1])  # Task 1 and Task 2 share it
    parts: dict[str, list[pd.DataFrame]] = {}
    keep = lambda **tables: [parts.setdefault(k, []).append(df) for k, df in tables.items()]  # noqa: E731
    for task in (T1, MN, T2):
        for s in tqdm(cfg.seeds, desc=TASKS[task], disable=not progress_enabled()):
            ld = load(cfg, task, s, store, bb)
            keep(sweep=sweep(ld, cfg.levels()))
            if task in (T1, MN):
                keep(**modularity(ld, store, cfg.replacement_seed, cfg.trains(s)))
            if task in (T1, T2):
                keep(no_residual=no_residual(ld))
                if cfg.trains(s):
                    keep(**rank_ablation(ld, store, cfg.ranks))
            if task == T1:
                keep(boundary=boundary(ld))
            del ld
            gc.collect()
    t = {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}
    t["parameter_cost"] = task1_addition.cost(bb, src[T1])
    tokens = int(t["parameter_cost"]["tokens per question"].iloc[0])
    t["method_cost"] = cost.method_cost(bb, src[T1], 5, 99, tokens)
    return t


def claims(cfg: RobustnessConfig, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Every rob.*, mod.*, abl.* and eff.* claim (`robustness_and_cost_report.claims`)."""
    return report.claims(cfg, tables)


def found(cfg: RobustnessConfig, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (`robustness_and_cost_report.found`)."""
    return report.found(cfg, tables, verdicts)


def _accuracy(run: RedRun, preds: dict) -> dict[str, float]:
    y = run.data.labels["test"].numpy()
    return {name: accuracy(y, p) for name, (p, _) in preds.items()}


def sweep(ld: Loaded, levels: dict[str, list[float]]) -> pd.DataFrame:
    """Test accuracy of the routed methods under each perturbation and strength, with the routing-free references."""
    run = ld.red
    h = run.features["test"]
    gates = {"RED": run.router, "softmax MoE": run.gate, "softmax MoE (RED's router)": run.router}
    ref = _accuracy(run, methods.predict(run, names=list(REFERENCE)))
    clean = _accuracy(run, methods.predict(run, names=list(ROUTED))) | ref
    rows = [{"task": TASKS[ld.task], "seed": run.seed, "perturbation": "none", "strength": 0.0, "method": m,
             "accuracy": a} for m, a in clean.items()]
    for kind, strengths in levels.items():
        for j, s in enumerate(strengths):
            seed = derived_seed(run.seed, j, per=1000)  # the same inputs misrouted, the same noise, for every method
            with torch.no_grad():
                alpha = {m: perturbation.perturb(kind, g(h), g.logits(h), s, seed) for m, g in gates.items()}
            acc = _accuracy(run, methods.predict(run, alpha=alpha, names=list(ROUTED))) | ref
            rows += [{"task": TASKS[ld.task], "seed": run.seed, "perturbation": kind, "strength": s, "method": m,
                      "accuracy": a} for m, a in acc.items()]
    return pd.DataFrame(rows)


def _per_domain(run: RedRun, alpha: dict | None = None, names: tuple[str, ...] = ("RED", "softmax MoE")) -> pd.DataFrame:
    preds = methods.predict(run, alpha=alpha, names=list(names))
    per_domain = methods.score(run, "test", preds=preds)[1].rename(columns={run.data.domain_kind: "domain"})
    return per_domain[["method", "domain", "accuracy"]]


def modularity(ld: Loaded, store: Store, replacement_seed: int, train: bool = True) -> dict[str, pd.DataFrame]:
    """Per-domain accuracy with each expert removed and (with `train`) with each expert replaced by one trained with
    another seed, and of a system deployed with all but the last expert, then completed by training that expert and
    the router."""
    run, K = ld.red, ld.red.data.n_domains
    names = [n.split()[0] for n in run.data.domain_names]
    clean = _per_domain(run).rename(columns={"accuracy": "before"})
    tag = {"task": TASKS[ld.task], "seed": run.seed}

    def against_clean(df: pd.DataFrame, **cols) -> pd.DataFrame:
        out = df.merge(clean, on=["method", "domain"]).assign(**cols, **tag)
        return out.assign(change=out["accuracy"] - out["before"])

    with torch.no_grad():
        alphas = {"RED": run.router(run.features["test"]), "softmax MoE": run.gate(run.features["test"])}
    removed = pd.concat([against_clean(_per_domain(run, {m: perturbation.remove(a, i) for m, a in alphas.items()}),
                                       expert=names[i]) for i in range(K)])
    if not train:
        return {"removed": removed}
    other = replacement_seed + run.seed
    residuals, ep_residuals = retrain_residuals(ld.cfg, run, ld.encoder, store, seed=other)
    experts, ep_experts = retrain_experts(ld.cfg, run, ld.encoder, store, seed=other)
    replaced = pd.concat([against_clean(_per_domain(replace(run, residuals=_swap(run.residuals, residuals, i),
                                                            experts=_swap(run.experts, experts, i))), expert=names[i])
                          for i in range(K)])
    added, ep_added = added_later(ld, store)
    return {"removed": removed, "replaced": replaced, "added": added.assign(**tag),
            "epochs": pd.concat([epochs_frame(ld, "replacement", ep_residuals + ep_experts),
                                 epochs_frame(ld, "added later", ep_added)], ignore_index=True)}


def epochs_frame(ld: Loaded, study: str, epochs: list[dict]) -> pd.DataFrame:
    """The epochs of the stages a study trained itself (rate, patience, cap, stopped by patience), with its task,
    seed and name: the page's own record that they followed its source page's protocol."""
    return pd.DataFrame(epochs).assign(task=TASKS[ld.task], seed=ld.red.seed, study=study)


def _swap(old: list, new: list, i: int) -> list:
    return [new[j] if j == i else m for j, m in enumerate(old)]


def added_later(ld: Loaded, store: Store) -> tuple[pd.DataFrame, list[dict]]:
    """RED deployed with the first K-1 experts and a router over them; then the last expert trained alone and the
    router retrained on every domain, with the epochs of those stages. Raises if the backbone, head or earlier
    experts change on the way."""
    run, K = ld.red, ld.red.data.n_domains
    before = copy.deepcopy([ld.encoder.trainable(), run.head, *run.residuals[:K - 1]])
    early_router, ep_early = router_over(ld.cfg, run, ld.encoder, store, K - 1)
    early = replace(run, residuals=run.residuals[:K - 1], router=early_router)
    deployed = _per_domain(early, names=("RED",)).assign(system=f"first {K - 1} experts, router over them")
    last, ep_last = retrain_residuals(ld.cfg, run, ld.encoder, store)  # trained alone: the cache entry of stage 2
    full_router, ep_full = router_over(ld.cfg, run, ld.encoder, store, K)
    after = [ld.encoder.trainable(), run.head, *run.residuals[:K - 1]]
    if not all(state_equal(a, b) for a, b in zip(before, after)):
        raise AssertionError("adding an expert changed the backbone, the head or an earlier expert")
    later = replace(run, residuals=[*run.residuals[:K - 1], last[K - 1]], router=full_router)
    added = _per_domain(later, names=("RED",)).assign(system=f"expert {K} added later, router retrained")
    at_once = _per_domain(run, names=("RED",)).assign(system="all experts at once")
    same = state_equal(last[K - 1], run.residuals[K - 1]) and state_equal(full_router, run.router)
    return (pd.concat([deployed, added, at_once]).assign(identical_to_all_at_once=same)[
        ["system", "domain", "accuracy", "identical_to_all_at_once"]], ep_early + ep_last + ep_full)


def rank_ablation(ld: Loaded, store: Store, divisors: list[int]) -> dict[str, pd.DataFrame]:
    """RED's test accuracy with residuals of rank d / divisor (each trained alone as in stage 2; d/4 is the run's),
    and those residuals' epochs."""
    run, d, rows, trained = ld.red, ld.red.features["test"].shape[1], [], []
    for k in divisors:
        cfg = replace(ld.cfg, rank_divisor=k)
        residuals, epochs = retrain_residuals(cfg, run, ld.encoder, store)
        trained.append(epochs_frame(ld, f"rank d/{k}", epochs))
        acc = _accuracy(run, methods.predict(replace(run, residuals=residuals), names=["RED"]))["RED"]
        rows.append({"task": TASKS[ld.task], "seed": run.seed, "rank divisor": k, "rank": cfg.rank(d),
                     "residual parameters": sum(p.numel() for r in residuals for p in r.parameters()), "accuracy": acc,
                     "best epochs": float(np.mean([e["best epoch"] for e in epochs]))})
    return {"rank": pd.DataFrame(rows), "epochs": pd.concat(trained, ignore_index=True)}


def no_residual(ld: Loaded) -> pd.DataFrame:
    """RED, the no-residual ablation (RED's experts and router, softmax gating), the MoE baseline and (where the run
    trained its gate) the released code's MoE, test accuracy."""
    run = ld.red
    ablated = methods.residual_gating(run)
    y, h, dom = run.data.labels["test"].numpy(), run.features["test"], run.data.domains["test"]
    code_moe = [methods.CODE_MOE] if run.code_gate is not None else []
    acc = _accuracy(run, methods.predict(run, names=["RED", "softmax MoE", *code_moe]))
    acc[methods.NO_RESIDUAL] = accuracy(y, ablated(h, dom)[0].argmax(-1).cpu().numpy())
    return pd.DataFrame([{"task": TASKS[ld.task], "seed": run.seed, "method": m, "accuracy": a} for m, a in acc.items()])


def boundary(ld: Loaded) -> pd.DataFrame:
    """Accuracy on range-boundary sums (20/21, 40/41, 60/61, 80/81) of every method, one Task 1 seed."""
    ov = ranges.evaluate(ld.range_run)["overall"]
    return ov[["method", "accuracy", "boundary_accuracy", "seed"]]
