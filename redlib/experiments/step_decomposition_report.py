"""An analysis of the step-decomposition page beside its claims: what moves program execution.

RED's op experts are residuals read out through stage 1's frozen head; the softmax MoE's experts carry heads of
their own. The 2x2 attribution (`step_decomposition.attribution`) trains stage 1 and the small stages each at 1e-3 and
1e-4 on one seed, so that a change of execution can be laid at one of them.
"""

from __future__ import annotations

import pandas as pd

from ..core.claims import listing, load_claims, verdict_keys
from . import range_tables
from .step_decomposition import PAPER_KEYS, execution_table
from ..configs.step_decomposition import DecompositionConfig

METHODS = ("RED", "softmax MoE")


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
    """What the 2x2 shows, in a sentence: which factor moves each method's execution more."""
    if att is None or att.empty:
        return "not run (\"attribution\" is not in `extensions`)"
    eff = attribution_effects(att)
    parts = []
    for m in METHODS:
        s1, sm = eff[f"sd_att_stage1_{PAPER_KEYS[m]}"], eff[f"sd_att_small_{PAPER_KEYS[m]}"]
        which = "stage 1's rate" if abs(s1) > abs(sm) else "the small stages' rate"
        parts.append(f"{m}'s moves more with {which} (from 1e-3 to 1e-4: stage 1 {s1:+.3f}, small stages {sm:+.3f})")
    return "; ".join(parts)


def found(cfg: DecompositionConfig, t: dict[str, pd.DataFrame], v: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `sd_*`)."""
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
        "sd_head_lr": f"{cfg.head_lr:g}", "sd_paper_stage1_lr": f"{cfg.lr:g}", "sd_max_epochs": cfg.max_epochs,
        "sd_patience": cfg.patience,
        "sd_residual_lr": ", ".join(f"{k} {v:g}" for k, v in residual.groupby("stage", sort=False)["lr"].first().items()),
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
