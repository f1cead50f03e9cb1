"""What the pages' stages cost, read from their own result files: seconds per stage kind, and the training time each
run implies."""

from __future__ import annotations

import json
import os
from typing import Any

import pandas as pd

from ..configs.ranges import mix_from_words
from ..configs.red import upgraded
from ..red.cost import TIME_COLUMNS
from ..tasks.mixed import parse_mix
from ..core.paths import project_root
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


def cold_peaks(profile: str, bench: dict[str, Any] | None = None) -> pd.Series:
    """The book's one peak-memory value per page (GiB): its kernel and workers together, sampled every 0.25 s in its
    last cold run of `profile` (the committed bench file, results/bench/bench.json, unless `bench` is given); a page
    timed before workers were sampled is left out rather than read as its kernel alone."""
    if bench is None:
        path = project_root() / "results" / "bench" / "bench.json"
        bench = json.loads(path.read_text()) if path.exists() else {}
    per = ((bench or {}).get("notebooks", {}).get(profile) or {}).get("per_notebook", {})
    return pd.Series({name: t["peak_rss_mb_with_workers"] / 1024 for name, t in per.items()
                      if t.get("peak_rss_mb_with_workers")}, dtype=float, name="GiB")


def read_costs(profile: str = "full", results_dir: str | os.PathLike = "results") -> dict[str, pd.DataFrame]:
    """What the cost page reads rather than trains: every other training page's stage seconds from its last run
    (`stage_times`) and each page's peak memory in its last cold run of the full profile (`cold_peaks`)."""
    from .registry import PAGES

    others = [p.name for p in PAGES if p.trains and p.name != "robustness_and_cost"]
    return {"stage_times": published_costs(others, profile, results_dir),
            "cold_peaks": cold_peaks("full").rename_axis("page").reset_index()}


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
        res = read(page, profile, results_dir)
        workers = (res.provenance.get("run_options") or {}).get("workers", 1)
        serial = float(part.loc[part["stage"] == "stage1", "seconds"].sum())
        rest = float(part["seconds"].sum()) - serial
        rows.append({"page": page, "stage 1 min": serial / 60, "other stages, worker min": rest / 60,
                     "workers": workers, "low: all busy, min": (serial + rest) / (workers + 1) / 60,
                     "high: stage 1 apart, min": (serial + rest / workers) / 60,
                     LONGEST: longest_stage(res.table("epochs") if (res.dir / "epochs.csv").exists() else None),
                     "commit": part["git_commit"].iloc[0]})
    return pd.DataFrame(rows, columns=["page", "stage 1 min", "other stages, worker min", "workers", "low: all busy, min",
                                       "high: stage 1 apart, min", LONGEST, "commit"])


LONGEST = "longest stage"


def longest_stage(epochs: pd.DataFrame | None) -> str:
    """The stage that ran the most epochs in a page's epochs table, in words ("expert add: 1,673 epochs"); "" without
    one. Under the convergence rule a stage trains until patience stops it, so this is what the page's rate costs."""
    if epochs is None or not len(epochs) or "epochs run" not in epochs:
        return ""
    top = epochs.loc[epochs["epochs run"].idxmax()]
    return f"{top['stage']}: {int(top['epochs run']):,} epochs"


def timed_runs(params: dict) -> int:
    """Runs a page made, from its recorded parameters (an older run's switches read as today's `extensions`): n_seeds
    on the claims' setting, `split_seeds` on each other split, `extension_seeds` on each digit variant and on each
    other step mix of Task 2 (compared by its shares), and, in runs that had it, `stage1_beside_seeds` on the stage-1
    extension (a parameter a run predates counts as it did then: n_seeds on the stage-1 extension, `extension_seeds`
    on every extension)."""
    params = upgraded(params)
    n = int(params.get("n_seeds") or 1)
    each = int(params.get("extension_seeds") or n)
    ext = [e for e in dict.fromkeys(params.get("extensions") or []) if e != params.get("split", "iid")]
    splits = [e for e in ext if ":" not in e and e not in ("attribution", "crossed_splits")]
    mix = params.get("step_mix")
    variants = [e for e in ext if e.startswith("digits:") or e.startswith("mix:") and not (
        mix and parse_mix(mix_from_words(e[4:])) == parse_mix(mix))]
    beside = bool(params.get("stage1_paper_beside")) and str(params.get("head_lr_grid")) != "none"
    return (n + beside * int(params.get("stage1_beside_seeds") or n)
            + len(splits) * int(params.get("split_seeds") or each) + len(variants) * each)
