"""An analysis of the step-decomposition page beside its claims: what moves program execution.

RED's op experts are residuals read out through stage 1's frozen head; the softmax MoE's experts carry heads of
their own. The 2x2 attribution (`step_decomposition.attribution`) trains stage 1 and the small stages each at 1e-3 and
1e-4 on one seed, so that a change of execution can be laid at one of them.
"""

from __future__ import annotations

import pandas as pd

from ..core.claims import listing, load_claims, rate, small, verdict_keys
from . import range_tables
from ..configs.step_decomposition import DecompositionConfig

METHODS = ("RED", "softmax MoE")

# the paper's routings of the executor and their keys in the claims file (sd.red.acc, ...)
PAPER_KEYS = {"RED": "red", "softmax MoE": "moe", "AllFix (equal weights)": "allfix"}


def attribution_effects(att: pd.DataFrame) -> dict[str, float]:
    """From the 2x2: each factor's effect on each method's execution accuracy, averaged over the other factor's two
    levels (1e-4 minus 1e-3), as `sd_att_<factor>_<method key>`."""
    out = {}
    for factor, key in (("stage 1 lr", "stage1"), ("small stages lr", "small")):
        for m in METHODS:
            by = att.groupby(factor)[m].mean()
            out[f"sd_att_{key}_{PAPER_KEYS[m]}"] = float(by.get(1e-4, float("nan")) - by.get(1e-3, float("nan")))
    return out


def attribution_words(att: pd.DataFrame | None) -> str:
    """What the 2x2 shows, in a reader's sentence: which rate moves each method's execution more, and by how much."""
    if att is None or att.empty:
        return "not run (\"attribution\" is not in `extensions`)"
    eff = attribution_effects(att)
    names = {"stage1": "stage 1's rate", "small": "the small stages' rate"}
    said = [m if m == "RED" else f"the {m}" for m in METHODS]
    moves = {f: [eff[f"sd_att_{f}_{PAPER_KEYS[m]}"] for m in METHODS] for f in names}
    larger = [max(names, key=lambda f: abs(moves[f][i])) for i in range(len(METHODS))]
    how = "(from 1e\u20113 to 1e\u20114, each averaged over the other's two rates: " + "; ".join(
        f"{names[f]} moves " + " and ".join(f"{m} by {v:+.3f}" for m, v in zip(said, moves[f])) for f in names) + ")"
    if len(set(larger)) == 1:
        other = next(f for f in names if f != larger[0])
        return f"{names[larger[0]]}, more than {names[other]} {how}"
    return "; ".join(f"for {m}, {names[f]}" for m, f in zip(said, larger)) + f" {how}"


def rates_words(lrs: pd.Series) -> str:
    """Learning rates per stage (index: the stage) in words: one rate when they are all the same."""
    if lrs.nunique() == 1:
        return rate(lrs.iloc[0])
    return ", ".join(f"{k} {rate(v)}" for k, v in lrs.items())


def execution_table(execution: pd.DataFrame, run_label: str, programs: str) -> pd.DataFrame:
    """Final-answer accuracy per routing (rows) and steps (columns) in one setting and program source, mean over seeds."""
    sel = execution[(execution["run"] == run_label) & (execution["programs"] == programs)]
    return sel.pivot_table(index="routing", columns="steps", values="accuracy", sort=False)


def found(cfg: DecompositionConfig, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `sd_*`)."""
    t, v = tables, verdicts
    main, paper = cfg.settings[0].label, load_claims()
    true, dec = (execution_table(t["execution"], main, s)["all"] for s in ("true programs", "decomposer's programs"))
    ops = t["op_experts"]
    single = ops[ops["run"] == main].groupby("method")["accuracy"].mean()  # the claims' setting, as paper vs code
    ep = t["epochs"]
    residual = ep[ep["stage"].str.startswith("residual")]
    return {
        "sd_stage1_far": range_tables.far_seeds_words(range_tables.stage1_seeds(ep, main)), "sd_setting": main,
        **{f"sd_true_{k}": true[m] for m, k in PAPER_KEYS.items()},
        **{f"sd_dec_{k}": dec[m] for m, k in PAPER_KEYS.items()},
        **{f"sd_paper_{k}": paper[f"sd.{k}.acc"]["paper"]["all"] for k in PAPER_KEYS.values()},
        "sd_exact": listing(t["decomposer"].groupby("run", sort=False)["exact"].mean()),
        "sd_single_red": single["RED (true range)"], "sd_single_oracle": single["oracle experts"],
        "sd_head_lr": rate(cfg.head_lr), "sd_paper_stage1_lr": rate(cfg.lr), "sd_max_epochs": cfg.max_epochs,
        "sd_patience": cfg.patience, "sd_residual_lr": rates_words(residual.groupby("stage", sort=False)["lr"].first()),
        "sd_residual_epochs": residual["epochs run"].mean(), "sd_residual_best": residual["best epoch"].mean(),
        "sd_residual_capped": int(range_tables.epochs_table(residual, by=("stage",))["still improving at the cap"].sum()),
        "sd_residual_stages": len(residual), "sd_capped": range_tables.capped_stages(
            ep, by=("stage",), claims=ep["run"] == main),
        "sd_attribution": attribution_words(t.get("attribution")),
        "sd_ties": range_tables.ties_words(t["op_experts"], main),
        **verdict_keys(cfg.KEY, v),
    }


def examples_table(examples: pd.DataFrame, seed: int, run: str) -> pd.DataFrame:
    """The worked examples of one seed and setting, one block of steps per expression: the expression, its final
    answer and whether its program was decoded, once, as the block's label; per step its text, the router's weights,
    each residual expert's answer alone, RED's answer and the true result."""
    ex = examples[(examples["seed"] == seed) & (examples["run"] == run)]
    label = [f"{e} → {a} ({'its decoded program' if d == 'ok' else 'no program decoded: the true one'})"
             for e, a, d in zip(ex["expression"], ex["final answer"], ex["decoded"])]
    shown = ex.drop(columns=["expression", "final answer", "decoded", "seed", "run", "split", "number_format"],
                    errors="ignore").rename(columns={"answer": "RED's answer"})
    return shown.set_index([pd.Index(label, name="expression → its answer (the program traced)"), "step"])


def decomposer_gap_words(true_t: pd.DataFrame, dec_t: pd.DataFrame) -> str:
    """How far the decomposer's programs leave execution from the true programs', cell by cell, in words (an exact
    match says so, never "by more than 0.0000")."""
    gap = float((true_t - dec_t).abs().max().max())
    return ("every cell equal to the table above" if gap == 0
            else f"no cell differs from the table above by more than {small(gap, 4)}")
