"""An analysis of the step-decomposition page beside its claims: how program execution depends on stage 1.

RED's op experts are residuals read out through stage 1's frozen head; the softmax MoE's experts carry heads of
their own. Every stage-1 run the page made (each seed, with the chosen rate and with the paper's) is one point:
its validation loss against the accuracy each routing executes the true programs with.
"""

from __future__ import annotations

import pandas as pd

from ..core.claims import listing, load_claims, verdict_keys
from ..red import selection
from . import range_tables
from .decomposition import PAPER_KEYS, PAPER_LR, DecompositionConfig, execution_table

METHODS = ("RED", "softmax MoE")


def stage1_dependence(t: dict[str, pd.DataFrame], run: str) -> pd.DataFrame:
    """One row per stage-1 run of setting `run` (seed, rate): stage 1's validation loss, and RED's and the softmax
    MoE's accuracy on the true programs (all steps) over op experts trained on that stage 1."""
    ep, ex = t["epochs"], t["execution"]
    ex = ex[(ex["run"] == run) & (ex["programs"] == "true programs") & (ex["steps"].astype(str) == "all")]
    rows = []
    for suffix, which in (("", "the chosen rate"), (PAPER_LR, "the paper's rate")):
        s1 = ep[(ep["run"] == run) & (ep["stage"] == "stage 1" + suffix)]
        for seed, loss, lr in zip(s1["seed"], s1["val loss"], s1["lr"]):
            acc = ex[ex["seed"] == seed].set_index("routing")["accuracy"]
            if all(m + suffix in acc for m in METHODS):
                rows.append({"seed": int(seed), "stage 1 at": which, "lr": lr, "stage 1 val loss": loss,
                             **{m: float(acc[m + suffix]) for m in METHODS}})
    return pd.DataFrame(rows)


def found(cfg: DecompositionConfig, t: dict[str, pd.DataFrame], v: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `sd_*`)."""
    main, paper = cfg.settings[0].label, load_claims()
    true, dec = (execution_table(t["execution"], main, s)["all"] for s in ("true programs", "decomposer's programs"))
    single = t["op_experts"].groupby("method")["accuracy"].mean()
    ep = t["epochs"]
    residual = ep[ep["stage"].str.startswith("residual") & ~ep["stage"].str.endswith(PAPER_LR)]
    paper_lr = PAPER_LR if cfg.runs_paper_lr else None
    return {
        **selection.found("sd", cfg, t.get("lr_selection")),
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
            ep, by=("stage",), claims=(ep["run"] == main) & ~ep["stage"].str.endswith(PAPER_LR)),
        **{f"sd_paperlr_{k}": f"{true[m + paper_lr]:.3f}" if paper_lr else "not run" for m, k in PAPER_KEYS.items()},
        "sd_paperlr_single": f"{single['RED (true range)' + paper_lr]:.3f}" if paper_lr else "not run",
        **verdict_keys("sd", v),
    }
