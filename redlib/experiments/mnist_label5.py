"""The MNIST five-domain benchmark (the research code's `label5`) on the RED pipeline.

Items are digit images; the encoder is the research code's small CNN (`models/cnn.py`), trained with the
global head in stage 1 on 10% of train balanced by label; the domains are the label pairs {0,1} ... {8,9}.
Every method is a registered one (`red/methods.py`); this module adds the data, the released code's forms
of the baselines, its tables and the `mn.*` claims. Its knobs: `configs/mnist_label5.py`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from ..configs.mnist_label5 import FORMS, MnistConfig
from ..configs.red import protocol_words
from ..core import measure
from ..core.claims import VALUE_TOL, load_claims, ranking, seeds_words, verdict_keys
from ..core.metrics import confusion, confusion_table
from ..core.runtime import resolve_device
from ..core.store import Store
from ..core.settings import progress_enabled
from ..red import methods
from ..red.encoders import ImageEncoder
from ..red.pipeline import RedRun, TaskData, run_red
from ..red.stages import Stages
from ..tasks.mnist import DOMAIN_NAMES, N_CLASSES, Arrays, domain_of, splits, to_tensor
from . import range_tables
from .range_tables import capped_stages, far_cause_words, far_seeds_words, stage1_seeds
from .ranges import METHOD_KEYS, ORDER, stack

# each claim's method under the paper's forms and under the released code's (the code's uniform: its logit
# experts with equal weights)
CODE_UNIFORM = "uniform (code experts)"
JUDGED = {"paper": {"base": "global head", "uniform": "uniform averaging", "moe": "softmax MoE", "red": "RED"},
          "code": {"base": "global head", "uniform": CODE_UNIFORM, "moe": methods.CODE_MOE,
                   "red": "RED code variant"}}
FORM_LABELS = {"paper": "the paper's forms (hidden-space RED, classifier experts)",
               "code": "the released code's forms (logit experts trained as residuals)"}


def load(cfg: MnistConfig, seed: int) -> dict[str, Arrays]:
    """Train, val and test (images, labels) of the configured source, split as training seed `seed` splits them."""
    return splits(cfg.data_dir, cfg.split_for(seed))


def profile_words(cfg: MnistConfig) -> str:
    """The page's opening line: profile, data, splits, seeds, how the stages trained and the judged forms."""
    split = "each seed its own split" if cfg.split_seed is None else f"split seed {cfg.split_seed} for every seed"
    return (f"Profile **{cfg.profile}**: {cfg.data_label}, {split}, seeds {cfg.seeds}, {protocol_words(cfg)}; claims "
            f"judged with the {cfg.judged_forms} forms.")


def data_table(data: dict[str, Arrays]) -> pd.DataFrame:
    """Images per split and per domain."""
    return pd.DataFrame([{"part": part, "images": len(y), **{d: int((domain_of(y) == i).sum())
                                                             for i, d in enumerate(DOMAIN_NAMES)}}
                         for part, (_, y) in data.items()])


def task(cfg: MnistConfig, data: dict[str, Arrays], seed: int) -> tuple[TaskData, ImageEncoder]:
    """The pipeline's view of the digits (images as items, label pairs as domains) and the CNN encoder over them."""
    images = np.concatenate([x for x, _ in data.values()])
    starts = np.cumsum([0] + [len(y) for _, y in data.values()])
    ids = {part: torch.arange(s, s + len(y)) for (part, (_, y)), s in zip(data.items(), starts)}
    labels = {part: torch.from_numpy(y) for part, (_, y) in data.items()}
    td = TaskData(cfg.KEY, ids, labels, {k: domain_of(v) for k, v in labels.items()},
                  [str(c) for c in range(N_CLASSES)], DOMAIN_NAMES,
                  {"source": cfg.data_dir or "embedded", "split_seed": cfg.split_for(seed)}, domain_kind="domain")
    return td, ImageEncoder(to_tensor(images), resolve_device(cfg.device))


def run_seed(cfg: MnistConfig, seed: int, data: dict[str, Arrays], store: Store) -> RedRun:
    """Every stage for one seed (cached stages load): the images as items, the CNN as the encoder."""
    return run_red(cfg, *task(cfg, data, seed), store, seed)


def run(cfg: MnistConfig, store: Store) -> dict[str, pd.DataFrame]:
    """Every seed's run scored, its tables stacked (each row tagged with its seed): the first seed's data per split
    and domain (`data`), the first run's confusion matrices, and each seed's stage 1 on every split where the config
    asks for it (`stage1_by_split`)."""
    tables, first = [], None
    data = load(cfg, cfg.seed)
    for s in tqdm(cfg.seeds, desc="MNIST", disable=not progress_enabled()):
        r = run_seed(cfg, s, data if s == cfg.seed else load(cfg, s), store)
        tables.append(evaluate(r))
        first = first or r
    t = {"data": data_table(data), **stack(tables), "confusions": confusion_table(confusions(first))}
    if cfg.crossed_splits:  # every seed's stage 1 on every seed's split: a diagnostic, only when asked
        t["stage1_by_split"] = stage1_by_split(cfg, store)
    return t


def stage1_by_split(cfg: MnistConfig, store: Store) -> pd.DataFrame:
    """Stage 1 for every training seed on every seed's split (the protocol's runs, the diagonal,
    load): a seed far from the others is told apart from a harder split. One row per (training seed, split)."""
    rows, parts = [], {p: replace(cfg, split_seed=p) for p in dict.fromkeys(cfg.split_for(s) for s in cfg.seeds)}
    data = {p: load(fixed, p) for p, fixed in parts.items()}
    for p, s in tqdm([(p, s) for p in parts for s in cfg.seeds], desc="stage 1 per split",
                     disable=not progress_enabled()):
        st = Stages(parts[p], *task(parts[p], data[p], s), store, s)
        st.base()
        e = st.epochs[-1]
        rows.append({"training seed": s, "split": p, "val loss": e["val loss"], "epochs run": e["epochs run"],
                     "best epoch": e["best epoch"]})
    return pd.DataFrame(rows)


def evaluate(r: RedRun) -> dict[str, pd.DataFrame]:
    """Test scores of every method (and the code experts with equal weights), router accuracy, RED's mean routing
    weights per digit, epochs and seconds."""
    preds = methods.predict(r)
    K = r.data.n_domains
    equal = methods.predict(r, alpha={"RED code variant": lambda a: torch.full_like(a, 1 / K)},
                            names=["RED code variant"])["RED code variant"]
    preds = {**preds, CODE_UNIFORM: equal}
    overall, per_domain = methods.score(r, "test", preds=preds)
    y = r.data.labels["test"].numpy()
    alpha = pd.DataFrame(preds["RED"][1], columns=DOMAIN_NAMES).assign(digit=y).groupby("digit").mean()
    tag = {"seed": r.seed}
    return {"overall": overall, "per_domain": per_domain, "router_accuracy": methods.router_accuracy(r),
            "routing": alpha.reset_index().assign(**tag),
            "epochs": pd.DataFrame(r.epochs).assign(**tag), "stage_seconds": pd.DataFrame([r.seconds]).assign(**tag)}


def confusions(r: RedRun, names: tuple[str, ...] = ("RED", methods.CODE_MOE)) -> dict[str, pd.DataFrame]:
    """Confusion matrices (true vs predicted digit) of the named methods on one run's test split."""
    y, preds = r.data.labels["test"].numpy(), methods.predict(r, names=list(names))
    digits = list(range(N_CLASSES))
    return {f"{n} (accuracy {np.mean(preds[n][0] == y):.3f})": confusion(y, preds[n][0], labels=digits) for n in names}


def summary(overall: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds of accuracy and macro-F1 per method, beside the research code's numbers."""
    paper = load_claims()
    out = overall.groupby("method", sort=False)[["accuracy", "macro_f1"]].agg(["mean", "std"])
    out.columns = [f"{m} {s}" for m, s in out.columns]
    names = {m: k for form in FORMS for k, m in JUDGED[form].items()}
    out["research code accuracy"] = [paper[f"mn.{names[m]}.acc"]["paper"] if m in names else None for m in out.index]
    return out


def per_domain_table(per_domain: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per method (rows) and domain (columns), mean over seeds, with the research code's rows."""
    paper = load_claims()
    ours = per_domain.pivot_table(index="method", columns="domain", values="accuracy", sort=False)
    theirs = pd.DataFrame({f"research code: {m}": paper[f"mn.{k}.per_domain"]["paper"] for k, m in
                           (("red", "RED"), ("moe", methods.CODE_MOE))}, index=ours.columns).T
    return pd.concat([ours, theirs])


def claims(cfg: MnistConfig, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """Every mn.* claim measured with the judged forms; the other forms beside it as an extension."""
    t = tables
    other = next(f for f in FORMS if f != cfg.judged_forms)
    out = _measured(cfg, t, cfg.judged_forms)
    for cid, entry in _measured(cfg, t, other).items():
        if entry["method"] != out[cid]["method"]:
            out[cid]["extensions"] = {FORM_LABELS[other]: entry}
    return out


def _measured(cfg: MnistConfig, t: dict[str, pd.DataFrame], form: str) -> dict[str, dict]:
    ov, pd_ = t["overall"], t["per_domain"]
    out = {}
    for key, m in JUDGED[form].items():
        common = {"method": m, "forms": form, "data": cfg.data_label}
        out[f"mn.{key}.acc"] = measure.value(ov[ov["method"] == m].sort_values("seed")["accuracy"], **common)
        if key in ("red", "moe"):
            sel = pd_[pd_["method"] == m]
            rows = [sel[sel["seed"] == s].set_index("domain")["accuracy"].loc[DOMAIN_NAMES].tolist()
                    for s in sorted(sel["seed"].unique())]
            out[f"mn.{key}.per_domain"] = measure.per_range(rows, **common)
    return out


def found(cfg: MnistConfig, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `mn_*`)."""
    t, v = tables, verdicts
    paper, ov = load_claims(), t["overall"]
    n_train = int(t["data"].set_index("part").loc["train", "images"])
    acc = ov.groupby("method")["accuracy"].agg(["mean", "std"])
    words = lambda m: f"{acc.loc[m, 'mean']:.3f}" + ("" if pd.isna(acc.loc[m, "std"]) else f" ± {acc.loc[m, 'std']:.3f}")  # noqa: E731
    rt = t["router_accuracy"]
    routing = t["routing"].groupby("digit").mean().drop(columns="seed")
    return {
        "mn_data": cfg.data_label, "mn_n_seeds": seeds_words(len(cfg.seeds)), "mn_n_train": n_train,
        "mn_ties": range_tables.ties_words(ov),
        "mn_split": "one test split for every seed" if cfg.split_seed is not None else "each seed its own test split",
        **{f"mn_{k}": words(m) for k, m in {**METHOD_KEYS, "uniform_code": CODE_UNIFORM}.items() if m in acc.index},
        **{f"mn_paper_{k}": paper[f"mn.{k}.acc"]["paper"] for k in ("red", "moe", "uniform", "base")},
        "mn_ranking": ranking(ov.pivot_table(index="seed", columns="method", values="accuracy"), ORDER),
        "mn_router": rt[rt["split_part"] == "test"]["router_accuracy"].mean(),
        "mn_own_weight": np.mean([routing.loc[d, DOMAIN_NAMES[domain_of(d)]] for d in routing.index]),
        "mn_judged": f"{FORM_LABELS[cfg.judged_forms]} (" + ", ".join(
            f"{k}: {m}" for k, m in JUDGED[cfg.judged_forms].items()) + ")",
        "mn_capped": capped_stages(t["epochs"], by=("stage",)), "mn_max_epochs": cfg.max_epochs,
        "mn_patience": cfg.patience, "mn_value_tol": VALUE_TOL,
        "mn_verdicts": ", ".join(f"{c} {verdict}" for c, verdict in v.items()), **verdict_keys(cfg.KEY, v),
        "mn_stage1_far": far_seeds_words(stage1_seeds(t["epochs"])),
        "mn_stage1_cause": (far_cause_words(t["stage1_by_split"]) if "stage1_by_split" in t
                            else "not run (pass -p extensions crossed_splits to run it)"),
    }
