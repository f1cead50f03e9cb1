"""What the pages' stages cost, read from their own result files: seconds per stage kind, the learning-rate
selection's share, successive halving replayed on the recorded curves, and the training time each run implies."""

from __future__ import annotations

import os

import pandas as pd

from ..red.cost import TIME_COLUMNS, timed_runs
from ..red.selection import KIND_NAMES, rung_rule
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


def selection_costs(pages: list[str], profile: str = "full", results_dir: str | os.PathLike = "results") -> pd.DataFrame:
    """What choosing every stage kind's learning rate cost each page (the stages of its `lr_selection` table, seconds
    as their cache entries recorded them) against everything its stages cost, from the pages' own records."""
    rows = []
    for page in pages:
        res = read(page, profile, results_dir)
        if not res.exists or not (res.dir / "lr_selection.csv").exists():
            continue
        t, st = res.table("lr_selection"), res.provenance.get("stages") or {}
        if (res.dir / "lr_selection_stage1_paper.csv").exists():  # the stage-1 extension's own choice
            t = pd.concat([t, res.table("lr_selection_stage1_paper")], ignore_index=True)
        if t.empty:  # the page kept its configured rates (head_lr_grid "none"): nothing chosen, nothing spent
            continue
        total = sum((st.get("train_seconds_by_kind") or {}).values())
        spent = float(t["seconds"].sum()) if "seconds" in t else float("nan")
        rows.append({"page": page, "rates tried": t["lr"].nunique(), "stages trained to choose": int(t["stages"].sum()),
                     "their seconds": spent, "all the page's stages, seconds": total,
                     "share": spent / total if total else float("nan")})
    return pd.DataFrame(rows)


def rung_checks(pages: list[str], rungs: list[tuple[int, int | None]], profile: str = "full",
                results_dir: str | os.PathLike = "results") -> pd.DataFrame:
    """Successive halving of each stage kind's rates (`selection.rung_rule`) replayed at each (rung, rates kept) on
    every page's recorded full grid (`lr_curves.csv`; `stage1_curves.csv` from a page that recorded only stage 1's
    tries): the rates it keeps, whether it chooses the full grid's rate, the epochs it saves."""
    rows = []
    for page in pages:
        res = read(page, profile, results_dir)
        name = next((n for n in ("lr_curves", "stage1_curves") if (res.dir / f"{n}.csv").exists()), None)
        if not (res.exists and name and len(curves := res.table(name))):
            continue
        text = str(res.provenance["parameters"].get("head_lr_grid", "none"))
        grid = None if text == "none" else [float(v) for v in text.split(",")]
        if "stage kind" not in curves:  # a page that recorded stage 1's tries only
            curves = curves.assign(**{"stage kind": KIND_NAMES["stage1"], "stage": "stage 1"})
        rows += [{"page": page, "stage kind": kind, **rung_rule(c, r, keep, grid)}
                 for kind, c in curves.groupby("stage kind", sort=False) for r, keep in rungs]
    return pd.DataFrame(rows)


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


def rung_summary(checks: pd.DataFrame) -> pd.DataFrame:
    """`rung_checks` per page and rule: whether stage 1 keeps the full grid's rate and the share of its epochs saved,
    then the same over the small stage kinds (how many keep their rate, the share of their epochs saved)."""
    rows = []
    for (page, rung, keep), g in checks.groupby(["page", "rung (epochs)", "rates kept"], sort=False):
        one, rest = g[g["stage kind"] == KIND_NAMES["stage1"]], g[g["stage kind"] != KIND_NAMES["stage1"]]
        rows.append({"page": page, "rule": f"rung {rung}, keep {keep}",
                     "stage 1 keeps its rate": bool(one["same"].all()) if len(one) else None,
                     "stage 1 epochs saved": 1 - one["epochs, the rule"].sum() / one["epochs, full grid"].sum()
                     if len(one) else float("nan"),
                     "small kinds keeping theirs": f"{int(rest['same'].sum())}/{len(rest)}",
                     "their epochs saved": 1 - rest["epochs, the rule"].sum() / rest["epochs, full grid"].sum()
                     if len(rest) else float("nan")})
    return pd.DataFrame(rows)
