"""`python -m redlib bench`: the whole bench, or one part of it, validated before anything is timed."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from ..book import runner
from ..book.registry import NOTEBOOKS, config_for
from ..core.config import ParameterError
from ..core.paths import resolve_path


def main(args: argparse.Namespace) -> None:
    """Validate the profiles, then run the part of the bench the flags name."""
    out = Path(args.out) if args.out else resolve_path("results/bench" + ("/smoke" if args.smoke else ""))
    profiles = args.profiles.split(",") if args.profiles else None
    for p in profiles or []:
        runner.stage_dir(p)  # validates each profile name before anything runs
    if args.test_command:
        test_command(out)
    elif args.kernels:
        kernels(out)
    elif args.precision:
        precision(Path(args.precision), out)
    elif args.notebooks or args.publish:
        pages(args, out, profiles)
        if args.publish:  # the README states the book's cold pass: it changes with a publication only
            readme(out)
    else:
        if args.cache or args.warm_from:
            raise ParameterError("--cache and --warm-from need --notebooks (the whole bench times in fresh temporary "
                                 "folders)")
        from .run import run_bench

        report = run_bench(out, smoke=args.smoke, profiles=profiles)
        print(f"bench written: {out / 'bench.json'} ({report['bench_seconds']:.0f} s)")


def readme(out: Path) -> None:
    """The README's cold-book sentence follows the committed bench's cold pass (a bench written elsewhere leaves it)."""
    from .cold import update_readme
    from .report import load

    if out.resolve() == resolve_path("results/bench").resolve():
        if update_readme(load(out / "bench.json"), resolve_path("README.md")):
            print("README.md: its cold-book sentence updated from the bench")


def test_command(out: Path) -> None:
    """--test-command: time the README's test command in a fresh stage cache and update that entry."""
    from .run import smoke_test_command, update_entry

    with tempfile.TemporaryDirectory() as tmp:
        t = update_entry(out, "smoke_test_command", lambda: smoke_test_command(Path(tmp)))
    minutes = t["smoke_test_command"]["total_seconds"] / 60
    print(f"bench updated: {out / 'bench.json'} (make test: {minutes:.1f} min)")


def kernels(out: Path) -> None:
    """--kernels: the micro-benchmarks and stage 1's profile, each entry updated."""
    os.environ.setdefault("REDLIB_PROGRESS", "0")  # the fits they time draw no bars (as in the whole bench)
    from .micro import (kernel_throughput, optimizer_kinds, stacked_stages, stage1_processes, stage_threads,
                        text_padding)
    from .profile import stage1_profile
    from .run import update_entry

    k = update_entry(out, "kernels", kernel_throughput)["kernels"]
    t = update_entry(out, "stage_threads", stage_threads)["stage_threads"]
    pad = update_entry(out, "text_padding", text_padding)["text_padding"]
    s1 = update_entry(out, "stage1_processes", stage1_processes)["stage1_processes"]
    prof = update_entry(out, "stage1_profile", stage1_profile)["stage1_profile"]["phases_ms"]
    opt = update_entry(out, "optimizer", optimizer_kinds)["optimizer"]
    stk = update_entry(out, "stacked", stacked_stages)["stacked"]["per_kind"]
    other = (f" ({k['other_path']['chosen_stage1_speedup']:.2f}x the {k['other_path']['path']} kernels)"
             if "other_path" in k else "")
    print(f"bench updated: {out / 'bench.json'} (kernels: {k['matmul']['path']}, stage 1 {k['stage1_gflops']:.0f} "
          f"GFLOP/s{other}, {k['stage1_share_of_gemm']:.0%} of a large product's; small stages on 1 thread per "
          f"worker: {t['speedup_1_over_2']:.2f}x their speed on 2; Task 2 batches cut to their longest text: training "
          f"{pad['train_speedup']:.2f}x, validation {pad['validate_speedup']:.2f}x; stage 1 in two one-thread "
          f"processes side by side: {s1['speedup_side_by_side']:.2f}x one two-thread process; one stage-1 step: "
          + ", ".join(f"{k} {v:.0f} ms" for k, v in prof.items())
          + f"; fused AdamW: stage 1 {opt['stage1_speedup']:.2f}x, small stages {opt['small_speedup']:.2f}x foreach's; "
          + "stacked small stages: " + ", ".join(f"{r['kind']} at batch {r['batch']} {r['speedup']:.2f}x" for r in stk)
          + " separate fits)")


def precision(root: Path, out: Path) -> None:
    """--precision DIR: stage 1 in fp32 and in bf16 on the claims' seed 0, and the decision by its rule."""
    from .precision import run_comparison

    runner.writable_folder(root, "--precision")
    runner.outside_published(root, "--precision", "name a folder outside them")
    report = run_comparison(root, out)
    inside = sum(r["within"] for r in report["claims"])
    print(f"precision written: {out / 'precision.json'} ({inside} of {len(report['claims'])} claim values within "
          f"their bound; the rule says {report['decision']})")


def pages(args: argparse.Namespace, out: Path, profiles: list[str] | None) -> None:
    """--notebooks / --publish: re-time these pages cold (re-publishing them with --publish), each entry updated."""
    from ..book.results import git_commit
    from .run import update_pages

    names = args.notebooks.split(",") if args.notebooks else list(NOTEBOOKS)
    cache = Path(args.cache) if args.cache else None
    if args.publish and (cache is None or git_commit().endswith("+dirty") or args.notebooks or args.warm_from):
        raise ParameterError("--publish re-publishes the whole book in one cold pass: it needs a clean tree (commit "
                             "first, so no page's provenance reads +dirty) and a --cache folder, empty or a stopped "
                             "pass's to resume, and takes neither --notebooks nor --warm-from")
    for name in names:
        config_for(name)  # an unknown name is a one-line error naming the notebooks
    if cache is not None:  # a file, an unwritable folder or one in the published book: one line each
        runner.writable_folder(cache, "--cache")
        runner.outside_published(cache, "--cache", "name an empty folder outside them")
    if not args.publish and cache is not None and cache.exists() and any(cache.iterdir()):
        raise ParameterError(f"--cache {cache} is not empty: a cold measurement needs an empty folder")
    warm = Path(args.warm_from) if args.warm_from else None
    if warm is not None and not warm.is_dir():
        raise ParameterError(f"--warm-from {warm} is not a folder (a stage cache, e.g. ./cache)")
    for p in profiles or ["full"]:
        update_pages(out, p, names, cache, warm, publish=args.publish)
    print(f"bench updated: {out / 'bench.json'} ({', '.join(names)})")
