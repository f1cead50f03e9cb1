"""What the pages' stages cost, read from their own result files: seconds per stage kind, and the training time each
run implies."""

from __future__ import annotations

import os

import pandas as pd

from ..red.cost import TIME_COLUMNS
from .results import read


def published_costs(pages: list[str], profile: str = "full", results_dir: str | os.PathLike = "results") -> pd.DataFrame:
    """What each page's stages cost to train, from its last run's provenance (seconds per stage kind, whether the
    run trained them or loaded them): the pages' own record, read one way."""
    rows = []
    for page in pages:
        res = read(page, profile, results_dir)
        if not res.exists:
            continue
        p = res.provenance
        st = p.get("stages") or {}
        if st.get("stages_without_recorded_cost", 1) or "train_seconds_by_kind" not in st:
            continue  # a run before stages kept their cost: nothing honest to report
        rows += [{"page": page, "stage": kind.split("/")[-1], "seconds": s,
                  "compute_seconds": sum(st["train_seconds_by_kind"].values()),
                  "runs": timed_runs(p.get("parameters") or {}),
                  "git_commit": (p.get("git_commit") or "")[:7], "measured_at": p.get("started_at", "")}
                 for kind, s in st["train_seconds_by_kind"].items()]
    return pd.DataFrame(rows, columns=TIME_COLUMNS)


def cold_estimates(pages: list[str], profile: str = "full", results_dir: str | os.PathLike = "results") -> pd.DataFrame:
    """The training time each page's published run implies, from its stages' recorded seconds: a range, not a timing.

    Stage 1 trains apart from the other stages (in the page's process, or on the range pages in workers before the
    rest, each run counting its share of the time it overlapped another), the other stages in its `workers`
    processes. With every process busy all the time the stages take (sum of seconds) / (workers + 1); with stage 1
    apart and the rest shared by the workers, stage 1 + rest / workers. Work outside the stages (data, evaluation,
    start-up) is not in it.
    """
    costs = published_costs(pages, profile, results_dir)
    rows = []
    for page, part in costs.groupby("page", sort=False):
        workers = (read(page, profile, results_dir).provenance.get("run_options") or {}).get("workers", 1)
        serial = float(part.loc[part["stage"] == "stage1", "seconds"].sum())
        rest = float(part["seconds"].sum()) - serial
        rows.append({"page": page, "stage 1 min": serial / 60, "other stages, worker min": rest / 60,
                     "workers": workers, "low: all busy, min": (serial + rest) / (workers + 1) / 60,
                     "high: stage 1 apart, min": (serial + rest / workers) / 60, "commit": part["git_commit"].iloc[0]})
    return pd.DataFrame(rows, columns=["page", "stage 1 min", "other stages, worker min", "workers", "low: all busy, min",
                                       "high: stage 1 apart, min", "commit"])


def _shares(mix: str | None) -> dict[int, float]:
    """A step mix's share per number of operations ('1:0.5,2:0.5' -> {1: 0.5, 2: 0.5}); {} for none."""
    return {int(k): float(v) for k, v in (part.split(":") for part in str(mix).split(","))} if mix else {}


def timed_runs(params: dict) -> int:
    """Runs a page made, from its recorded parameters: n_seeds on the claims' setting, `stage1_beside_seeds` on the
    stage-1 extension, `split_seeds` on each other split, and `extension_seeds` on each digit variant and on Task 2's
    other step mix (a parameter a run predates counts as it did then: n_seeds on the stage-1 extension,
    `extension_seeds` on every extension)."""
    n = int(params.get("n_seeds") or 1)
    each = int(params.get("extension_seeds") or n)
    splits = [v for v in str(params.get("splits_reported") or "none").split(",") if v != "none"]
    digits = [v for v in str(params.get("digits_variant_on") or "none").split(",") if v != "none"]
    beside = bool(params.get("stage1_paper_beside")) and str(params.get("head_lr_grid")) != "none"
    other = params.get("mix_variant")  # Task 2's other step mix, compared by its shares ("1:0.5" is "1:0.50")
    mix = other not in (None, "none") and _shares(other) != _shares(params.get("step_mix"))
    return (n + beside * int(params.get("stage1_beside_seeds") or n) + max(0, len(splits) - 1)
            * int(params.get("split_seeds") or each) + (len(digits) + mix) * each)
