"""Arithmetic Task 1 (addition) on the RED pipeline: its data, its own tables and its claims (its knobs:
`configs/task1_addition.py`).

The task hands the pipeline the distinct questions as items (a backbone over them is the encoder) and,
per split, each sample's question id, answer class (sum - 2) and range R1-R5 as its domain; runs,
scores and the per-method claims are the range tasks' (`ranges.py`).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from ..core import measure
from ..core.claims import CEILING, VALUE_TOL, listing, load_claims, ranking, verdict_keys
from ..models.backbone import Backbone
from ..red.cost import parameter_cost
from ..configs.ranges import SPLIT_LABELS, Setting
from ..configs.red import protocol_words
from ..configs.task1_addition import Task1Config
from ..tasks.arithmetic import N_CLASSES, NUMBER_FORMATS, RANGE_NAMES, TEMPLATES, Task1Spec, format_numbers
from ..tasks.arithmetic_data import make_task1
from ..core.metrics import confusion_table
from ..core.store import Store
from . import range_page, range_tables, ranges
from .ranges import NEAR, NOT_DEPLOYABLE, ORDER, profile_words  # noqa: F401 (profile_words: the opening line)

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


def frames(cfg: Task1Config, seed: int, setting: Setting) -> tuple[dict[str, pd.DataFrame], dict]:
    """Task 1's sample frames for one seed and setting, and what determined them (part of every cache key)."""
    spec = spec_for(cfg, seed, setting)
    return make_task1(spec), {"spec": asdict(spec)}


def spec_for(cfg: Task1Config, seed: int, setting: Setting) -> Task1Spec:
    """The dataset a (config, seed, setting) uses."""
    return Task1Spec(**cfg.dataset_fields(seed, setting), operand_min=cfg.operand_min, operand_max=cfg.operand_max,
                     n_templates=cfg.n_templates, data_source=cfg.data_source, test_share=cfg.pairs_test_share)


def evaluate(r: ranges.RangeRun, bb: Backbone) -> dict[str, pd.DataFrame]:
    """One run's tables (`ranges.evaluate`) and its case study (call right after the run: bb holds its blocks)."""
    return ranges.evaluate(r) | {"case_study": case_study(r, bb)}


def case_study(r: ranges.RangeRun, bb: Backbone, queries: list[str] = QUERIES) -> pd.DataFrame:
    """RED's router weights and the routed methods' answers for a few questions, beside the paper's (after `run`)."""
    texts = [format_numbers(q, r.setting.number_format) for q in queries]
    answers, alpha = ranges.routed_answers(r, bb, texts, ["global head", "softmax MoE", "RED"])
    names = [r.split()[0] for r in RANGE_NAMES]
    rows = [{"query": q, **{f"alpha {n}": float(alpha[j, i]) for i, n in enumerate(names)},
             **{f"{name} answer": int(a[j]) for name, a in answers.items()},
             **({f"paper alpha {n}": v for n, v in zip(names, PAPER_CASES[q][0])} | {"paper answer": PAPER_CASES[q][1]}
                if q in PAPER_CASES else {})} for j, q in enumerate(queries)]
    return r.tag(pd.DataFrame(rows))


def data_table(cfg: Task1Config) -> pd.DataFrame:
    """Sizes, distinct questions, train/test overlap and samples per range of each setting, first seed."""
    rows = []
    for st in cfg.settings:
        frames = make_task1(spec_for(cfg, cfg.seed, st))
        train_q = set(frames["train"]["text"])
        for part, df in frames.items():
            rows.append({"run": st.label, "part": part, "samples": len(df), "distinct questions": df["text"].nunique(),
                         "example": df["text"].iloc[0],
                         "test samples whose question is in train":
                             int(df["text"].isin(train_q).sum()) if part == "test" else "-",
                         **{r.split()[0]: int((df["range"] == i).sum()) for i, r in enumerate(RANGE_NAMES)}})
    return pd.DataFrame(rows)


def cost(bb: Backbone, cfg: Task1Config) -> pd.DataFrame:
    """Parameter and compute shares of RED on this backbone and on Qwen3-0.6B's shape."""
    tokens = int(bb.tokenize([COST_QUESTION]).attention_mask.sum())
    return parameter_cost(bb, cfg, len(RANGE_NAMES), N_CLASSES, tokens)


def tokenization(source: Backbone | Task1Config, question: str = COST_QUESTION) -> pd.DataFrame:
    """How a backbone's tokenizer (the one given, or a page config's) splits one question in each number format."""
    bb = source if isinstance(source, Backbone) else ranges.backbone(source)
    rows = []
    for fmt in NUMBER_FORMATS:
        text = format_numbers(question, fmt)
        pieces = bb.tokenizer.tokenize(text)
        rows.append({"number format": fmt, "text": text, "tokens": " | ".join(pieces), "token count": len(pieces)})
    return pd.DataFrame(rows)


def run(cfg: Task1Config, store: Store) -> dict[str, pd.DataFrame]:
    """Every seed and setting scored (each row tagged with its seed and setting), what RED adds per backbone
    (`parameter_cost`), the confusion matrices of the best and worst method on the first run of the setting the
    figures show (the claims' setting, or one with room to rank: `range_tables.room_to_rank`), and the first seed's
    small stages under the paper's epoch budgets where the extension asks (`range_page.paper_budgets`)."""
    bb = ranges.backbone(cfg)
    t, firsts = range_page.run_all(cfg, frames, bb, store, "Task 1", lambda r: evaluate(r, bb),
                                   extra={"parameter_cost": cost(bb, cfg)})
    shown = range_tables.room_to_rank(t["overall"], [st.label for st in cfg.settings])
    t["confusions"] = confusion_table(ranges.confusions(firsts[shown], t["overall"]))
    return t | (range_page.paper_budgets(cfg, frames, bb, store) if cfg.paper_budget else {})


SHARED_MOE = "softmax MoE (RED's router)"
E_FAMILY = ("uniform averaging", "softmax MoE", SHARED_MOE)  # mixtures of the same experts E_i


def claims(cfg: Task1Config, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """The measurement behind every Task 1 claim in the main setting; each other setting measured beside it as an extension."""
    t = tables
    main, *others = cfg.settings
    return ranges.with_extensions(_measured(cfg, t, main), {st: _measured(cfg, t, st) for st in others})


def _measured(cfg: Task1Config, t: dict[str, pd.DataFrame], st: Setting) -> dict[str, dict]:
    out, m = ranges.measured(cfg.KEY, t, st, {"data_source": cfg.data_source, "backbone": cfg.backbone})
    ov, acc, ranges_of, common = m["overall"], m["acc"], m["ranges"], m["common"]
    seeds = list(acc.index)
    deployable = ranges.on_every_seed(ov, [x for x in ov["method"].unique() if x not in NOT_DEPLOYABLE])
    out["t1.red.all_ranges_high"] = measure.bound(
        [min(r) for r in ranges_of("RED")], 0.80, 1.0, measure="RED's lowest per-range accuracy",
        others_lowest={x: float(np.mean([min(r) for r in ranges_of(x)])) for x in deployable if x != "RED"}, **common)
    out["t1.oracle.upper_bound"] = measure.order(
        [all(acc.loc[s, "oracle experts"] >= acc.loc[s, m] for m in E_FAMILY) for s in seeds],
        all(acc["oracle experts"].mean() >= acc[m].mean() for m in E_FAMILY),
        value={m: float(acc[m].mean()) for m in ["oracle experts", *E_FAMILY]},
        measure="oracle vs the methods that mix the same experts E_i", red_true_range=float(acc["RED (true range)"].mean()),
        **common)
    rt = t["router_accuracy"][t["router_accuracy"]["run"] == st.label].pivot_table(
        index="seed", columns="split_part", values="router_accuracy")
    out["t1.router.acc"] = measure.bound(rt["test"], train=float(rt["train"].mean()), val=float(rt["val"].mean()), **common)
    return out


def found(cfg: Task1Config, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `t1_*`)."""
    t, v = tables, verdicts
    paper, (main, *others), ov = load_claims(), cfg.settings, t["overall"]
    acc = {st.label: ov[ov["run"] == st.label].groupby("method")["accuracy"].mean() for st in cfg.settings}
    rt, a = t["router_accuracy"], acc[main.label]
    digits = []
    for st in others:
        whole = Setting(st.split)
        if st.number_format == "digits" and whole.label in acc:
            digits.append(f"{SPLIT_LABELS[st.split]}: " + ", ".join(
                f"{acc[st.label][m] - acc[whole.label][m]:+.3f} ({m})" for m in ("RED", "softmax MoE", "oracle experts")))
    return {
        "t1_ranges_shown": range_tables.room_to_rank(ov, [st.label for st in cfg.settings]),
        "t1_budget": range_tables.budget_words(t, main.label, cfg.seed, cfg.KEY),
        "t1_protocol": protocol_words(cfg), "t1_ties": range_tables.ties_words(ov, main.label),
        "t1_seen": ", ".join(f"{ranges.seen_share(cfg, frames, st):.1%} ({st.label})" for st in cfg.settings
                             if st.number_format == "whole"),
        "t1_setting": main.description, "t1_backbone": cfg.backbone, "t1_value_tol": VALUE_TOL, "t1_near": NEAR,
        **ranges.method_glue("t1", a), "t1_variants": ranges.variant_words(cfg, ov[ov["run"] == main.label]),
        **{f"t1_paper_{k}": paper[f"t1.{k}.acc"]["paper"] for k in ("red", "moe", "global", "uniform")},
        "t1_ranking": ranking(ranges.seeds_by_method(t, main), ORDER),
        "t1_router": rt[(rt["run"] == main.label) & (rt["split_part"] == "test")]["router_accuracy"].mean(),
        "t1_paper_router": paper["t1.router.acc"]["paper"][0],
        "t1_extensions": "; ".join(f"{st.description}: " + listing(acc[st.label][ORDER]) + ", oracle experts "
                                   f"{acc[st.label]['oracle experts']:.3f}" for st in others) or "none run",
        "t1_digit_change": "; ".join(digits) or "not run in this profile",
        "t1_near_misses": range_tables.near_miss_words(ov, "RED"), "t1_capped": range_tables.capped_stages(
            t["epochs"], claims=t["epochs"]["run"] == cfg.settings[0].label),
        "t1_n_claims": len(v), "t1_tally": range_tables.verdict_tally(v),
        "t1_stage1_far": range_tables.far_seeds_words(range_tables.stage1_seeds(t["epochs"], main.label)),
        "t1_pairs_gap": pairs_gap(cfg, t), "t1_iid_ceiling": ceiling_words(a),
        **verdict_keys(cfg.KEY, v),
    }


def ceiling_words(acc: pd.Series) -> str:
    """Whether the claims' setting sits at the ceiling (RED and the MoE both at 0.995 or above, mean over seeds), in
    words: then no order between them can show."""
    red, moe = acc["RED"], acc["softmax MoE"]
    if min(red, moe) >= CEILING:
        return (f"RED {red:.3f} and the MoE {moe:.3f} sit at the ceiling (≥ {CEILING}): this test cannot rank "
                "them")
    return f"RED {red:.3f} and the MoE {moe:.3f} leave room below the ceiling ({CEILING})"


def pairs_gap(cfg: Task1Config, t: dict[str, pd.DataFrame]) -> str:
    """RED − softmax MoE on the unseen-pairs split (whole numbers), paired by seed: 'mean ± sd over N seeds' (the
    split that leaves room to rank them), or that it did not run."""
    pairs = next((st for st in cfg.settings if st.split == "pairs" and st.number_format == "whole"), None)
    if pairs is None or pairs == cfg.settings[0]:
        return "not run as an extension in this profile"
    acc = ranges.seeds_by_method(t, pairs)
    return (ranges.paired_gap(acc) + f" (RED {acc['RED'].mean():.3f}, softmax MoE {acc['softmax MoE'].mean():.3f}, "
            f"global head {acc['global head'].mean():.3f})")
