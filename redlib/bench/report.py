"""Judging a bench.json: each page's cold timings, whether they ran today's page, and the targets met or missed."""

from __future__ import annotations

import json
from pathlib import Path


import pandas as pd

from ..book.costs import LONGEST, cold_peaks, timed_runs  # noqa: F401 (cold_peaks: read where the bench reports)
from ..book.registry import BOOK_MINUTES, BUDGETS, PAGES, config_for, stage_kinds
from ..configs.red import upgraded
from ..core.config import ParameterError
from .cold import cold_book, committed, disturbed, load, resumed  # noqa: F401 (load: the bench's reader, for its callers)

WHERE = "why missed"  # the targets table's column: where a missed budget's time (or memory) goes
# What each cache kind holds (a kind is "<task>/<stage>"): the RED pipeline's stages and the pages' own.
STAGE_WHAT = stage_kinds()


def route_costs(path: Path | None = None) -> pd.DataFrame:
    """The README's routes to the book with what each cost on the bench machine (the committed bench), for the
    intro: empty when no bench has been run."""
    bench = load(path) if path else committed()
    if not bench:
        return pd.DataFrame()
    nb = bench.get("notebooks", {})

    def cold(profile: str) -> str:  # the cold book (cold.cold_book), else the whole bench's own pass of the profile
        book, block = cold_book(bench, profile), nb.get(profile) or {}
        whole = block.get("book_build_seconds") and not block.get("total_from_parts") and block.get("total_seconds")
        if book is None and not whole:
            return "not measured in one cold pass yet"
        minutes = book["min"] if book else whole / 60
        return f"{minutes:.0f} min from an empty stage cache" if minutes >= 1 else f"{minutes * 60:.0f} s"

    tc = bench.get("smoke_test_command") or {}
    test, test_at = tc.get("total_seconds"), str(tc.get("git_commit") or bench.get("git_commit", ""))[:7]
    full = nb.get("full") or {}
    build = full.get("book_build_seconds")
    reading = [p.name for p in PAGES if not p.trains]  # executed at every build, from the results files
    timed = [full.get("per_notebook", {}).get(n, {}).get("wall_seconds") for n in reading]
    html = (f"{build + sum(timed):.0f} s: the reading pages {sum(timed):.0f} s, the build {build:.0f} s"
            if build and None not in timed else f"{build:.0f} s of building, the reading pages not timed" if build else "-")
    machine = bench.get("machine", {})
    where = f"{machine.get('cpu_count', '?')} cores, commit {str(bench.get('git_commit', ''))[:7]} and later updates"
    rows = [("make html", "the committed experiment pages as HTML, the reading pages executed from their results",
             html),
            ("make book PROFILE=smoke", "every notebook on tiny sizes, then the book", cold("smoke")),
            ("make book", "every notebook under the paper's protocol: this book", cold("full")),
            ("make test", "unit tests, nbval on the smoke notebooks, the book in a browser",
             f"{test / 60:.0f} min (timed at {test_at})" if test else "-")]
    return pd.DataFrame(rows, columns=["command", "what it does", f"cost measured by make bench ({where})"])


def target(what: str, measured: float, goal: float, higher_is_better: bool, unit: str, judged: bool = True,
           cause: str = "") -> dict:
    """Whether a number meets its target (or, when not judged, a reference point), by how much it misses, and where
    the time of a miss goes (`cause`, when known)."""
    met = measured >= goal if higher_is_better else measured <= goal
    gap = "" if met else f"missed by {abs(measured - goal):.3g} {unit} ({abs(measured - goal) / goal:.1%})"
    digits = 3 if abs(measured - goal) < 0.01 else 2  # enough digits to tell a near miss from a hit
    return {"target": what, "goal": f"{'>=' if higher_is_better else '<='} {goal} {unit}",
            "measured": f"{measured:.{digits}f} {unit}",
            "met": ("yes" if met else "no") if judged else f"reference: {'yes' if met else 'no'}", "gap": gap,
            WHERE: "" if met else cause}


CURRENT = "today's profile"
# what a timed page's stage cache held at its start (the bench records "empty ...", "shared: ...", "warm: ...")
STARTED_FROM = {"empty": "empty cache", "shared": "earlier pages' stages",
                "warm": "copied stages it builds on"}
PEAK_GIB, KERNEL_GIB = "peak GiB, kernel + workers", "its kernel alone, GiB"  # the notebooks table's memory columns


def notebooks(bench: dict) -> pd.DataFrame:
    """Cold wall time (median, min-max over passes) and peak memory of each notebook (kernel and workers at once, the
    book's one value; its kernel alone beside it), per profile."""
    rows = []
    for prof, block in bench.get("notebooks", {}).items():
        for name, t in block["per_notebook"].items():
            w = t["wall"]
            rows.append({"profile": prof, "notebook": name, "cold passes": w["reps"],
                         "cold wall s (median, min-max)": f"{t['wall_seconds']:.1f}"
                         + (f" ({w['min']:.1f}-{w['max']:.1f})" if w["reps"] > 1 else ""),
                         PEAK_GIB: (t.get("peak_rss_mb_with_workers") or float("nan")) / 1024,
                         KERNEL_GIB: t["peak_rss_mb"] / 1024,
                         "commit": (t.get("git_commit") or "")[:7],
                         "started from": "its own stopped pass" if resumed(t) else STARTED_FROM.get(
                             str(t.get("cache_at_start") or "empty").split(":")[0].split(" ")[0], "not recorded"),
                         "disturbed": disturbed(t),
                         CURRENT: current_profile(name, prof, t.get("parameters")),
                         SAME_CODE: same_code(name, t) if prof == "full" else ""})
    return pd.DataFrame(rows)


SAME_CODE = "ran as published"


def same_code(notebook: str, timing: dict) -> str:
    """Whether a full-profile timing ran what the published page ran: by the claims the timed run computed where it
    recorded them (exact), else by git, the notebook and redlib at the two commits; or why it cannot tell."""
    import subprocess

    from ..core.paths import project_root

    root, path = project_root(), project_root() / "results" / "full" / notebook / "claims.json"
    doc = json.loads(path.read_text()) if path.exists() else {}
    published, timed = doc.get("provenance", {}).get("git_commit"), timing.get("git_commit")
    if timing.get("claims_sha256") and doc.get("sha256", {}).get("claims"):
        same = timing["claims_sha256"] == doc["sha256"]["claims"]
        return "yes (same claims)" if same else "no (other claims)"
    if not published or not timed or "+" in published + timed:
        return "cannot tell"
    if published == timed:
        return "yes (same commit)"
    diff = subprocess.run(["git", "diff", "--quiet", timed, published, "--", "redlib", f"notebooks/{notebook}.py"],
                          cwd=root, capture_output=True)
    if diff.returncode not in (0, 1):
        return "cannot tell"
    return "yes (same code)" if diff.returncode == 0 else f"no: code changed by {published[:7]}"


# parameters removed with the learning-rate grid (issue 62), and the value that left a run as every run is now; the
# grid's other knobs acted only through these
RETIRED = {"head_lr_grid": ("none", None), "stage1_paper_beside": (False, None)}
RETIRED_WITH = ("head_lr_extend", "lr_rung", "lr_keep", "stage1_beside_seeds")


def current_profile(notebook: str, profile: str, timed: dict | None) -> str:
    """Whether a timing ran the page's profile as it is now: "yes", "no: <changed parameters>" or "not recorded"."""
    if timed is None:
        return "not recorded"
    try:
        cls = config_for(notebook)
        now = cls.from_params(profile=profile).asdict()
        timed = cls.listed(upgraded(timed))  # older runs recorded lists as strings, and extensions as five switches
    except ParameterError:
        return "page no longer exists"
    ignored = ("results_dir", "device", "workers")  # where results go, and knobs that cannot change a number
    # a switch (or list of extensions) added since the timing and off (empty) now leaves the run as it was timed
    new_and_off = {k for k in now if k not in timed and (now[k] is False or now[k] == [])}
    # a parameter removed since, at the value that is now the only behaviour, leaves it so too
    retired = {k for k in timed if k not in now and (k in RETIRED_WITH or timed[k] in RETIRED.get(k, ()))}
    changed = sorted(k for k in set(now) | set(timed) if k not in ignored and k not in new_and_off | retired
                     and now.get(k) != timed.get(k))
    return "yes" if not changed else "no: " + ", ".join(changed)


def with_cold_times(bench: dict | None, est: pd.DataFrame, nbt: pd.DataFrame | None = None) -> pd.DataFrame:
    """The pages' training-time ranges (`costs.cold_estimates`) beside their cold full-profile timing, where that
    timing ran today's profile and what the page publishes (else blank: an older run says nothing of today's).
    `nbt` is `notebooks(bench)` where the caller has it."""
    if nbt is None:
        nbt = notebooks(bench) if bench else pd.DataFrame()
    today = {}
    if len(nbt):
        full = nbt[(nbt["profile"] == "full") & (nbt[CURRENT] == "yes") & nbt[SAME_CODE].str.startswith("yes")]
        per_nb = bench["notebooks"]["full"]["per_notebook"]
        today = {n: per_nb[n]["wall_seconds"] / 60 for n in full["notebook"]}
    return est.assign(**{"cold, timed, min": [today.get(p, float("nan")) for p in est["page"]]})


def targets(bench: dict, nbs: pd.DataFrame | None = None, est: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every target the bench judges (cache speed-ups at the pipeline's batch, book, each page budget, memory, test
    command); `nbs` is `notebooks(bench)` where the caller has it, `est` the published runs' `cold_estimates`."""
    goals, rows = bench["targets"], []
    if "prefix_cache" in bench:
        pc = bench["prefix_cache"]
        for r in pc["embedded"]:
            rows.append(target(f"frozen-prefix speed-up, embedded backbone, batch {r['batch']}", r["speedup"],
                               goals["embedded_cache_speedup"], True, "x", judged=r["batch"] == pc["pipeline_batch"]))
        for r in (r for r in pc["qwen_shaped"] if r["blocks"] == 28):
            rows.append(target(f"frozen-prefix speed-up, Qwen3-0.6B-shaped (28 blocks), batch {r['batch']}", r["speedup"],
                               goals["qwen_cache_speedup"], True, "x", judged=r["batch"] == pc["pipeline_batch"]))
    if (book := cold_book(bench)) is not None:  # the book's one cold pass, never pages timed apart
        segments = len(book["segments"])
        how = f"one cold pass at {book['commit']} on {book['cpu']}, {segments} segment{'s' * (segments > 1)}"
        rows.append(target(f"whole full-profile book ({how})", book["min"], BOOK_MINUTES, False, "min",
                           cause=book_cause(bench["notebooks"]["full"]["per_notebook"])))
    nbs = notebooks(bench) if nbs is None else nbs
    rows += page_budgets(bench, est)
    if len(peaks := cold_peaks("full", bench)):
        top = nbs[(nbs["profile"] == "full") & (nbs["notebook"] == peaks.idxmax())].iloc[0]
        rows.append(target("peak memory of any page, full profile (kernel and workers at once)", peaks.max(),
                           goals["peak_rss_gib"], False, "GiB", cause=peak_cause(top)))
    if "smoke_test_command" in bench:
        rows.append(target("whole smoke test command (make test)", bench["smoke_test_command"]["total_seconds"] / 60,
                           goals["smoke_test_minutes"], False, "min"))
    return pd.DataFrame(rows)


def page_budgets(bench: dict, est: pd.DataFrame | None = None) -> list[dict]:
    """Each page budget of the registry against the pages' last cold full-profile times (a budget some of whose pages
    were never timed is left out; one timed with an older profile says so and, where `est` (`cold_estimates`) has
    the page, what that page's published run implies; one timed beside other processes says how much CPU they took)."""
    per_nb = bench.get("notebooks", {}).get("full", {}).get("per_notebook", {})
    rows = []
    for b in BUDGETS:
        if not all(p in per_nb for p in b.pages):
            continue
        stale = [p for p in b.pages if current_profile(p, "full", per_nb[p].get("parameters")) != "yes"]
        what = f"cold full profile of {' + '.join(b.pages)}" + (
            f" (timed before today's profile of {', '.join(stale)})" if stale else "")
        cause = "; ".join(where_time_goes(p, per_nb[p]) for p in b.pages) + "".join(longest(p, est) for p in b.pages)
        serial = sum(serial_stage_seconds(per_nb[p]) for p in b.pages) / 60
        if serial > b.minutes:
            cause += f"; stage 1 alone (no worker shortens it) takes {serial:.1f} min, over the budget"
        low = [p for p in b.pages if resumed(per_nb[p])]
        if low:
            what += f" (at least: {', '.join(low)} resumed a stopped pass of its own)"
        cause += "".join(implied(p, est) for p in stale + [p for p in low if p not in stale])
        cause += "".join(f"; {p}: {d} (its times read high)" for p in b.pages if (d := disturbed(per_nb[p])))
        rows.append(target(what, sum(per_nb[p]["wall_seconds"] for p in b.pages) / 60, b.minutes, False, "min",
                           cause=cause))
    return rows


def _estimate(page: str, est: pd.DataFrame | None) -> pd.Series | None:
    """A page's `cold_estimates` row, or None where there is none."""
    row = est[est["page"] == page] if est is not None else []
    return row.iloc[0] if len(row) else None


def longest(page: str, est: pd.DataFrame | None) -> str:
    """The stage of a page's published run that trained the most epochs (a `cold_estimates` row), as a cause."""
    r = _estimate(page, est)
    return f"; {page}'s longest stage, {r[LONGEST]}" if r is not None and r.get(LONGEST) else ""


def implied(page: str, est: pd.DataFrame | None) -> str:
    """What a page's published run implies of its cold time (a `cold_estimates` row), for a timing that is stale."""
    r = _estimate(page, est)
    if r is None:
        return ""
    return (f"; {page} as published ({r['commit']}): {r['low: all busy, min']:.0f}-"
            f"{r['high: stage 1 apart, min']:.0f} min, stage 1 {r['stage 1 min']:.0f}")


def book_cause(per_nb: dict[str, dict], shown: int = 4) -> str:
    """Where the whole book's cold time goes: its largest pages in minutes, and stage 1's minutes over all pages (the
    floor no small-stage worker shortens), said to exceed the budget where it does."""
    largest = sorted(per_nb.items(), key=lambda kv: -kv[1]["wall_seconds"])[:shown]
    serial = sum(serial_stage_seconds(t) for t in per_nb.values()) / 60
    text = "largest pages " + ", ".join(f"{name} {t['wall_seconds'] / 60:.0f} min" for name, t in largest)
    text += f"; stage 1 takes {serial:.0f} min of it"
    if serial > BOOK_MINUTES:
        text += ", more than the budget by itself"
    return text


def peak_cause(row: pd.Series) -> str:
    """Which notebook the peak memory is, and how much of it its kernel holds alone (the rest: its workers, at once)."""
    tree, kernel = row[PEAK_GIB], row[KERNEL_GIB]
    return (f"{row['notebook']} ({row['profile']} profile): {tree:.2f} GiB, of which its kernel alone peaks at "
            f"{kernel:.2f} GiB (the rest: its workers, at once)")


def serial_stage_seconds(timing: dict) -> float:
    """Seconds a page spends in stage 1 (kind `<task>/stage1`), which no small-stage worker shortens: its runs train
    one after another in the page's process, or (Task 1, Task 2) two at a time in workers, each run then counting
    its share of the time they overlapped (`experiments/stage1_runs.py`), so the sum is stage 1's wall time."""
    return sum(s for k, s in (timing.get("stage_seconds") or {}).items() if k.rpartition("/")[2] == "stage1")


def where_time_goes(page: str, timing: dict) -> str:
    """A page's cold time in words: its runs (seeds x settings), minutes per run, and its two largest stage kinds."""
    runs, wall = timed_runs(timing.get("parameters") or {}), timing["wall_seconds"]
    top = sorted((timing.get("stage_seconds") or {}).items(), key=lambda kv: -kv[1])[:2]
    stages = ", ".join(f"{k} {s / wall:.0%}" for k, s in top)
    return f"{page}: {runs} run{'s' * (runs > 1)} of {wall / runs / 60:.1f} min" + (f", largest stages {stages}" if top else "")


def stage_kinds(bench: dict) -> tuple[str, float, pd.DataFrame]:
    """The slowest notebook of the last profile timed (full if timed), its cold seconds, and its time by stage kind."""
    prof = "full" if "full" in bench["notebooks"] else list(bench["notebooks"])[-1]
    per_nb = bench["notebooks"][prof]["per_notebook"]
    slowest = max(per_nb, key=lambda k: per_nb[k]["wall_seconds"])
    wall, stage_s = per_nb[slowest]["wall_seconds"], per_nb[slowest].get("stage_seconds") or {}
    return slowest, wall, pd.DataFrame([{"stage kind": k, "what": STAGE_WHAT.get(k.rpartition("/")[2], ""),
                                         "seconds": v, "share of notebook": f"{v / wall:.0%}"}
                                        for k, v in sorted(stage_s.items(), key=lambda kv: -kv[1])])
