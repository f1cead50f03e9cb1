"""One cold pass of the book: one measurement, from an empty stage cache, at one commit, on one machine.

`make bench BENCH_ARGS="--publish --cache DIR"` runs every page in the book's order into an empty stage cache and
records the pass in DIR/cold_pass.json as it goes: the commit, the CPU and its kernel path, and each *segment* (a
session's end may stop a pass; the same command at the same commit on the same machine resumes it from DIR, whose
stages only this pass trained). A heartbeat keeps the running segment's end, so a stopped segment's time still
counts. The cold time is the sum of every segment; each page's time is what its segments spent on it. The committed
bench keeps the record (`bench.json`'s `cold_pass`), and the Speed page and the README state that one number.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from ..core.config import ParameterError

RECORD = "cold_pass.json"
HEARTBEAT_S = 30.0
_LOCK = threading.Lock()  # the heartbeat and the pass change and save the record one at a time


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def machine() -> dict[str, Any]:
    """What the pass ran on: the CPU model, vendor, cores and the kernel path this process takes."""
    from ..speed import kernels

    rec = kernels.configure()
    return {"cpu": kernels.cpu_model(), "vendor": rec["vendor"], "cores": os.cpu_count(), "matmul": rec["path"]}


def begin(cache: Path, profile: str, commit: str, where: dict[str, Any]) -> dict[str, Any]:
    """A new pass in an empty `cache`, or the one recorded there resumed (same profile, commit and machine); a
    cache holding stages and no record, or another commit's or machine's record, is a one-line error."""
    path = cache / RECORD
    stages = any(cache.rglob("*.safetensors")) if cache.is_dir() else False
    if not path.exists():
        if stages:
            raise ParameterError(f"--cache {cache} holds stages but no cold pass: a cold measurement needs an empty "
                                 "folder (or the folder of a stopped pass, to resume it)")
        return {"profile": profile, "git_commit": commit, **where, "segments": [], "pages": {}, "done": [],
                "build_seconds": None}
    record = json.loads(path.read_text())
    theirs = (record.get("profile"), record.get("git_commit"), record.get("cpu"), record.get("matmul"))
    if theirs != (profile, commit, where["cpu"], where["matmul"]):
        raise ParameterError(f"--cache {cache} holds a cold pass of profile {theirs[0]} at {str(theirs[1])[:7]} on "
                             f"{theirs[2]} ({theirs[3]} kernels): resume it there, or start a new pass in an empty "
                             "folder")
    return record


def settle(record: dict[str, Any]) -> None:
    """Credit a stopped segment's unfinished page with the time it had run (from its start to the segment's end)."""
    for seg in record["segments"]:
        page, started = seg.pop("page", None), seg.pop("page_started", None)
        if page and started is not None:
            record["pages"][page] = record["pages"].get(page, 0.0) + max(0.0, seg["end_s"] - started)


def total_seconds(record: dict[str, Any]) -> float:
    """The pass's cold time: every segment, start to end."""
    return sum(seg["end_s"] - seg["start_s"] for seg in record["segments"])


def save(cache: Path, record: dict[str, Any]) -> None:
    """Write the record whole (a stop mid-write leaves the previous one): call it holding `_LOCK`."""
    tmp = cache / (RECORD + ".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, cache / RECORD)


@contextmanager
def segment(cache: Path, record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One segment of the pass: its start, a heartbeat that keeps its end, and its end when the block leaves (also
    on an error or Ctrl-C: the pass resumes from here)."""
    settle(record)
    base = time.time()
    seg = {"start": now(), "start_s": base, "end_s": base}
    cache.mkdir(parents=True, exist_ok=True)
    with _LOCK:
        record["segments"].append(seg)
        save(cache, record)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            with _LOCK:
                seg["end_s"], seg["end"] = time.time(), now()
                save(cache, record)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield seg
    finally:
        stop.set()
        thread.join()
        with _LOCK:
            seg["end_s"], seg["end"] = time.time(), now()
            save(cache, record)


def start_page(seg: dict[str, Any], name: str) -> None:
    """A page starts in this segment (a stop before it ends credits it with the time it ran: `settle`)."""
    with _LOCK:
        seg["page"], seg["page_started"] = name, time.time()


def end_page(cache: Path, record: dict[str, Any], seg: dict[str, Any], name: str) -> float:
    """A page finished in this segment: its time (with what earlier segments spent on it) and the record saved."""
    with _LOCK:
        record["pages"][name] = record["pages"].get(name, 0.0) + time.time() - seg.pop("page_started")
        seg.pop("page")
        record["done"].append(name)
        seg["end_s"], seg["end"] = time.time(), now()
        save(cache, record)
        return record["pages"][name]


def book(record: dict[str, Any] | None, pages: list[str]) -> dict[str, Any] | None:
    """A complete pass (every page and the build) as the cold book: minutes in all, the build's, each page's, its
    commit, machine and segments; None for no pass or one not complete."""
    if not record or record.get("build_seconds") is None or any(p not in record.get("done", []) for p in pages):
        return None
    return {"min": total_seconds(record) / 60, "build min": record["build_seconds"] / 60,
            "pages": [{"page": p, "min": record["pages"][p] / 60} for p in pages],
            "commit": record["git_commit"][:7], "cpu": record["cpu"], "matmul": record["matmul"],
            "segments": [(s["start"], round((s["end_s"] - s["start_s"]) / 60)) for s in record["segments"]]}
