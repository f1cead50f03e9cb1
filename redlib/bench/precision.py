"""Stage 1 in bf16 or in fp32: the comparison that decides the published default, by a rule fixed before it ran.

The rule (issue 76, written down here before any comparison ran): on seed 0 of Task 1 (iid) and of Task 2 (iid),
each page runs under both precisions (`-p n_seeds 1 -p extensions none`, every run from an empty stage cache of its
own, alone on the machine, at one commit). bf16 becomes the default only if every claim value of that seed moves by
less than the larger of 0.01 and that claim's sd over the published seeds; else fp32 stays. The comparison is shown
on the Speed page whichever way it goes (`bench --precision DIR`, resumable: a finished run is kept, a stopped one
resumes from its stage cache and says so).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from ..book.results import git_commit, jsonable
from ..core.paths import project_root
from ..core.settings import PRECISIONS
from ..speed import kernels
from .page import Table

PAGES = {"task1_addition": "Task 1", "task2_mixed": "Task 2"}  # notebook -> its name in the page's words
FLOOR = 0.01  # a claim value may move by less than max(FLOOR, its sd over the published seeds)
RULE = ("on seed 0 of Task 1 (iid) and Task 2 (iid), each page runs under both precisions; bf16 becomes the default "
        f"only if every claim value of that seed moves by less than the larger of {FLOOR} and that claim's sd over "
        "the published seeds, else fp32 stays")


def arm_dir(root: Path, page: str, precision: str) -> Path:
    """Where one run (page x precision) keeps its stage cache, notebook and results."""
    return root / f"{page}-{precision}"


def run_arm(root: Path, page: str, precision: str) -> dict[str, Any]:
    """One page under one precision on seed 0 (the claims' setting only), cold in its own stage cache; a run that
    finished at this commit is read back, a stopped one resumes from its cache (and its entry says so)."""
    where = arm_dir(root, page, precision)
    claims = where / "results" / "full" / page / "claims.json"
    entry_file = where / "entry.json"
    if entry_file.exists() and claims.exists():
        entry = json.loads(entry_file.read_text())
        if entry.get("git_commit") == git_commit():
            return entry
    where.mkdir(parents=True, exist_ok=True)
    cache = where / "cache"
    before = sum(1 for _ in cache.rglob("*.safetensors")) if cache.is_dir() else 0
    env = {**os.environ, "REDLIB_CACHE": str(cache), "REDLIB_PROGRESS": "0"}
    cmd = [sys.executable, "-m", "redlib", "run", page, "-p", "profile", "full", "-p", "n_seeds", "1",
           "-p", "extensions", "none", "-p", "precision", precision, "-p", "results_dir", str(where / "results"),
           "--output", str(where / f"{page}.ipynb")]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=project_root(), capture_output=True, text=True)
    if proc.returncode:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"{page} under {precision} failed with exit status {proc.returncode}: {last}")
    prov = json.loads(claims.read_text())["provenance"]
    entry = {"page": page, "precision": precision, "wall_seconds": time.perf_counter() - t,
             "stage_seconds": (prov.get("stages") or {}).get("train_seconds_by_kind", {}),  # loaded stages too
             "cache_at_start": before, "git_commit": prov.get("git_commit"), "matmul": prov.get("matmul"),
             "cpu": prov.get("machine", {}).get("cpu_model") or kernels.cpu_model(),
             "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    entry_file.write_text(json.dumps(jsonable(entry), indent=2) + "\n")
    return entry


def _seed0(claim: dict) -> Any:
    per_seed = claim.get("per_seed")
    return per_seed[0] if per_seed else claim.get("value")


def _sd(per_seed: list | None) -> Any:
    """The sd over the published seeds (elementwise for a list value); 0 with fewer than two seeds."""
    if not per_seed or len(per_seed) < 2:
        return 0.0
    if isinstance(per_seed[0], list):
        return [_sd([s[i] for s in per_seed]) for i in range(len(per_seed[0]))]
    numbers = [v for v in per_seed if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.stdev(numbers) if len(numbers) == len(per_seed) else 0.0


def pairs(a: Any, b: Any, sd: Any) -> list[tuple[float, float]]:
    """(how far it moved, its bound) for a claim value, elementwise for a list value (each element with its own sd);
    an unequal non-number moved infinitely far, an equal one not at all."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        sds = sd if isinstance(sd, list) and len(sd) == len(a) else [0.0] * len(a)
        return [p for x, y, s in zip(a, b, sds) for p in pairs(x, y, s)]
    bound = max(FLOOR, sd if isinstance(sd, (int, float)) else 0.0)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
        return [(0.0 if math.isnan(a) and math.isnan(b) else abs(a - b), bound)]
    return [(0.0 if a == b else math.inf, bound)]


def compare(fp32: dict, bf16: dict, published: dict) -> list[dict[str, Any]]:
    """One row per claim of a page: seed 0's value in fp32 and bf16, how far it moved against its bound (for a list
    value, the element nearest its bound), and whether every element is within its bound. `published` is the page's
    published claims (each claim's sd over its seeds)."""
    rows = []
    for cid, claim in fp32.items():
        a, b = _seed0(claim), _seed0(bf16.get(cid, {}))
        got = pairs(a, b, _sd((published.get(cid) or {}).get("per_seed")))
        d, bound = max(got, key=lambda p: p[0] / p[1])
        rows.append({"claim": cid, "fp32": a, "bf16": b, "moved": d, "bound": bound,
                     "within": all(m < bnd for m, bnd in got)})
    return rows


def decide(rows: list[dict[str, Any]]) -> str:
    """The rule: bf16 only if every claim value moved by less than its bound."""
    return "bf16" if rows and all(r["within"] for r in rows) else "fp32"


def run_comparison(root: Path, out: Path) -> dict[str, Any]:
    """Every run (resumable), then the comparison and the decision, written to <out>/precision.json."""
    root.mkdir(parents=True, exist_ok=True)
    arms = {page: {p: run_arm(root, page, p) for p in PRECISIONS} for page in PAGES}
    rows = []
    for page in PAGES:
        got = {p: json.loads((arm_dir(root, page, p) / "results" / "full" / page / "claims.json").read_text())["claims"]
               for p in PRECISIONS}
        published = json.loads((project_root() / "results" / "full" / page / "claims.json").read_text())["claims"]
        rows += [{"page": page, **r} for r in compare(got["fp32"], got["bf16"], published)]
    report = {"rule": RULE, "arms": arms, "claims": rows, "decision": decide(rows), "git_commit": git_commit(),
              "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (out / "precision.json").write_text(json.dumps(jsonable(report), indent=2) + "\n")
    return report


def load(path: Path) -> dict[str, Any] | None:
    """The comparison as `run_comparison` wrote it, or None where it has not run."""
    return json.loads(path.read_text()) if path.exists() else None


def _times(report: dict[str, Any]) -> pd.DataFrame:
    """Per page and precision: stage 1's minutes, every stage's, and the page's wall time (what the runs cost)."""
    rows = []
    for page, arms in report["arms"].items():
        for precision, arm in arms.items():
            secs = arm["stage_seconds"]
            rows.append({"page": PAGES.get(page, page), "precision": precision,
                         "stage 1 (min)": sum(v for k, v in secs.items() if k.endswith("/stage1")) / 60,
                         "all stages (min)": sum(secs.values()) / 60, "page (min)": arm["wall_seconds"] / 60,
                         "resumed": "yes" if arm["cache_at_start"] else "no", "commit": arm["git_commit"][:7],
                         "cpu": arm["cpu"]})
    return pd.DataFrame(rows)


def time_table(report: dict[str, Any] | None) -> Table | None:
    """What each run cost, as the Speed page shows it (None where the comparison has not run)."""
    if report is None:
        return None
    return Table("precision_time", _times(report), "Stage 1 in fp32 and in bf16: what each run cost (seed 0, the "
                 "claims' setting, each from an empty stage cache)")


def claims_table(report: dict[str, Any] | None) -> Table | None:
    """Every claim value of seed 0 under both precisions, how far it moved, its bound, and whether it is within."""
    if report is None:
        return None
    df = pd.DataFrame(report["claims"])
    df = df.assign(page=df["page"].map(lambda p: PAGES.get(p, p)), within=df["within"].map({True: "yes", False: "no"}))
    return Table("precision_claims", df,
                 f"Every claim value of seed 0 in fp32 and in bf16 ({len(df)} claims), how far it moved and its bound "
                 f"(the larger of {FLOOR} and its sd over the published seeds)")


def sentence(report: dict[str, Any] | None) -> str:
    """The comparison in one paragraph: the speed, the claims within their bounds, and what the rule decided."""
    if report is None:
        return ("The comparison has not run on this machine yet: `make bench BENCH_ARGS=\"--precision DIR\"` runs it "
                "(Task 1 and Task 2 on one seed, each under both precisions); until then stage 1 trains in fp32, as the "
                "published book does.")
    times = _times(report).set_index(["page", "precision"])
    speed = "; ".join(
        f"{page}: stage 1 {times.loc[(page, 'bf16'), 'stage 1 (min)']:.1f} min in bf16 against "
        f"{times.loc[(page, 'fp32'), 'stage 1 (min)']:.1f} in fp32, every stage "
        f"{times.loc[(page, 'bf16'), 'all stages (min)']:.1f} against "
        f"{times.loc[(page, 'fp32'), 'all stages (min)']:.1f}"
        for page in (PAGES.get(p, p) for p in report["arms"]))
    rows = report["claims"]
    inside = sum(r["within"] for r in rows)
    worst = max(rows, key=lambda r: r["moved"] / r["bound"])
    return (f"{speed}. {inside} of {len(rows)} claim values of seed 0 moved by less than their bound; the nearest to "
            f"its bound, `{worst['claim']}`, moved {worst['moved']:.4f} against {worst['bound']:.4f}. By the rule "
            f"fixed before the runs ({report['rule']}), the default is **{report['decision']}**.")
