"""Arithmetic tasks whose experts own answer ranges R1-R5 (Task 1, Task 2): runs, scores, tables and value claims.

A task hands over sample frames (columns text, label = answer - 2, range 0-4); the distinct texts are the
pipeline's items and a backbone over them its encoder. Each run is one seed in one data `Setting`: a split
and a number format. Tables carry the setting's label in a `run` column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from ..core import measure
from ..core.claims import load_claims, pair_outcome, seed_list, seeds_words, small
from ..core.metrics import confusion
from ..core.runtime import resolve_device
from ..core.store import Store
from ..core.settings import StageSettings, progress_enabled
from ..models.backbone import Backbone
from ..red import methods
from ..red.encoders import TextEncoder
from ..configs.ranges import RangeTaskConfig, Setting
from ..configs.red import RedConfig, protocol_words
from ..red.pipeline import RedRun, TaskData, run_red, small_jobs
from ..red.schedule import prefetch_runs
from ..red.stages import Stages
from ..tasks.arithmetic import BOUNDARY_SUMS, MIN_SUM, N_CLASSES, RANGE_NAMES

# the paper's name of each method in the claims file (t1.<key>.acc, t2.<key>.per_range ...)
PAPER_KEYS = {"global head": "global", "uniform averaging": "uniform", "softmax MoE": "moe", "RED": "red"}
ORDER = ["RED", "softmax MoE", "global head", "uniform averaging"]
NOT_DEPLOYABLE = ("oracle experts", "RED (true range)")  # both route by the true range
# the glue key of each method's mean accuracy in a page's prose (t1_red, t2_moe ...)
METHOD_KEYS = {"red": "RED", "moe": "softmax MoE", "global": "global head", "uniform": "uniform averaging",
               "oracle": "oracle experts", "red_true": "RED (true range)", "red_code": "RED code variant",
               "red_stage4": "RED stage 4", "moe_shared": "softmax MoE (RED's router)",
               "global_all": "global head (all of train)", "moe_code": methods.CODE_MOE}
# the variant methods (trained on the first `variant_seeds` seeds only): their glue keys, and their names in words
VARIANTS = {"red_code": "the code's logit form of RED", "red_stage4": "RED tuned jointly (stage 4)",
            "global_all": "the global head on all of train", "moe_code": "the released code's MoE (a gate over its "
                                                                          "logit experts)"}
NEAR = 2  # an error within this many of the true answer is a near miss


Domain = tuple[str, list[str], str]  # the frames' domain column, the domains' names, what tables call a domain
# a range page's data: (config, seed, setting) -> its sample frames per split and what determined them (part of every
# cache key); each page module has one (`task1_addition.frames`, ...) and hands it to what runs the page
Frames = Callable[[Any, int, Setting], tuple[dict[str, pd.DataFrame], dict]]
RANGES: Domain = ("range", list(RANGE_NAMES), "range")


def seen_share(cfg: RangeTaskConfig, frames: Frames, setting: Setting) -> float:
    """The share of test inputs (first seed) whose text train also holds: what the test re-asks (`frames`: the
    page's)."""
    parts = frames(cfg, cfg.seed, setting)[0]
    return float(parts["test"]["text"].isin(set(parts["train"]["text"])).mean())


_BACKBONES: dict[tuple, Backbone] = {}  # the last one made: a page and its run share it (a large model loads once)


def backbone(cfg: RangeTaskConfig) -> Backbone:
    """The page's backbone (the embedded one or a local folder) on the page's device, its top `k_trainable` blocks
    trainable; made once per process for the same folder, depth and device (every stage 1 resets its blocks)."""
    which = (cfg.backbone, cfg.k_trainable, str(resolve_device(cfg.device)))
    if which not in _BACKBONES:
        _BACKBONES.clear()
        _BACKBONES[which] = Backbone(cfg.backbone, cfg.k_trainable, device=resolve_device(cfg.device))
    return _BACKBONES[which]


def profile_words(cfg: RangeTaskConfig) -> str:
    """The page's opening line: profile, backbone, which seeds run where, the data (`cfg.data_words()`) and how
    the stages trained."""
    bb = backbone(cfg)
    return (f"Profile **{cfg.profile}**: backbone `{cfg.backbone}` ({type(bb.full).__name__}, {bb.n_blocks} blocks, "
            f"d = {bb.dim}, top {bb.k} trained), {cfg.runs_label()}, {cfg.data_words()}, dataset `{cfg.dataset_size}`, "
            f"{protocol_words(cfg)}.")


def paired_gap(acc: pd.DataFrame, a: str = "RED", b: str = "softmax MoE") -> str:
    """a − b over seeds (rows of `acc`), paired by seed: 'mean ± sd over N seeds', as the ledger's rule reads it."""
    outcome, gap, sd = pair_outcome(acc[a].tolist(), acc[b].tolist())
    if len(acc) < 2:
        return f"{small(gap, sign=True)} on one seed, which has no spread for the ledger's rule to judge it by"
    spread = f" ± {small(sd)}"
    rule = {"above": f"{a} ahead", "below": f"{b} ahead", "tie": "a tie"}[outcome]
    return f"{small(gap, sign=True)}{spread} over {seeds_words(len(acc))}, {rule} by the ledger's rule"


def method_glue(prefix: str, acc: pd.Series) -> dict[str, float]:
    """The mean accuracy of each method scored on every seed (`acc`: method -> mean), glued as `<prefix>_<key>`; the
    variant methods go into `variant_words` instead."""
    return {f"{prefix}_{key}": acc[m] for key, m in METHOD_KEYS.items() if m in acc and key not in VARIANTS}


def variant_words(cfg: RangeTaskConfig, overall: pd.DataFrame) -> str:
    """The variant methods' test accuracy in one setting (`overall`: its rows), on the seeds they trained on, in
    words."""
    seeds = [s for s in cfg.seeds if cfg.variants_on(s)]
    if not seeds:
        return "not run (`-p variant_seeds 1` trains them on the first seed)"
    acc = overall[overall["seed"].isin(seeds)].groupby("method")["accuracy"].mean()
    shown = ", ".join(f"{words} {acc[METHOD_KEYS[key]]:.3f}" for key, words in VARIANTS.items()
                      if METHOD_KEYS[key] in acc)
    where = "on every seed" if len(seeds) == len(cfg.seeds) else f"on {seed_list(seeds)} only"
    return f"{shown} ({where}; labelled extensions no verdict reads, `-p variant_seeds N` sets on how many seeds)"


def every_run(cfg: RangeTaskConfig, title: str) -> Iterator[tuple[Setting, int]]:
    """The (setting, seed) pairs a seed x setting page runs, the claims' setting first, with a progress bar each."""
    for st in cfg.settings:
        for seed in tqdm(cfg.seeds_for(st), desc=f"{title} ({st.label})", disable=not progress_enabled()):
            yield st, seed


def stack(tables: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """One table per name from the runs' tables (each run's table carries its seed and setting as columns)."""
    return {name: pd.concat([tb[name] for tb in tables]) for name in tables[0]}


def seeds_by_method(t: dict[str, pd.DataFrame], setting: Setting) -> pd.DataFrame:
    """Test accuracy of one setting as a seeds x methods table (for paired comparisons)."""
    ov = t["overall"]
    return ov[ov["run"] == setting.label].pivot_table(index="seed", columns="method", values="accuracy")


def task_data(namespace: str, frames: dict[str, pd.DataFrame], key: dict, domain: Domain = RANGES) -> tuple[TaskData, list[str]]:
    """The pipeline's view of sample frames (text, label and the domain column per split) and the distinct texts."""
    column, names, kind = domain
    texts = sorted(set().union(*(set(df["text"]) for df in frames.values())))
    index = {t: i for i, t in enumerate(texts)}
    col = lambda name: {k: torch.tensor(df[name].to_numpy()) for k, df in frames.items()}  # noqa: E731
    ids = {k: torch.tensor(df["text"].map(index).to_numpy()) for k, df in frames.items()}
    data = TaskData(namespace, ids, col("label"), col(column), [str(s) for s in range(MIN_SUM, MIN_SUM + N_CLASSES)],
                    names, key, domain_kind=kind)
    return data, texts


@dataclass
class RangeRun:
    """One seed and setting: the pipeline's run record and the sample frames it was trained on."""

    setting: Setting
    red: RedRun
    frames: dict[str, pd.DataFrame]
    encoder: TextEncoder | None = None  # what stage 1 trained (for a stage retrained later)

    def tag(self, df: pd.DataFrame) -> pd.DataFrame:
        """The table with this run's seed and setting as columns (`run` is the setting's label)."""
        s = self.setting
        return df.assign(seed=self.red.seed, run=s.label, split=s.split, number_format=s.number_format)


def run_on(cfg: RedConfig, namespace: str, seed: int, setting: Setting, frames: dict[str, pd.DataFrame], key: dict,
           bb: Backbone, store: Store, domain: Domain = RANGES, settings: StageSettings | None = None,
           variants: bool | None = None) -> RangeRun:
    """Every pipeline stage on these frames for one seed and setting (cached stages load), under `settings`
    (`run_red`), the variant methods' where `variants` (None: where the config trains them)."""
    data, texts = task_data(namespace, frames, key, domain)
    encoder = TextEncoder(bb, texts, store, namespace)
    return RangeRun(setting, run_red(cfg, data, encoder, store, seed, settings, variants), frames, encoder)


def prefetch(cfg: RedConfig, runs: list[tuple[int, dict[str, pd.DataFrame], dict]], bb: Backbone, store: Store,
             domain: Domain = RANGES) -> None:
    """The small stages of several runs (each: seed, frames, what determined them) trained side by side in one pool
    before the runs load them (`schedule.prefetch_runs`), each run's stage 1 and features loaded (or trained) here
    first, one run after another. What this computes is recorded in `store` as a worker's work would be (the runs'
    own loads count each stage once); nothing changes a number."""
    ahead, plans = Store(store.root), []
    for seed, frames, key in runs:
        data, texts = task_data(cfg.KEY, frames, key, domain)
        st = Stages(cfg, data, TextEncoder(bb, texts, ahead, cfg.KEY), ahead, seed)
        st.base()
        st.features()
        st.feats = {}  # the workers load them from the cache
        plans.append((st, *small_jobs(cfg, data.n_domains, cfg.variants_on(seed))))
    store.merge([e for e in ahead.events if e["event"] != "loaded"], ahead.seconds)
    prefetch_runs(plans, store, f"small stages of {len(plans)} runs")


def run(cfg: RangeTaskConfig, frames: Frames, seed: int, setting: Setting, bb: Backbone, store: Store) -> RangeRun:
    """A range task's every stage for one seed and setting on the page's `frames` (cached stages load)."""
    return run_on(cfg, cfg.KEY, seed, setting, *frames(cfg, seed, setting), bb, store)


def evaluate(r: RangeRun, subsets: dict[str, np.ndarray] | None = None) -> dict[str, pd.DataFrame]:
    """Test scores of every method (overall, boundary answers, near misses, `subsets`, per range), the router's own
    accuracy, and each stage's seconds and epochs."""
    answers = r.frames["test"]["label"].to_numpy() + MIN_SUM
    masks = {"boundary": np.isin(answers, BOUNDARY_SUMS), **(subsets or {})}
    preds = methods.predict(r.red)
    overall, per_range = methods.score(r.red, "test", subsets=masks, preds=preds)
    near = {}
    for name, (pred, _) in preds.items():
        off = np.abs(pred + MIN_SUM - answers)[pred + MIN_SUM != answers]
        near[name] = float(np.mean(off <= NEAR)) if len(off) else np.nan
    overall[f"errors within ±{NEAR}"] = overall["method"].map(near)
    return {"overall": r.tag(overall), "per_range": r.tag(per_range),
            "router_accuracy": r.tag(methods.router_accuracy(r.red)),
            "stage_seconds": r.tag(pd.DataFrame([r.red.seconds])), "epochs": r.tag(pd.DataFrame(r.red.epochs))}


def routed_answers(r: RangeRun, bb: Backbone, texts: list[str], names: list[str]) -> tuple[dict[str, np.ndarray], Any]:
    """Answers of the named methods on new texts, and RED's routing weights (Q, 5) (call right after `run`)."""
    with torch.no_grad():
        h = bb(bb.tokenize(texts)).to(r.red.head.weight.device)  # (Q, d)
    built = methods.methods(r.red, names)
    _, alpha = methods.methods(r.red, ["RED"])["RED"](h)
    return {name: (m(h)[0].argmax(-1) + MIN_SUM).cpu().numpy() for name, m in built.items()}, alpha


def measured(prefix: str, t: dict[str, pd.DataFrame], st: Setting, common: dict) -> tuple[dict[str, dict], dict]:
    """The per-method claims `<prefix>.<method>.acc|f1|per_range` and `<prefix>.order` in one setting, and the
    setting's tables (overall, per-range accuracy by (seed, method, range), accuracy seeds x methods)."""
    paper = load_claims()
    ov = t["overall"][t["overall"]["run"] == st.label]
    pr = t["per_range"][t["per_range"]["run"] == st.label].set_index(["seed", "method", "range"])["accuracy"]
    acc = ov.pivot_table(index="seed", columns="method", values="accuracy")  # seeds x methods
    seeds = list(acc.index)
    ranges = lambda m: [pr.xs((s, m), level=("seed", "method")).tolist() for s in seeds]  # noqa: E731
    common = {"run": st.label, "split": st.split, "number_format": st.number_format, **common}
    out: dict[str, dict] = {}
    for m, k in PAPER_KEYS.items():
        for metric, suffix in (("accuracy", "acc"), ("macro_f1", "f1")):
            if f"{prefix}.{k}.{suffix}" in paper:
                out[f"{prefix}.{k}.{suffix}"] = measure.value(ov[ov["method"] == m].set_index("seed")[metric].loc[seeds],
                                                              **common)
        out[f"{prefix}.{k}.per_range"] = measure.per_range(ranges(m), **common)
    out[f"{prefix}.order"] = {**measure.ordering(acc, ORDER), **common}
    return out, {"overall": ov, "acc": acc, "ranges": ranges, "common": common}


def with_extensions(main: dict[str, dict], others: dict[Setting, dict[str, dict]]) -> dict[str, dict]:
    """The claims' setting's measurements, with each other setting's measurement of a claim as a labelled extension."""
    for st, entries in others.items():
        for cid, entry in entries.items():
            if entry.get("run") == st.label:  # claims that depend on the data setting
                main[cid].setdefault("extensions", {})[st.description] = entry
    return main


def on_every_seed(overall: pd.DataFrame, names: list[str]) -> list[str]:
    """Those of `names` scored on every seed of `overall` (one setting's rows): not the variant methods, where they
    trained on fewer seeds (a labelled extension no claim reads)."""
    seeds = overall.groupby("method")["seed"].nunique()
    return [m for m in names if seeds.get(m, 0) == overall["seed"].nunique()]


def confusions(r: RangeRun, overall: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Confusion matrices (true vs predicted answer) of the best and the worst deployable method on one run's test
    part, among the methods scored on every seed."""
    preds = methods.predict(r.red)
    here = overall[overall["run"] == r.setting.label]
    every = on_every_seed(here, list(here["method"].unique()))
    mine = (overall["run"] == r.setting.label) & ~overall["method"].isin(NOT_DEPLOYABLE) & overall["method"].isin(every)
    acc = overall[mine].groupby("method")["accuracy"].mean()
    acc = acc[[m for m in overall["method"].unique() if m in acc.index]]
    y_true, answers = r.frames["test"]["label"].to_numpy() + MIN_SUM, list(range(MIN_SUM, MIN_SUM + N_CLASSES))
    return {f"{m} (accuracy {acc[m]:.3f})": confusion(y_true, preds[m][0] + MIN_SUM, labels=answers)
            for m in (acc.idxmax(), acc.idxmin())}
