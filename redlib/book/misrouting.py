"""The book's main finding, for the intro: RED − softmax MoE against the share of test inputs sent to a wrong expert.

The robustness page's sweep sends a random share of each task's test inputs to a random wrong expert (the top routing
weight swapped with another expert's), the same inputs for RED's router and the MoE's gate, on every seed of Task 1,
Task 2 and MNIST. Each input is either misrouted or not, so a method's expected accuracy is linear in the share:
the gap at the paper's router error (3-4% of inputs, its 4.5.3) is read on the line between the sweep's two
smallest shares.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ..core.claims import load_claims, small
from .plots import COLUMN_IN, LEGEND_PT, PALETTE, check, set_style
from .results import read

KIND = "misrouted (random expert)"
# the paper's routers: "stable validation accuracy around 0.96-0.97" (its 4.5.3), so 3-4% of inputs misrouted
PAPER_ROUTER_ERROR = (0.03, 0.04)
PAPER_GAPS = {"Task 1": ("t1.red.acc", "t1.moe.acc"), "Task 2": ("t2.red.acc", "t2.moe.acc"),
              "MNIST": ("mn.red.acc", "mn.moe.acc")}


def gaps(profile: str = "full", root: str | os.PathLike = "results") -> pd.DataFrame | None:
    """RED − softmax MoE per task, seed and misrouted share (columns task, seed, share, gap), from the robustness
    page's sweep (None where it has not run)."""
    res = read("robustness_and_cost", profile, root)
    if not res.exists:
        return None
    sweep = res.table("sweep")
    sel = sweep[(sweep["perturbation"] == KIND) & sweep["method"].isin(["RED", "softmax MoE"])]
    wide = sel.pivot_table(index=["task", "seed", "strength"], columns="method", values="accuracy", sort=False)
    out = (wide["RED"] - wide["softmax MoE"]).rename("gap").reset_index().rename(columns={"strength": "share"})
    return out if len(out) else None


def means(g: pd.DataFrame) -> dict[str, pd.Series]:
    """Each task's gap averaged over seeds, indexed by the misrouted share (in the sweep's order)."""
    mean = g.groupby(["task", "share"], sort=False)["gap"].mean()
    return {task: m.droplevel("task") for task, m in mean.groupby(level="task", sort=False)}


def at_share(m: dict[str, pd.Series], share: float) -> pd.Series:
    """Each task's mean gap (`means`) at a misrouted share, on the line between the sweep's neighbouring shares."""
    return pd.Series({task: float(np.interp(share, s.index, s.to_numpy())) for task, s in m.items()})


def paper_gaps() -> pd.Series:
    """The paper's RED − MoE accuracy per task (its Task 1 and Task 2 tables; the research code's MNIST)."""
    claims = load_claims()
    return pd.Series({task: claims[red]["paper"] - claims[moe]["paper"] for task, (red, moe) in PAPER_GAPS.items()})


def words(g: pd.DataFrame) -> str:
    """When RED's advantage appears here, in one paragraph: the gap with the routers as trained, at the paper's
    router error, and the misrouted share at which it first reaches the paper's gap on each task."""
    paper, shares = paper_gaps(), sorted(g["share"].unique())
    m = means(g)
    clean, lo, hi = (at_share(m, share) for share in (0.0, *PAPER_ROUTER_ERROR))
    reach = []
    for task, gap in m.items():
        above = [s for s, v in gap.items() if v >= paper[task]]
        reach.append(f"{task} from {above[0]:.0%} of inputs misrouted" if above
                     else f"{task} at no share up to {shares[-1]:.0%}")
    err = f"{PAPER_ROUTER_ERROR[0] * 100:.0f}-{PAPER_ROUTER_ERROR[1]:.0%}"
    span = lambda task: " to ".join(dict.fromkeys(small(v[task], sign=True) for v in (lo, hi)))  # noqa: E731
    at = "; ".join(f"{task}: {small(clean[task], sign=True)} with the routers as trained, {span(task)} with {err} "
                   f"misrouted (the paper: {small(paper[task], sign=True)})" for task in clean.index)
    return (f"**When RED's advantage appears.** Sending a share of test inputs to a random wrong expert, the same "
            f"inputs for both methods, RED − MoE reads: {at}. It reaches the paper's gap on {', '.join(reach)} "
            "(mean over seeds).")


def figure(g: pd.DataFrame):
    """RED − MoE against the misrouted share, a line per task (mean over seeds, the band their sd), the paper's
    router error shaded."""
    set_style()
    fig, ax = plt.subplots(figsize=(COLUMN_IN, 3.4))
    err = f"{PAPER_ROUTER_ERROR[0] * 100:.0f}-{PAPER_ROUTER_ERROR[1]:.0%}"
    ax.axvspan(*PAPER_ROUTER_ERROR, color="0.85", zorder=0, label=f"the paper's router error ({err})")
    ax.axhline(0, color="0.4", linewidth=0.8, zorder=1)
    sns.lineplot(g, x="share", y="gap", hue="task", style="task", markers=True, dashes=False, errorbar="sd",
                 palette=PALETTE, ax=ax)
    ax.set(xlabel="share of test inputs sent to a random wrong expert", ylabel="RED − softmax MoE (accuracy)",
           title="RED − MoE as inputs are misrouted")
    ax.legend(loc="upper left", frameon=False, fontsize=LEGEND_PT)  # the upper left holds no data: gaps start at 0
    fig.tight_layout()
    return check(fig)
