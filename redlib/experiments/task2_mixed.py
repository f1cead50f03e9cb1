"""Arithmetic Task 2 (mixed addition and subtraction) end to end on the RED pipeline (paper section 4.7); its knobs:
`configs/task2_mixed.py`.

The same range experts, routers and baselines as Task 1 (`ranges.py`), on expressions of one to four
operations; scores are also broken down by the number of operations and by phrasing.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ..core.claims import VALUE_TOL, listing, load_claims, ranking, verdict_keys
from ..configs.red import protocol_words
from ..configs.task2_mixed import MixedTaskConfig, Task2Config
from ..tasks.arithmetic import RANGE_NAMES
from ..tasks.mixed import MAX_STEPS, PHRASINGS, Task2Spec
from ..tasks.mixed_data import make_task2
from ..core.metrics import confusion_table
from ..core.store import Store
from . import range_page, range_tables, ranges
from ..configs.ranges import Setting
from .ranges import ORDER, profile_words  # noqa: F401 (profile_words: the opening line)

def frames(cfg: Task2Config, seed: int, setting: Setting) -> tuple[dict[str, pd.DataFrame], dict]:
    """Task 2's sample frames for one seed and setting, and what determined them (part of every cache key)."""
    spec = spec_for(cfg, seed, setting)
    return make_task2(spec), {"spec": asdict(spec)}


def spec_for(cfg: MixedTaskConfig, seed: int, setting: Setting) -> Task2Spec:
    """The expression data a (config, seed, setting) uses (the setting's step mix where it names one)."""
    return Task2Spec(**cfg.dataset_fields(seed, setting), step_mix=setting.mix or cfg.step_mix,
                     n_phrasings=cfg.n_phrasings)


def evaluate(r: ranges.RangeRun) -> dict[str, pd.DataFrame]:
    """The range tasks' scores, with accuracy on the test texts not in train ("unseen"), by number of operations and
    by phrasing as extra columns."""
    test = r.frames["test"]
    subsets = {"unseen": ~test["text"].isin(set(r.frames["train"]["text"])).to_numpy()}  # texts train never showed
    subsets |= {f"{k} ops": (test["steps"] == k).to_numpy() for k in range(1, MAX_STEPS + 1)}
    subsets |= {f"'{p}' phrasing": (test["phrasing"] == p).to_numpy() for p in PHRASINGS}
    return ranges.evaluate(r, {k: m for k, m in subsets.items() if m.any()})


def data_table(cfg: Task2Config) -> pd.DataFrame:
    """Sizes, distinct expressions and symbolic forms, train/test overlap, operations and ranges of each setting."""
    rows = []
    for st in cfg.settings:
        frames = make_task2(spec_for(cfg, cfg.seed, st))
        train_text, train_form = set(frames["train"]["text"]), set(frames["train"]["form"])
        for part, df in frames.items():
            test = part == "test"
            rows.append({"run": st.label, "part": part, "samples": len(df), "distinct texts": df["text"].nunique(),
                         "distinct forms": df["form"].nunique(),
                         "test texts in train": f"{df['text'].isin(train_text).mean():.1%}" if test else "-",
                         "test forms in train": f"{df['form'].isin(train_form).mean():.1%}" if test else "-",
                         **{f"{k} ops": int((df["steps"] == k).sum()) for k in sorted(df["steps"].unique())},
                         **{r.split()[0]: int((df["range"] == i).sum()) for i, r in enumerate(RANGE_NAMES)}})
    return pd.DataFrame(rows).fillna(0)


def data_views(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`data_table` as two page-wide tables: sizes and train/test overlap; samples per operation count and range."""
    overlap = ["run", "part", "samples", "distinct texts", "distinct forms", "test texts in train", "test forms in train"]
    return table[overlap], table[["run", "part", *(c for c in table.columns if c not in overlap)]]


def examples(cfg: Task2Config, n_per_phrasing: int = 1) -> pd.DataFrame:
    """A few records of the first setting, one per phrasing: text, answer, range and program."""
    df = make_task2(spec_for(cfg, cfg.seed, cfg.settings[0]))["train"]
    picked = df.groupby("phrasing", sort=False).head(n_per_phrasing)
    return picked[["phrasing", "text", "answer", "steps", "program"]].assign(range=picked["range"].map(
        lambda i: RANGE_NAMES[i]))


def operations_long(overall: pd.DataFrame) -> pd.DataFrame:
    """One row per setting, method, seed and number of operations, with its accuracy."""
    cols = [c for c in overall.columns if c.endswith(" ops_accuracy")]
    long = overall[["run", "method", "seed", *cols]].melt(id_vars=["run", "method", "seed"], var_name="operations",
                                                          value_name="accuracy")
    long["operations"] = long["operations"].str.removesuffix(" ops_accuracy").astype(int)
    return long


def by_operations(overall: pd.DataFrame) -> pd.DataFrame:
    """Accuracy per method (rows) and number of operations (columns), per setting, mean over seeds."""
    return operations_long(overall).pivot_table(index=["run", "method"], columns="operations", values="accuracy",
                                                sort=False)


def by_phrasing(overall: pd.DataFrame, run_label: str) -> pd.DataFrame:
    """Accuracy per method (rows) and phrasing (columns) in one setting, mean over seeds."""
    cols = [c for c in overall.columns if c.endswith("phrasing_accuracy")]
    sel = overall[overall["run"] == run_label].groupby("method", sort=False)[cols].mean()
    sel.columns = [c.removesuffix("_accuracy") for c in cols]
    return sel


def run(cfg: Task2Config, store: Store) -> dict[str, pd.DataFrame]:
    """Every seed and setting scored (each row tagged with its seed and setting), the confusion matrices of the best
    and worst method on the claims' setting's first run, and the first seed's small stages under the paper's epoch
    budgets where the extension asks (`range_page.paper_budgets`)."""
    bb = ranges.backbone(cfg)
    t, firsts = range_page.run_all(cfg, frames, bb, store, "Task 2", evaluate)
    t["confusions"] = confusion_table(ranges.confusions(firsts[cfg.settings[0].label], t["overall"]))
    return t | (range_page.paper_budgets(cfg, frames, bb, store) if cfg.paper_budget else {})


def claims(cfg: Task2Config, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """The measurement behind every Task 2 claim in the claims' setting, other settings beside it as extensions."""
    t = tables
    common = {"backbone": cfg.backbone, "step_mix": cfg.step_mix}
    main, *others = cfg.settings
    return ranges.with_extensions(ranges.measured(cfg.KEY, t, main, common)[0],
                                  {st: ranges.measured(cfg.KEY, t, st, common)[0] for st in others})


def found(cfg: Task2Config, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `t2_*`)."""
    t, v = tables, verdicts
    paper, (main, *others), ov = load_claims(), cfg.settings, t["overall"]
    acc = {st.label: ov[ov["run"] == st.label].groupby("method")["accuracy"].mean() for st in cfg.settings}
    a = acc[main.label]
    frames = make_task2(spec_for(cfg, cfg.seed, main))
    ops = by_operations(ov).loc[(main.label, "RED")]
    return {
        "t2_budget": range_tables.budget_words(t, main.label, cfg.seed, cfg.KEY),
        "t2_protocol": protocol_words(cfg), "t2_ties": range_tables.ties_words(ov, main.label),
        "t2_red_minus_moe": ranges.paired_gap(ranges.seeds_by_method(t, main)),
        "t2_paper_gap": f"{paper['t2.red.acc']['paper'] - paper['t2.moe.acc']['paper']:+.3f}",
        "t2_setting": main.description, "t2_step_mix": cfg.step_mix, "t2_backbone": cfg.backbone,
        "t2_value_tol": VALUE_TOL,
        **ranges.method_glue("t2", a), "t2_variants": ranges.variant_words(cfg, ov[ov["run"] == main.label]),
        **{f"t2_paper_{k}": paper[f"t2.{k}.acc"]["paper"] for k in ("red", "moe", "global", "uniform")},
        "t2_ranking": ranking(ranges.seeds_by_method(t, main), ORDER),
        "t2_red_by_operations": listing({f"{c} op{'' if str(c) == '1' else 's'}": x for c, x in ops.items()}),
        "t2_seen": frames["test"]["text"].isin(set(frames["train"]["text"])).mean(),
        "t2_forms_seen": frames["test"]["form"].isin(set(frames["train"]["form"])).mean(),
        "t2_extensions": "; ".join(f"{st.description}: " + listing(acc[st.label][ORDER]) for st in others) or "none run",
        "t2_digit_settings": ", ".join(st.description for st in cfg.settings if st.number_format == "digits")
        or "no setting",
        "t2_capped": range_tables.capped_stages(
            t["epochs"], claims=t["epochs"]["run"] == cfg.settings[0].label),
        "t2_n_claims": len(v), "t2_tally": range_tables.verdict_tally(v),
        "t2_stage1_far": range_tables.far_seeds_words(range_tables.stage1_seeds(t["epochs"], cfg.settings[0].label)),
        **verdict_keys(cfg.KEY, v),
    }
