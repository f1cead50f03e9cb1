"""Arithmetic Task 1 (addition) on the RED pipeline: its data, its config, its tables and its claims.

The task hands the pipeline the distinct questions as items (a backbone over them is the encoder) and,
per split, each sample's question id, answer class (sum - 2) and range R1-R5 as its domain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from ..core import measure
from ..core.claims import VALUE_TOL, load_claims
from ..core.config import ParameterError
from ..core.metrics import confusion
from ..core.store import Store
from ..models.backbone import Backbone, BackboneError, block_count, resolve_backbone
from ..red import methods
from ..red.cost import parameter_cost
from ..red.encoders import TextEncoder
from ..red.pipeline import RedConfig, RedRun, TaskData, run_red
from ..tasks.arithmetic import BOUNDARY_SUMS, MAX_SUM, N_CLASSES, RANGE_NAMES, TEMPLATES, Task1Spec, make_task1

NAMESPACE = "task1"
# The paper's case study (section 4.11, from ../shared/paper/results_4.6-4.12_digest.md): each query with the
# routing weights over R1-R5 and the answer the paper reports for its RED model (the paper's numbers, not ours).
PAPER_CASES = {
    "What is 47 plus 38?": ([0.02, 0.04, 0.14, 0.28, 0.52], 85),
    "What is 32 plus 19?": ([0.03, 0.06, 0.67, 0.16, 0.08], 51),
    "What is 18 plus 7 minus 3?": ([0.10, 0.62, 0.18, 0.06, 0.04], 22),  # a Task 2 expression; experts saw addition
    "What is 40 plus 1?": ([0.05, 0.32, 0.46, 0.12, 0.05], 41),  # the R2/R3 boundary
}
QUERIES = list(PAPER_CASES)
COST_QUESTION = TEMPLATES[0].format(a=47, b=38)  # the question router compute is counted on: two two-digit operands
# the paper's name of each method in the claims file (t1.<key>.acc ...)
PAPER_KEYS = {"global head": "global", "uniform averaging": "uniform", "softmax MoE": "moe", "RED": "red"}
ORDER = ["RED", "softmax MoE", "global head", "uniform averaging"]


@dataclass
class Task1Config(RedConfig):
    """Arithmetic Task 1 (addition): backbone stage, range experts, routers, RED and the four baselines."""

    backbone: str = "embedded"
    k_trainable: int = 2
    split: str = "iid"
    splits_reported: str | None = None
    dataset_size: str | None = None
    operand_min: int = 1
    operand_max: int = 50
    n_templates: int = 1

    NOTEBOOK: ClassVar[str] = "task1_addition"
    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "final": (64_000, 8_000, 8_000), "first": (20_000, 2_500, 2_500), "tiny": (2_000, 250, 250)}
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {
        "split": ("pairs", "iid"), "splits_reported": ("pairs", "iid", "pairs,iid"), "dataset_size": tuple(SIZES)}
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"n_seeds": 1, "dataset_size": "tiny", "max_epochs": 3, "backbone_epochs": 2, "splits_reported": "pairs,iid"},
        "full": {"n_seeds": 3, "dataset_size": "final", "max_epochs": 60, "backbone_epochs": 10, "splits_reported": "pairs,iid"},
    }

    def check(self) -> None:
        super().check()
        self.require_positive("n_templates")
        if self.k_trainable < 0:
            raise ParameterError(f"parameter 'k_trainable' must be >= 0, got {self.k_trainable}")
        if not 1 <= self.operand_min <= self.operand_max or 2 * self.operand_max > MAX_SUM:
            raise ParameterError(f"operands must satisfy 1 <= operand_min <= operand_max <= {MAX_SUM // 2} (sums up to "
                                 f"{MAX_SUM}), got [{self.operand_min}, {self.operand_max}]")
        if self.n_templates > len(TEMPLATES):
            raise ParameterError(f"parameter 'n_templates' must be in [1, {len(TEMPLATES)}], got {self.n_templates}")

    def preflight(self) -> None:
        """The backbone folder holds a model with at least k_trainable blocks; the device exists."""
        super().preflight()
        try:
            blocks = block_count(resolve_backbone(self.backbone))
        except BackboneError as err:
            raise ParameterError(str(err)) from None
        if blocks is not None and self.k_trainable > blocks:
            raise ParameterError(f"parameter 'k_trainable' must be in [0, {blocks}] for backbone {self.backbone!r} "
                                 f"({blocks} blocks), got {self.k_trainable}")

    @property
    def split_list(self) -> list[str]:
        """The splits this run measures, the main `split` first."""
        return [self.split] + [s for s in str(self.splits_reported).split(",") if s != self.split]


def spec_for(cfg: Task1Config, seed: int, split: str) -> Task1Spec:
    """The dataset a (config, seed, split) uses."""
    n_train, n_val, n_test = cfg.SIZES[cfg.dataset_size]
    return Task1Spec(cfg.operand_min, cfg.operand_max, cfg.n_templates, n_train, n_val, n_test, split, seed)


def task_data(spec: Task1Spec) -> tuple[TaskData, list[str], dict[str, pd.DataFrame]]:
    """The pipeline's view of a Task 1 dataset, the distinct questions (items), and the sample tables."""
    frames = make_task1(spec)
    texts = sorted(set().union(*(set(df["text"]) for df in frames.values())))
    index = {t: i for i, t in enumerate(texts)}
    col = lambda name: {k: torch.tensor(df[name].to_numpy()) for k, df in frames.items()}  # noqa: E731
    ids = {k: torch.tensor(df["text"].map(index).to_numpy()) for k, df in frames.items()}
    data = TaskData(NAMESPACE, ids, col("label"), col("range"), [str(s) for s in range(2, 2 + N_CLASSES)],
                    list(RANGE_NAMES), {"spec": asdict(spec)}, domain_kind="range")
    return data, texts, frames


@dataclass
class Task1Run:
    """One seed and split: the pipeline's run record and the sample tables it was trained on."""

    split: str
    red: RedRun
    frames: dict[str, pd.DataFrame]


def run(cfg: Task1Config, seed: int, split: str, bb: Backbone, store: Store) -> Task1Run:
    """Every stage for one seed and split (cached stages load): Task 1's data plus one pipeline call."""
    data, texts, frames = task_data(spec_for(cfg, seed, split))
    return Task1Run(split, run_red(cfg, data, TextEncoder(bb, texts, store, NAMESPACE), store, seed), frames)


def evaluate(r: Task1Run) -> dict[str, pd.DataFrame]:
    """Test scores of every method (overall, boundary sums, per range) and the router's own accuracy."""
    boundary = np.isin(r.frames["test"]["sum"].to_numpy(), BOUNDARY_SUMS)
    overall, per_range = methods.score(r.red, "test", subsets={"boundary": boundary})
    return {"overall": overall.assign(split=r.split), "per_range": per_range.assign(split=r.split),
            "router_accuracy": methods.router_accuracy(r.red).assign(split=r.split),
            "stage_seconds": pd.DataFrame([r.red.seconds]).assign(seed=r.red.seed, split=r.split),
            "epochs": pd.DataFrame(r.red.epochs).assign(seed=r.red.seed, split=r.split)}


def case_study(r: Task1Run, bb: Backbone, queries: list[str] = QUERIES) -> pd.DataFrame:
    """RED's router weights and the routed methods' answers for a few questions, beside the paper's (after `run`)."""
    with torch.no_grad():
        h = bb(bb.tokenize(queries)).to(r.red.head.weight.device)  # (Q, d)
    built = methods.methods(r.red, ["global head", "softmax MoE", "RED"])
    _, alpha = built["RED"](h)
    answers = {name: m(h)[0].argmax(-1) + 2 for name, m in built.items()}
    names = [r.split()[0] for r in RANGE_NAMES]
    rows = [{"query": q, **{f"alpha {n}": float(alpha[j, i]) for i, n in enumerate(names)},
             **{f"{name} answer": int(a[j]) for name, a in answers.items()},
             **({f"paper alpha {n}": v for n, v in zip(names, PAPER_CASES[q][0])} | {"paper answer": PAPER_CASES[q][1]}
                if q in PAPER_CASES else {})} for j, q in enumerate(queries)]
    return pd.DataFrame(rows).assign(seed=r.red.seed, split=r.split)


def data_table(cfg: Task1Config) -> pd.DataFrame:
    """Sizes, distinct questions, train/test overlap and samples per range of each split, first seed."""
    rows = []
    for sp in cfg.split_list:
        frames = make_task1(spec_for(cfg, cfg.seed, sp))
        train_q = set(frames["train"]["text"])
        for part, df in frames.items():
            rows.append({"split": sp, "part": part, "samples": len(df), "distinct questions": df["text"].nunique(),
                         "test samples whose question is in train":
                             int(df["text"].isin(train_q).sum()) if part == "test" else "-",
                         **{r.split()[0]: int((df["range"] == i).sum()) for i, r in enumerate(RANGE_NAMES)}})
    return pd.DataFrame(rows)


def cost(bb: Backbone, cfg: Task1Config) -> pd.DataFrame:
    """Parameter and compute shares of RED on this backbone and on Qwen3-0.6B's shape."""
    tokens = int(bb.tokenize([COST_QUESTION]).attention_mask.sum())
    return parameter_cost(bb, cfg, len(RANGE_NAMES), N_CLASSES, tokens)


SPLIT_LABELS = {"iid": "iid split (the paper's protocol)", "pairs": "pairs split (unseen operand pairs)"}
NOT_DEPLOYABLE = ("oracle experts", "RED (true range)")  # both route by the true range
SHARED_MOE = "softmax MoE (RED's router)"
E_FAMILY = ("uniform averaging", "softmax MoE", SHARED_MOE)  # mixtures of the same experts E_i


def claims(cfg: Task1Config, t: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """The measurement behind every Task 1 claim on the main split; each other split measured beside it as an extension."""
    out = _measured(cfg, t, cfg.split)
    for sp in cfg.split_list[1:]:
        for cid, entry in _measured(cfg, t, sp).items():
            if entry.get("split") == sp:  # claims that depend on the split
                out[cid].setdefault("extensions", {})[SPLIT_LABELS[sp]] = entry
    return out


def _measured(cfg: Task1Config, t: dict[str, pd.DataFrame], sp: str) -> dict[str, dict]:
    ov = t["overall"][t["overall"]["split"] == sp]
    pr = t["per_range"][t["per_range"]["split"] == sp].set_index(["seed", "method", "range"])["accuracy"]
    acc = ov.pivot_table(index="seed", columns="method", values="accuracy")  # seeds x methods
    deployable = [m for m in ov["method"].unique() if m not in NOT_DEPLOYABLE]
    seeds = list(acc.index)
    ranges = lambda m: [pr.xs((s, m), level=("seed", "method")).tolist() for s in seeds]  # noqa: E731
    common = {"split": sp, "backbone": cfg.backbone}
    out: dict[str, dict] = {}
    for m, k in PAPER_KEYS.items():
        for metric, suffix in (("accuracy", "acc"), ("macro_f1", "f1")):
            out[f"t1.{k}.{suffix}"] = measure.value(ov[ov["method"] == m].set_index("seed")[metric].loc[seeds], **common)
        out[f"t1.{k}.per_range"] = measure.per_range(ranges(m), **common)
    out["t1.order"] = {**measure.ordering(acc, ORDER), **common}
    out["t1.red.all_ranges_high"] = measure.bound(
        [min(r) for r in ranges("RED")], 0.80, 1.0, measure="RED's lowest per-range accuracy",
        others_lowest_range={m: float(np.mean([min(r) for r in ranges(m)])) for m in deployable if m != "RED"}, **common)
    out["t1.oracle.upper_bound"] = measure.order(
        [all(acc.loc[s, "oracle experts"] >= acc.loc[s, m] for m in E_FAMILY) for s in seeds],
        all(acc["oracle experts"].mean() >= acc[m].mean() for m in E_FAMILY),
        value={m: float(acc[m].mean()) for m in ["oracle experts", *E_FAMILY]},
        measure="oracle vs the methods that mix the same experts E_i", red_true_range=float(acc["RED (true range)"].mean()),
        **common)
    rt = t["router_accuracy"][t["router_accuracy"]["split"] == sp].pivot_table(
        index="seed", columns="split_part", values="router_accuracy")
    out["t1.router.acc"] = measure.bound(rt["test"], train=float(rt["train"].mean()), val=float(rt["val"].mean()), **common)
    bnd = ov.pivot_table(index="seed", columns="method", values="boundary_accuracy")
    out["rob.boundary"] = {**measure.ordering(bnd, ["RED", "softmax MoE"]), "boundary_sums": list(BOUNDARY_SUMS), **common}
    # the cost claims are about the paper's backbone: judged on Qwen3-0.6B's shape (exact, from its configuration)
    c = t["parameter_cost"].set_index("backbone")
    here, qwen = c.iloc[0], c.loc["Qwen3-0.6B shape"]
    out["eff.params"] = measure.bound([qwen["RED share of backbone"]], 0.0, 0.01, measure="on Qwen3-0.6B's shape",
                                      embedded_backbone=float(here["RED share of backbone"]))
    out["eff.router_flops"] = measure.bound([here["router share of compute"]], 0.0, 0.005, backbone=cfg.backbone,
                                            qwen3_0_6b_shape=float(qwen["router share of compute"]))
    ratio = float(qwen["MoE / RED expert parameters"])
    out["eff.red_vs_moe_params"] = measure.order(
        [ratio >= 10], ratio >= 10, value=ratio, measure="on Qwen3-0.6B's shape",
        claim_needs="a ratio of at least 10 (one order of magnitude)",
        embedded_backbone=float(here["MoE / RED expert parameters"]))
    return out


def overall_summary(overall: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds of accuracy, macro-F1 and boundary accuracy per split and method, beside the paper's."""
    paper = load_claims()
    summary = overall.groupby(["split", "method"], sort=False)[["accuracy", "macro_f1", "boundary_accuracy"]].agg(
        ["mean", "std"])
    summary.columns = [f"{m} {s}" for m, s in summary.columns]
    for col, suffix in (("paper accuracy", "acc"), ("paper macro-F1", "f1")):
        summary[col] = [paper.get(f"t1.{PAPER_KEYS.get(m, '-')}.{suffix}", {}).get("paper") for _, m in summary.index]
    return summary


def per_range_table(per_range: pd.DataFrame, split: str) -> pd.DataFrame:
    """Accuracy per method (rows) and range (columns) on a split, mean over seeds."""
    main = per_range[per_range["split"] == split]
    return main.pivot_table(index="method", columns="range", values="accuracy", aggfunc="mean", sort=False)


def range_intervals(per_range: pd.DataFrame, split: str, method: str, seed: int) -> pd.DataFrame:
    """One method's accuracy per range on a split and seed, with distinct inputs and the 95% Wilson interval."""
    sel = per_range[(per_range["split"] == split) & (per_range["method"] == method) & (per_range["seed"] == seed)]
    return sel[["range", "accuracy", "distinct inputs", "ci95 low", "ci95 high"]]


def paper_per_range(columns) -> pd.DataFrame:
    """The paper's per-range accuracy of the four methods it reports, as rows 'paper: <method>'."""
    paper = load_claims()
    return pd.DataFrame({f"paper: {m}": paper[f"t1.{k}.per_range"]["paper"] for m, k in PAPER_KEYS.items()},
                        index=columns).T


def confusions(r: Task1Run, overall: pd.DataFrame, split: str) -> dict[str, pd.DataFrame]:
    """Confusion matrices (true vs predicted sum) of the best and the worst deployable method on one run's test part."""
    preds = methods.predict(r.red)
    acc = overall[(overall["split"] == split) & ~overall["method"].isin(NOT_DEPLOYABLE)].groupby("method")["accuracy"].mean()
    acc = acc[[m for m in overall["method"].unique() if m in acc.index]]
    y_true, sums = r.frames["test"]["sum"].to_numpy(), list(range(2, 2 + N_CLASSES))
    return {f"{m} (accuracy {acc[m]:.3f})": confusion(y_true, preds[m][0] + 2, labels=sums)
            for m in (acc.idxmax(), acc.idxmin())}


def findings(cfg: Task1Config, t: dict[str, pd.DataFrame], v: dict[str, str]) -> str:
    """The page's conclusions in words, from its tables and the ledger's verdicts."""
    paper, sp, ov = load_claims(), cfg.split, t["overall"]
    acc = {s: ov[ov["split"] == s].groupby("method")["accuracy"].mean() for s in cfg.split_list}
    rt = t["router_accuracy"]
    router = rt[(rt["split"] == sp) & (rt["split_part"] == "test")]["router_accuracy"].mean()
    counts = pd.Series(v).value_counts()
    a = acc[sp]
    lines = [
        f"- Under the paper's protocol ({SPLIT_LABELS[sp]}) RED reaches accuracy {a['RED']:.3f}, the softmax MoE with its "
        f"own gate {a['softmax MoE']:.3f}, the global head {a['global head']:.3f} and uniform averaging "
        f"{a['uniform averaging']:.3f} (paper: " + ", ".join(f"{paper[f't1.{k}.acc']['paper']}" for k in
                                                            ("red", "moe", "global", "uniform"))
        + f"). Our ordering is {' > '.join(a[ORDER].sort_values(ascending=False).index)}; the paper's ordering claim "
        f"**{v['t1.order']}**.",
        f"- The two MoE forms: its own gate, trained on the answer loss as the paper's classical MoE, {a['softmax MoE']:.3f}; "
        f"the same experts mixed by RED's range-supervised router {a[SHARED_MOE]:.3f}. "
        f"The global head both ways: stage 1's head (trained with the backbone on 10% of train, the claims' baseline) "
        f"{a['global head']:.3f}, a head trained on all of train over the same features {a['global head (all of train)']:.3f}.",
        f"- Oracle routing of the experts E_i gives {a['oracle experts']:.3f}; the upper-bound claim against the methods "
        f"that mix the same experts **{v['t1.oracle.upper_bound']}**. RED's own bound, RED routed by the true range, is "
        f"{a['RED (true range)']:.3f}.",
        f"- The router names the right range for {router:.3f} of test questions (claim: at least "
        f"{paper['t1.router.acc']['paper'][0]}, **{v['t1.router.acc']}**).",
        f"- The RED variants: the code's logit form reaches {a['RED code variant']:.3f}, joint tuning "
        f"(stage 4) {a['RED stage 4']:.3f}.",
    ]
    lines += [f"- Our extension, the **{SPLIT_LABELS[s]}**, asks for generalisation instead of recall: "
              + ", ".join(f"{m} {acc[s][m]:.3f}" for m in ORDER) + "." for s in cfg.split_list if s != sp]
    lines.append(f"- Of the {len(v)} claims measured on this page, " + ", ".join(f"{n} {k}" for k, n in counts.items())
                 + f" under the paper's protocol (value claims with tolerance {VALUE_TOL}, backbone `{cfg.backbone}`).")
    return "\n".join(lines)
