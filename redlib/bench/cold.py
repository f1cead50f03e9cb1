"""The cold book: one number for what the whole full-profile book costs from an empty stage cache on this machine.

It is the sum of each page's last cold run (each timed at its own commit, `make bench BENCH_ARGS=--notebooks ...`)
plus the strict HTML build, as the committed bench recorded them. The book plan (`make book`), the Speed page and
the README say this one number; an estimate from the published runs' stage seconds is labelled as one and never
stands for it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..book.registry import BY_NAME, NOTEBOOKS
from ..core.paths import project_root

README_MARK = re.compile(r"<!-- cold-book -->.*?<!-- /cold-book -->", re.S)


def load(path: Path) -> dict[str, Any] | None:
    """The bench report at `path`, or None when no bench has been run."""
    return json.loads(path.read_text()) if path.exists() else None


def committed() -> dict[str, Any] | None:
    """The committed bench report (results/bench/bench.json), or None when no bench has been run."""
    return load(project_root() / "results" / "bench" / "bench.json")


def disturbed(timing: dict) -> str:
    """What else ran beside a cold timing: the CPU other processes took while it ran (where it was measured and is
    over 2% of the page's time), or the note recorded with it; empty for an undisturbed run."""
    other = timing.get("other_cpu_seconds")
    if timing.get("disturbed"):
        return timing["disturbed"]
    if other is not None and other > 0.02 * timing["wall_seconds"]:
        return f"other processes took {other:.0f} CPU-s while it ran"
    return ""


def resumed(timing: dict) -> str:
    """How a timing resumed a stopped cold pass of its own page (the note recorded with it; its wall time covers only
    what that pass left, so it reads low); empty for a run from start to end."""
    return timing.get("resumed") or ""


def cold_seconds(profile: str) -> tuple[dict[str, float], str]:
    """Each page's cold seconds for a profile as the committed bench measured them, and which commit it timed last
    ({} and "" when there is no bench)."""
    bench = committed()
    per = ((bench or {}).get("notebooks", {}).get(profile) or {}).get("per_notebook", {})
    commits = sorted((t.get("measured_at", ""), t.get("git_commit") or "") for t in per.values())
    return {name: t["wall_seconds"] for name, t in per.items()}, (commits[-1][1][:12] if commits else "")


def cold_book(bench: dict[str, Any] | None, profile: str = "full") -> dict[str, Any] | None:
    """The cold book of a profile: minutes in all (every page's last cold run plus the strict build), the build's,
    and per page its minutes, the commit it was timed at and what else ran beside it; None when not every page of
    the book has a cold run, or no build was timed."""
    block = ((bench or {}).get("notebooks", {}) or {}).get(profile) or {}
    per, build = block.get("per_notebook", {}), block.get("book_build_seconds")
    if build is None or any(n not in per for n in NOTEBOOKS):
        return None
    pages = [{"page": n, "min": per[n]["wall_seconds"] / 60, "commit": (per[n].get("git_commit") or "?")[:7],
              "disturbed": disturbed(per[n]), "resumed": resumed(per[n])} for n in NOTEBOOKS]
    return {"min": sum(p["min"] for p in pages) + build / 60, "build min": build / 60, "pages": pages}


def cold_book_words(book: dict[str, Any] | None, shown_min: float = 1.0) -> str:
    """The cold book in one sentence's worth: its minutes, each page of at least `shown_min` minutes with its commit,
    the rest and the build together, and the pages timed beside other processes (their times read high)."""
    if book is None:
        return "not measured (`make bench` times every page cold)"
    big = [p for p in book["pages"] if p["min"] >= shown_min]
    rest = sum(p["min"] for p in book["pages"] if p["min"] < shown_min) + book["build min"]
    beside = [p["page"] for p in book["pages"] if p["disturbed"]]
    low = [p["page"] for p in book["pages"] if p.get("resumed")]
    parts = [f"{p['page']} {p['min']:.0f} ({p['commit']})" for p in big]
    parts.append(f"the other pages and the strict build {rest:.0f}" if big else
                 f"every page under {shown_min:g} min, at " + ", ".join(sorted({p["commit"] for p in book["pages"]})))
    return (("at least " if low else "") + f"{book['min']:.0f} min: " + ", ".join(parts)
            + (f"; timed beside other processes, so reading high: {', '.join(beside)}" if beside else "")
            + (f"; resumed from a stopped pass of its own, so reading low: {', '.join(low)}" if low else ""))


def cold_answer(book: dict[str, Any] | None, budget_min: float) -> str:
    """The Speed page's answer: whether the cold book meets its budget, and the page that costs most, in a sentence."""
    if book is None:
        return "Not measured yet: `make bench` times every page cold."
    dearest = max(book["pages"], key=lambda p: p["min"])
    low = any(p.get("resumed") for p in book["pages"])  # a page's time reads low: the sum is a lower bound
    verdict = ("misses" if book["min"] > budget_min else "may miss" if low else "meets")
    return (f"The whole book, cold on the 2-core machine, takes {'at least ' if low else ''}{book['min']:.0f} min: "
            f"it {verdict} its budget of "
            f"{budget_min:.0f} min. What costs most is {_title(dearest['page'])} ({dearest['min']:.0f} min, "
            f"{dearest['min'] / book['min']:.0%} of the book)"
            + (", timed beside other processes, so reading high" if dearest["disturbed"] else "") + ".")


def _title(page: str) -> str:
    """A page as a reader knows it: its title in the book (a name the registry does not know, as it is)."""
    return f"“{BY_NAME[page].title}”" if page in BY_NAME else page


def cold_line(profile: str) -> str:
    """The book plan's line on what an empty-cache run of the profile costs, as the committed bench measured it."""
    book = cold_book(committed(), profile)
    if book is None:
        cold, commit = cold_seconds(profile)
        total = sum(cold.values())
        return (f"  cold cost (empty cache) of the timed pages as the committed bench measured them at {commit or 'no commit'}: "
                + (f"about {total / 60:.0f} min on {os.cpu_count()} cores" if total else "not measured"))
    return f"  cold cost (empty cache), the committed bench's cold book on {os.cpu_count()} cores: {cold_book_words(book)}"


def readme_text(bench: dict[str, Any] | None) -> str:
    """The README's cold-book sentence, between its markers."""
    return ("<!-- cold-book -->The cold book (`make book` from an empty stage cache, on the 2-core machine, as "
            f"`results/bench/bench.json` records it): {cold_book_words(cold_book(bench))}.<!-- /cold-book -->")


def update_readme(bench: dict[str, Any] | None, readme: Path) -> bool:
    """Rewrite the README's cold-book sentence from `bench`; whether it changed."""
    text = readme.read_text()
    new = README_MARK.sub(lambda _: readme_text(bench), text)
    if new != text:
        readme.write_text(new)
    return new != text
