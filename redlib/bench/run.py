"""`make bench`: the pipeline's speed and memory on this machine, written to results/bench/bench.json.

Measures (several repetitions, median and spread): frozen-prefix training vs the naive full forward,
heads on cached features vs recomputing the backbone, cold wall time and peak memory of every notebook,
the whole book build, the README's test command, inference throughput, and where the slowest notebook
spends its time (compute seconds per stage kind, and a cProfile of one Task 1 run).
Targets are reported against, never asserted.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import psutil
import torch

from ..book.registry import BOOK_MINUTES, NOTEBOOKS
from ..book.results import git_commit, jsonable, library_versions
from ..core.paths import project_root
from ..configs.task1_addition import Task1Config
from ..models.backbone import Backbone
from .micro import (kernel_throughput, optimizer_kinds, spread, stacked_stages, stage1_processes, stage_threads,
                    text_padding)
from .pipeline import PAPER_BATCH, QWEN_SHAPE, features_vs_recompute, prefix_vs_naive, qwen_shaped, throughput
from .profile import stage1_profile

TARGETS = {"embedded_cache_speedup": 1.6, "qwen_cache_speedup": 4.5, "full_book_minutes": BOOK_MINUTES,
           "smoke_test_minutes": 15, "peak_rss_gib": 4.0}
def update_entry(out: Path, name: str, measure: Callable[[], dict]) -> dict:
    """Measure one entry (`kernels`, `smoke_test_command`) and update only it in <out>/bench.json."""
    path = out / "bench.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the whole bench (`make bench`) once first")
    report = json.loads(path.read_text())
    report[name] = {**measure(), "git_commit": git_commit(),
                    "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(jsonable(report), indent=2) + "\n")
    return report


def machine_and_own_cpu() -> tuple[float, float]:
    """CPU seconds the whole machine has been busy (neither idle nor stolen), and those of this process and the
    children it has waited for: their differences over a page say what other processes took meanwhile."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
    own = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return busy, sum(r.ru_utime + r.ru_stime for r in own)


def seed_results(profile: str, results: Path, run: list[str]) -> None:
    """A timing folder's results before its pages run: the checkout's results of the pages this run does not
    execute (what a reading page timed alone reads, as in the book), and the profile's folder itself."""
    checkout = project_root() / "results" / profile
    for page in (p for p in NOTEBOOKS if p not in run and (checkout / p).is_dir()):
        shutil.copytree(checkout / page, results / profile / page, dirs_exist_ok=True)
    (results / profile).mkdir(parents=True, exist_ok=True)


def notebook_times(profile: str, workdir: Path, notebooks: list[str] | None = None, cache: Path | None = None,
                   warm_from: Path | None = None, on_page: Callable[[str, dict], None] | None = None,
                   publish: bool = False) -> dict:
    """Cold wall time and kernel peak memory of each notebook (fresh results folder and cache: `cache` if given,
    started as a hard-linked copy of `warm_from` if given: the stages of the pages a page reuses); `on_page` gets
    each page's entry as soon as it has run. With `publish`, each page is the published run itself (`make book`'s
    run of it, into this checkout's results/ and book/), so one cold pass both times and re-publishes the book."""
    cache = cache or workdir / "cache"
    before = sum(1 for _ in cache.rglob("*.safetensors")) if cache.is_dir() else 0
    start = "empty stage cache" if before == 0 else f"warm: {before} stage entries already in {cache}"
    if warm_from is not None:
        shutil.copytree(warm_from, cache, copy_function=os.link, dirs_exist_ok=True)
        entries = sum(1 for _ in cache.rglob("*.safetensors"))
        start = f"warm: {entries} stage entries hard-linked from {warm_from} (the pages it builds on have run)"
    env = {**os.environ, "REDLIB_CACHE": str(cache), "REDLIB_PROGRESS": "0"}
    out: dict = {}
    results = project_root() / "results" if publish else workdir / "results"
    names = notebooks or list(NOTEBOOKS)
    if not publish:
        (workdir / "book").mkdir(parents=True, exist_ok=True)
        seed_results(profile, results, names)
    for name in names:
        where = [] if publish else ["-p", "results_dir", str(results), "--output", str(workdir / "book" / f"{name}.ipynb")]
        t, (busy, own) = time.perf_counter(), machine_and_own_cpu()
        proc = subprocess.run([sys.executable, "-m", "redlib", "run", name, "-p", "profile", profile, *where],
                              env=env, cwd=project_root(), capture_output=True, text=True)
        if proc.returncode:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RuntimeError(f"{name} ({profile}) failed with exit status {proc.returncode}: {last}")
        busy_after, own_after = machine_and_own_cpu()
        doc = json.loads((results / profile / name / "claims.json").read_text())
        prov = doc["provenance"]
        out[name] = {"wall_seconds": time.perf_counter() - t, "kernel_seconds": prov["wall_seconds"],
                     "git_commit": prov.get("git_commit"), "parameters": prov.get("parameters"),
                     "run_options": prov.get("run_options"), "peak_rss_mb": prov["peak_rss_mb"],
                     "peak_rss_mb_with_workers": prov.get("peak_rss_mb_with_workers"),
                     "cpu_seconds": prov.get("cpu_seconds"),
                     "stage_seconds": (prov.get("stages") or {}).get("computed_seconds_by_kind", {}),
                     "cache_at_start": start,
                     # what else the machine ran meanwhile (a disturbed timing reads high): busy CPU not the page's
                     "other_cpu_seconds": round(max(0.0, (busy_after - busy) - (own_after - own)), 1),
                     "claims_sha256": (doc.get("sha256") or {}).get("claims")}  # what it computed, to match a page
        if on_page is not None:
            on_page(name, out[name])
        # the next page starts from the stages this run has left (as in the book, where pages reuse stages)
        left = sum(1 for _ in cache.rglob("*.safetensors"))
        start = f"shared: the stages left by {', '.join(out)} in this run ({left} entries)"
    return out


def profile_passes(profile: str, workdir: Path, passes: int, notebooks: list[str] | None = None) -> dict:
    """`passes` cold runs of a profile's notebooks (each into a fresh folder), then the strict build; medians and spread."""
    runs = []
    for i in range(passes):
        work = workdir / f"pass{i}"
        t = time.perf_counter()
        times = notebook_times(profile, work, notebooks)
        build = book_build_seconds(work) if notebooks is None else None
        runs.append({"per_notebook": times, "build": build, "total": time.perf_counter() - t})
    per_notebook = {}
    for name, first in runs[0]["per_notebook"].items():
        walls = [r["per_notebook"][name]["wall_seconds"] for r in runs]
        per_notebook[name] = {**first, "wall_seconds": statistics.median(walls), "wall": spread(walls),
                              "peak_rss_mb": max(r["per_notebook"][name]["peak_rss_mb"] for r in runs)}
    builds = [r["build"] for r in runs if r["build"] is not None]
    return {"passes": passes, "per_notebook": per_notebook, "book_build_seconds": statistics.median(builds) if builds else None,
            "total_seconds": statistics.median(r["total"] for r in runs), "total": spread([r["total"] for r in runs])}


def update_pages(out: Path, profile: str, notebooks: list[str], cache: Path | None = None,
                 warm_from: Path | None = None, publish: bool = False) -> dict:
    """Time some notebooks cold and update only their entries in <out>/bench.json; the rest is kept. Each page's
    entry is written as soon as it has run, and the update lists the pages it completed. With `publish`, the book's
    one cold pass (`publish_pass`): every page, published, then the build, resumable from `cache`; the cold book is
    that pass, never a sum of pages timed apart.
    """
    path = out / "bench.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: run the whole bench (`make bench`) once before re-timing pages")
    report = json.loads(path.read_text())
    block = report.setdefault("notebooks", {}).setdefault(
        profile, {"passes": 1, "per_notebook": {}, "book_build_seconds": None, "total_seconds": None})
    update = {"profile": profile, "notebooks": notebooks, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "git_commit": git_commit(), "completed": []}
    report.setdefault("page_updates", []).append(update)

    def set_total() -> None:
        """The profile's total: every notebook's last cold time plus the build, where timed."""
        block["total_seconds"] = (sum(v["wall_seconds"] for v in block["per_notebook"].values())
                                  + (block["book_build_seconds"] or 0))

    def record(name: str, t: dict) -> None:
        """Write one page's entry at once, so a long run that is stopped keeps the pages it finished."""
        block["per_notebook"][name] = {**t, "wall": spread([t["wall_seconds"]]),
                                       "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        set_total()
        block["total_from_parts"] = True
        update["completed"].append(name)
        path.write_text(json.dumps(jsonable(report), indent=2) + "\n")

    if publish:
        return publish_pass(path, report, profile, cache, record)
    with tempfile.TemporaryDirectory() as tmp:
        notebook_times(profile, Path(tmp), notebooks, cache, warm_from, on_page=record)
    return report


def publish_pass(path: Path, report: dict, profile: str, cache: Path, record: Callable[[str, dict], None]) -> dict:
    """The book's one cold pass (`cold_pass`): every page in the book's order, each the published run, then the
    strict build, into `cache` (empty, or a stopped pass's to resume); each page's entry written as it finishes,
    and the pass itself as `report["cold_pass"][profile]`."""
    from . import cold_pass

    run = cold_pass.begin(cache, profile, git_commit(), cold_pass.machine())
    if not run["segments"] and profile == "full":  # a new pass: the ledger's verdicts before it, for its change table
        from ..book import ledger

        ledger.snapshot(project_root() / "results").to_csv(project_root() / "results" / "verdicts_before.csv",
                                                           index=False)
        collected = ledger.collect(project_root() / "results")  # and the numbers behind them, for each change's cause
        (project_root() / "results" / ledger.CLAIMS_BEFORE).write_text(json.dumps(collected, indent=1, default=str))
    report.setdefault("cold_pass", {})[profile] = run
    with tempfile.TemporaryDirectory() as tmp, cold_pass.segment(cache, run) as seg:
        for name in [n for n in NOTEBOOKS if n not in run["done"]]:
            cold_pass.start_page(seg, name)
            timing = notebook_times(profile, Path(tmp), [name], cache, publish=True)[name]
            record(name, {**timing, "wall_seconds": cold_pass.end_page(cache, run, seg, name), "pass": "cold pass"})
        if run["build_seconds"] is None:
            run["build_seconds"] = report["notebooks"][profile]["book_build_seconds"] = build_seconds(profile)
    path.write_text(json.dumps(jsonable(report), indent=2) + "\n")
    return report


def build_seconds(profile: str) -> float:
    """The strict HTML build of the book as it stands in this checkout (nothing executed), timed."""
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "redlib", "book", "--profile", profile, "--no-execute"],
                   check=True, cwd=project_root(), capture_output=True)
    return time.perf_counter() - t


def book_build_seconds(workdir: Path) -> float:
    """Time of the book's strict HTML build (and link check) of the notebooks executed into workdir/book."""
    from ..book.runner import build_html, copy_book_sources

    stage = workdir / "stage"
    copy_book_sources(stage)
    for nb in (workdir / "book").glob("*.ipynb"):
        shutil.copy2(nb, stage / "book" / nb.name)
    t = time.perf_counter()
    build_html(stage, quiet=True)
    return time.perf_counter() - t


# The recipes of the Makefile's `unit` and `notebooks` targets (`make test`), `$(PY)` written as {python};
# tests/test_bench.py checks that the two stay the same.
SMOKE_TEST_COMMANDS = [
    "{python} -m pytest -q tests --ignore=tests/browser --ignore=tests/smoke",
    "{python} -m redlib book --profile smoke",
    "{python} -m pytest -q -p no:cacheprovider --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg tests/nbval/*.ipynb",
    "{python} -m pytest -q -p no:cacheprovider tests/smoke",
    "{python} -m pytest -q -p no:cacheprovider tests/browser",
]


def smoke_test_command(workdir: Path) -> dict:
    """Wall time of the README's test command, command by command, with a fresh stage cache."""
    env = {**os.environ, "REDLIB_CACHE": str(workdir / "cache"), "REDLIB_PROGRESS": "0", "CI": "true"}
    steps = []
    for cmd in SMOKE_TEST_COMMANDS:
        line = cmd.format(python=sys.executable)
        t = time.perf_counter()
        proc = subprocess.run(["bash", "-c", line], env=env, cwd=project_root(), capture_output=True, text=True)
        if proc.returncode:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"`{cmd}` failed (exit {proc.returncode}): {tail[0]}")
        steps.append({"command": cmd.format(python="python"), "seconds": time.perf_counter() - t})
    return {"steps": steps, "total_seconds": sum(s["seconds"] for s in steps)}


def profile_task1(profile: str, top: int = 15) -> str:
    """cProfile summary (cumulative time) of one Task 1 seed and split, cold cache, as text."""
    from ..core.store import Store
    from ..experiments import ranges, task1_addition

    cfg = Task1Config.from_params(profile=profile)
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    with tempfile.TemporaryDirectory() as tmp:
        prof = cProfile.Profile()
        prof.runcall(ranges.run, cfg, task1_addition.frames, cfg.seed, cfg.settings[0], bb, Store(tmp))
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def headline(report: dict) -> dict:
    """The numbers of one bench run that the targets judge, flat, for the history of runs."""
    pc, nbs = report.get("prefix_cache", {}), report.get("notebooks", {})
    row = {"started_at": report.get("started_at"), "git_commit": report["git_commit"][:12]}
    for r in [*pc.get("embedded", []), *pc.get("qwen_shaped", [])]:
        name = "embedded" if r["backbone"] == "embedded" else f"qwen L{r['blocks']}"
        row[f"speed-up {name} batch {r['batch']}"] = round(r["speedup"], 3)
    if "full" in nbs:
        row["full book min"] = round(nbs["full"]["total_seconds"] / 60, 2)
    if "smoke_test_command" in report:
        row["test command min"] = round(report["smoke_test_command"]["total_seconds"] / 60, 2)
    peaks = [t.get("peak_rss_mb_with_workers") or t["peak_rss_mb"]  # the book's one peak: kernel and workers
             for block in nbs.values() for t in block["per_notebook"].values()]
    if peaks:
        row["peak memory GiB"] = round(max(peaks) / 1024, 2)
    return row


def append_history(report: dict, out: Path) -> None:
    """Add this run's headline numbers to <out>/history.jsonl (one line per full bench run)."""
    with open(out / "history.jsonl", "a") as f:
        f.write(json.dumps(headline(report)) + "\n")


def _micro(step: Callable[..., None], reps: int, smoke: bool, tmp: Path) -> None:
    """Every micro-benchmark, each one `step` of the report (small sizes when smoke)."""
    n = 64 if smoke else 1024
    # the pipeline's own micro-batch (Task 1's default) and the paper's (16, accumulated to 64)
    batches = sorted({Task1Config().batch_size, PAPER_BATCH}, reverse=True)
    depths = [6] if smoke else [6, 12, 28]
    step("prefix_cache", lambda: {
        "embedded": prefix_vs_naive("embedded", n, batches, reps),
        "qwen_shaped": [r for L in depths for r in prefix_vs_naive(str(qwen_shaped(L, tmp)), n, batches, reps)],
        "qwen_shape": QWEN_SHAPE, "pipeline_batch": Task1Config().batch_size, "paper_batch": PAPER_BATCH})
    step("features_cache", lambda: features_vs_recompute(4 * n, 64, reps))
    step("throughput", lambda: throughput(8 * n, reps))
    step("kernels", lambda: kernel_throughput(reps))
    step("stage_threads", lambda: stage_threads(reps, 200 if smoke else 2000))
    step("text_padding", lambda: text_padding(reps, 64 if smoke else 2048, steps=2 if smoke else 40))
    step("stage1_processes", lambda: stage1_processes(reps, 5 if smoke else 40))
    step("stage1_profile", lambda: stage1_profile(2 if smoke else 20))
    step("optimizer", lambda: optimizer_kinds(reps, 100 if smoke else 2000, 3 if smoke else 20))
    step("stacked", lambda: stacked_stages(reps, 64 if smoke else 1000, 1 if smoke else 2))


def run_bench(out: Path, smoke: bool = False, notebooks: list[str] | None = None,
              profiles: list[str] | None = None) -> dict:
    """Run every measurement (small sizes when smoke) and write bench.json under `out` after each step.

    `notebooks` limits which notebooks are timed, `profiles` which profiles (default: smoke, and full unless smoke).
    A step that fails is recorded with its error and the others still run.
    """
    os.environ.setdefault("REDLIB_PROGRESS", "0")
    reps = 1 if smoke else 5
    profiles = profiles or (["smoke"] if smoke else ["smoke", "full"])
    started = time.time()
    report: dict = {"smoke": smoke, "targets": TARGETS, "git_commit": git_commit(), "libraries": library_versions(),
                    "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(),
                                "torch_threads": torch.get_num_threads()},
                    "profiles_timed": profiles, "errors": {}}
    out.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        report["bench_seconds"] = time.time() - started
        (out / "bench.json").write_text(json.dumps(jsonable(report), indent=2) + "\n")

    def step(name: str, fn: Callable[[], object], into: dict | None = None, key: str | None = None) -> None:
        """Store fn() as report[name] (or into[key]); a failure is recorded under `name` and the bench goes on."""
        try:
            (report if into is None else into)[key or name] = fn()
        except Exception as err:  # noqa: BLE001 - recorded, reported on the page
            report["errors"][name] = f"{type(err).__name__}: {err}"
        save()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _micro(step, reps, smoke, tmp)
        report["notebooks"] = {}
        for p in profiles:
            # the smoke profile is cheap enough to repeat; a full cold pass takes most of an hour
            passes = 3 if p == "smoke" and not smoke else 1
            step(f"notebooks {p}", lambda p=p, n=passes: profile_passes(p, tmp / p, n, notebooks), report["notebooks"], p)
        if not smoke:
            step("smoke_test_command", lambda: smoke_test_command(tmp / "test"))
        step("profile", lambda: {"what": f"one Task 1 seed and split ({profiles[-1]} profile), cold cache",
                                 "cprofile": profile_task1(profiles[-1])})
    save()
    if not smoke:
        append_history(report, out)
    return report
