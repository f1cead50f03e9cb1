"""The cold book: one number for what the whole full-profile book costs from an empty stage cache on this machine.

It is the book's one cold pass (`cold_pass`: every page and the strict build from an empty stage cache, at one
commit, on one machine, in as many segments as sessions' ends made), as the committed bench recorded it. The book
plan (`make book`), the Speed page and the README say this one number; pages re-timed apart
(`make bench BENCH_ARGS=--notebooks ...`) and the estimate from the published runs' stage seconds are labelled as
what they are and never add up to it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..book.registry import BY_NAME, NOTEBOOKS
from ..core.paths import project_root
from . import cold_pass

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


def cold_book(bench: dict[str, Any] | None, profile: str = "full") -> dict[str, Any] | None:
    """The cold book of a profile: the book's one complete cold pass (`cold_pass.book`: minutes in all, the build's,
    per page, its commit, CPU, kernels and segments), each page with what else ran beside it; None when no pass has
    run every page and the build. Pages timed apart never add up to it."""
    book = cold_pass.book(((bench or {}).get("cold_pass") or {}).get(profile), list(NOTEBOOKS))
    if book is None:
        return None
    per = (((bench or {}).get("notebooks") or {}).get(profile) or {}).get("per_notebook", {})
    for p in book["pages"]:
        p["disturbed"] = disturbed(per[p["page"]]) if p["page"] in per else ""
    return book


def cold_book_words(book: dict[str, Any] | None, shown_min: float = 1.0) -> str:
    """The cold book in one sentence's worth: its minutes, the pass's commit, CPU, kernels and segments, each page of
    at least `shown_min` minutes, the rest and the build together, and the pages timed beside other processes."""
    if book is None:
        return "not measured in one cold pass yet (`make bench BENCH_ARGS=\"--publish --cache DIR\"` runs one)"
    big = [p for p in book["pages"] if p["min"] >= shown_min]
    rest = sum(p["min"] for p in book["pages"] if p["min"] < shown_min) + book["build min"]
    beside = [p["page"] for p in book["pages"] if p["disturbed"]]
    n = len(book["segments"])
    segments = ", ".join(f"{m} min from {start[:16]}" for start, m in book["segments"])
    where = (f"one cold pass at {book['commit']} on {book['cpu']} ({book['matmul']} kernels), "
             + ("in one segment" if n == 1 else f"in {n} segments ({segments})"))
    parts = [f"{p['page']} {p['min']:.0f}" for p in big] + [f"the other pages and the strict build {rest:.0f}"]
    return (f"{book['min']:.0f} min in {where}: " + ", ".join(parts)
            + (f"; timed beside other processes, so reading high: {', '.join(beside)}" if beside else ""))


def cold_answer(book: dict[str, Any] | None, budget_min: float) -> str:
    """The Speed page's answer: whether the cold book meets its budget, and the page that costs most, in a sentence."""
    if book is None:
        return ("Not measured in one cold pass yet: `make bench BENCH_ARGS=\"--publish --cache DIR\"` runs every page "
                "cold in one pass and re-publishes the book.")
    dearest = max(book["pages"], key=lambda p: p["min"])
    verdict = "misses" if book["min"] > budget_min else "meets"
    return (f"The whole book, in one cold pass on the 2-core machine at {book['commit']}, takes {book['min']:.0f} min: "
            f"it {verdict} its budget of {budget_min:.0f} min. What costs most is {_title(dearest['page'])} "
            f"({dearest['min']:.0f} min, {dearest['min'] / book['min']:.0%} of the book)"
            + (", timed beside other processes, so reading high" if dearest["disturbed"] else "") + ".")


def _title(page: str) -> str:
    """A page as a reader knows it: its title in the book (a name the registry does not know, as it is)."""
    return f"“{BY_NAME[page].title}”" if page in BY_NAME else page


def cold_line(profile: str) -> str:
    """The book plan's line on what an empty-cache run of the profile costs, as the committed bench measured it."""
    return (f"  cold cost (empty cache) on {os.cpu_count()} cores, as the committed bench measured it: "
            f"{cold_book_words(cold_book(committed(), profile))}")


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
