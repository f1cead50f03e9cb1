"""The Speed page as one record: everything it shows, read from the bench file once and judged by `report`.

The notebook `speed_and_memory` keeps the prose and calls `speed_page()`; the tables, captions and glued phrases are
built here, so the page holds no lookups into bench.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ..book.costs import cold_estimates
from ..book.registry import BOOK_MINUTES, BUDGETS, NOTEBOOKS
from . import report
from .cold import cold_answer, cold_book, cold_book_words, load
from .levers import Lever, levers, prefix_cache

MARKDOWN_KEYS = ("sp_missed", "sp_stale", "sp_where")  # values holding `code` (names, commands): pasted as Markdown
GLUE_KEYS = ("sp_answer", "sp_met", "sp_judged", "sp_missed", "sp_stale", "sp_where", "sp_agreement",
             "sp_book", "sp_budget")


@dataclass(frozen=True)
class Table:
    """A table as a page shows it: its data and caption (`name`: the file `results.table` writes it to)."""

    name: str
    data: pd.DataFrame
    caption: str


@dataclass(frozen=True)
class SpeedPage:
    """What the Speed page shows, built once from one bench file (`bench` None: no bench has been run)."""

    path: Path
    bench: dict[str, Any] | None
    notebooks: pd.DataFrame  # report.notebooks: each page's cold timing, one row per profile and page
    estimates: pd.DataFrame  # costs.cold_estimates beside today's cold times
    targets: pd.DataFrame
    history: pd.DataFrame
    levers: dict[str, Lever] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return self.bench is not None


def speed_page(path: Path, profile: str = "full", results_dir: str = "results") -> SpeedPage:
    """Read the bench at `path` and every published page's record once, and judge the targets."""
    bench = load(path)
    nbt = report.notebooks(bench) if bench else pd.DataFrame()
    est = report.with_cold_times(bench, cold_estimates(list(NOTEBOOKS), profile, results_dir), nbt)
    own = est[est["page"] != "robustness_and_cost"]  # each page's own stages (robustness reuses other pages')
    tt = report.targets(bench, nbt, own if profile == "full" else None) if bench else pd.DataFrame()
    return SpeedPage(path, bench, nbt, est, tt, history(path.parent / "history.jsonl"), levers(bench))


def shower(results) -> Callable[..., None]:
    """The page's `show(table, precision=3, styler=None, folded=None)`: keep a table (a `Table` or a lever) in the
    page's results and show it, behind a click saying `folded` where one is given, or the line saying why it is
    missing; None shows nothing."""
    from IPython.display import Markdown, display

    from ..book import plots

    def show(table: Table | Lever | None, precision: int = 3, styler: Callable | None = None,
             folded: str | None = None) -> None:
        if table is not None and table.data is None:
            display(Markdown(table.caption))
        elif table is not None:
            results.table(table.name, table.data)
            sty = plots.styled(table.data, precision=precision, hide_index=True, caption=table.caption)
            sty = styler(sty) if styler else sty
            display(plots.behind_click(sty, folded) if folded else sty)

    return show


def machine_line(page: SpeedPage) -> str:
    """Where and at which commit the bench ran, and the steps of it that failed."""
    if not page.bench:
        return f"No benchmark has been run yet (`{page.path.name}` is missing): run `make bench`."
    b, m = page.bench, page.bench["machine"]
    line = (f"Measured on {m['platform']} ({m['cpu_count']} CPUs, {m['torch_threads']} torch threads), commit "
            f"`{b['git_commit'][:12]}`{' - smoke mode: tiny sizes, one repetition' if b['smoke'] else ''}.")
    if b.get("errors"):
        line += " **Steps of this bench run that failed:** " + "; ".join(f"{k}: {v}" for k, v in b["errors"].items())
    return line


def qwen_depths(page: SpeedPage) -> pd.DataFrame | None:
    """The frozen-prefix cache's speed-up and bound on the Qwen3-shaped stacks, one row per depth and batch (for
    `plots.speedup_vs_bound`), or None where it was not measured."""
    if not page.levers["prefix_cache"].measured:
        return None
    cache = prefix_cache(page.bench)
    return cache[cache["backbone"] == "Qwen3-shaped"].rename(columns={"blocks L": "blocks"})


def budgets() -> Table:
    """The cold-time budget of each group of pages, and of the whole book, from the page registry."""
    rows = [{"pages": " + ".join(b.pages), "budget, min": b.minutes} for b in BUDGETS]
    rows.append({"pages": "the whole book (every page and the HTML build)", "budget, min": BOOK_MINUTES})
    return Table("budgets", pd.DataFrame(rows), "Cold-time budgets")


def notebook_tables(page: SpeedPage) -> list[Table]:
    """Each profile's cold timings as the page shows them: columns that say nothing here (every run undisturbed, one
    pass each, "ran as published" outside the full profile) left out; the full profile first."""
    tables = []
    groups = dict(list(page.notebooks.groupby("profile", sort=False))) if len(page.notebooks) else {}
    for prof, part in sorted(groups.items(), key=lambda kv: kv[0] != "full"):
        part = part.drop(columns=["profile"] + ([report.SAME_CODE] if prof != "full" else []))
        if not part["disturbed"].any():
            part = part.drop(columns=["disturbed"])
        part = part.assign(**{report.CURRENT: part[report.CURRENT].map(changed_briefly)})
        if (part["cold passes"] == 1).all():
            part = part.drop(columns=["cold passes"]).rename(columns={"cold wall s (median, min-max)": "cold wall s"})
        tables.append(Table(f"notebooks_{prof}", part, f"Each notebook's cold run, {prof} profile"))
    return tables


def changed_briefly(current: str, shown: int = 3) -> str:
    """A "today's profile" cell in brief: "yes", or "no:" with the first `shown` changed parameters and how many more
    (the result file keeps the whole list)."""
    if not current.startswith("no: "):
        return current
    names = current.removeprefix("no: ").split(", ")
    return "no: " + ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def build_line(page: SpeedPage) -> str:
    """The strict HTML build's seconds and the whole book's minutes, per profile timed with a build."""
    built = {p: b for p, b in (page.bench or {}).get("notebooks", {}).items() if b["book_build_seconds"] is not None}
    if not built:
        return "The strict HTML build has not been timed."
    return ("Strict HTML build of the executed notebooks: "
            + ", ".join(f"{b['book_build_seconds']:.0f} s ({p})" for p, b in built.items())
            + "; whole book, notebooks and build: "
            + ", ".join(f"{b['total_seconds'] / 60:.1f} min ({p})" for p, b in built.items()) + ".")


def make_test_steps(page: SpeedPage) -> Table | None:
    """`make test` step by step as the bench timed it, or None where it was not timed."""
    st = (page.bench or {}).get("smoke_test_command")
    if not st:
        return None
    return Table("test_command", pd.DataFrame([{"command": s["command"], "seconds": round(s["seconds"], 1)}
                                               for s in st["steps"]]), "make test, step by step")


def where_time_goes(page: SpeedPage) -> tuple[str, Table | None]:
    """The slowest notebook's time by stage kind, with a line naming it."""
    if not (page.bench or {}).get("notebooks"):
        return "No notebook has been timed.", None
    slowest, wall, by_kind = report.stage_kinds(page.bench)
    return (f"`{slowest}` (cold: {wall / 60:.1f} min), time by stage kind:",
            Table("stage_seconds", by_kind, f"{slowest}, cold: seconds per stage kind") if len(by_kind) else None)


def cprofile_table(text: str) -> pd.DataFrame:
    """The rows of a pstats listing as a table: calls, own seconds, cumulative seconds, function."""
    row = re.compile(r"^\s*([\d/]+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+(.+)$")
    rows = [m.groups() for m in map(row.match, text.splitlines()) if m]
    return pd.DataFrame([{"calls": c, "own s": float(o), "cumulative s": float(cu), "function": fn}
                         for c, o, cu, fn in rows])


def cprofile(page: SpeedPage, shown: int = 15) -> Table | None:
    """The bench's cProfile of one Task 1 run, its `shown` functions with the most cumulative time."""
    prof = (page.bench or {}).get("profile")
    if not prof:
        return None
    return Table("cprofile", cprofile_table(prof["cprofile"]).head(shown),
                 f"cProfile of {prof['what']}: the {shown} functions with the most cumulative time")


def history(path: Path) -> pd.DataFrame:
    """The headline numbers of every full bench run (history.jsonl beside bench.json), one row each."""
    if not path.exists():
        return pd.DataFrame()
    return pd.DataFrame([json.loads(line) for line in path.read_text().splitlines() if line.strip()])


def history_table(page: SpeedPage) -> Table | None:
    """The recorded full bench runs side by side, one column each (None where none was recorded)."""
    if not len(page.history):
        return None
    runs = page.history.set_index("git_commit").drop(columns=["started_at"]).T
    runs.columns = [f"run {i + 1} ({c})" for i, c in enumerate(runs.columns)]
    runs = runs.rename(index={"full book min": "whole book cold, min (that run's profile)",
                              "test command min": "make test, min (that run's tests)",
                              "peak memory GiB": "largest page's peak, GiB (that run; kernel alone before workers "
                                                 "were sampled)"})
    return Table("history", runs, "Headline numbers of every recorded full bench run")


def short(target: str) -> str:
    """A target's name without its parentheses (the targets table keeps the whole name)."""
    return re.sub(r" \((?:[^()]|\([^()]*\))*\)", "", target)


def found(page: SpeedPage) -> dict[str, object]:
    """The numbers and phrases the Speed page's answer and conclusions paste in (glued as `sp_*`, the levers' phrases
    among them): targets met and missed, timings out of date, where the slowest page's time goes, run-to-run
    agreement ('none' where there is nothing)."""
    from IPython.display import Markdown

    phrases = {lv.glue: lv.phrase for lv in page.levers.values() if lv.glue}
    if not page.bench:
        return ({k: Markdown("no bench run yet") if k in MARKDOWN_KEYS else "no bench run yet" for k in GLUE_KEYS}
                | phrases | {"sp_budget": BOOK_MINUTES})
    bench, tt, nbs, hist = page.bench, page.targets, page.notebooks, page.history
    judged = tt[tt["met"].isin(["yes", "no"])]
    pc = bench.get("prefix_cache")
    stale = nbs[nbs[report.CURRENT] != "yes"] if len(nbs) else nbs
    where = "not timed"
    if bench.get("notebooks"):
        slowest, wall, by_kind = report.stage_kinds(bench)
        top2 = by_kind.head(2)
        if len(top2) == 2:
            where = (f"in `{slowest}`, the stages " + " and ".join(f"`{k}` ({w})" for k, w in zip(
                top2["stage kind"], top2["what"])) + f" take {top2['seconds'].sum() / wall:.0%} of its cold time")
    cols = [c for c in hist.columns if pc and c.startswith("speed-up") and c.endswith(f"batch {pc['pipeline_batch']}")]
    values = {
        "sp_answer": cold_answer(cold_book(bench), BOOK_MINUTES), "sp_budget": BOOK_MINUTES,
        "sp_met": int((judged["met"] == "yes").sum()), "sp_judged": len(judged),
        "sp_missed": "; ".join(f"{short(t['target'])}: {t['gap']}"
                               for t in judged[judged["met"] == "no"].to_dict("records")) or "no target",
        "sp_stale": "; ".join(f"{prof}: " + ", ".join(f"`{n}`" for n in part["notebook"])
                              for prof, part in stale.groupby("profile", sort=False)) or "no timing",
        "sp_where": where,
        "sp_agreement": "; ".join(f"{c.removeprefix('speed-up ')}: {hist[c].min():.2f}x to {hist[c].max():.2f}x"
                                  for c in cols) if len(hist) > 1 and cols else "fewer than two recorded runs",
        "sp_book": cold_book_words(cold_book(bench)),
    }
    return {k: Markdown(v) if k in MARKDOWN_KEYS else v for k, v in values.items()} | phrases
