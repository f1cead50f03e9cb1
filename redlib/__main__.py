"""Command line: `python -m redlib run|book|params|export|sources|bench`."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from .book.registry import NOTEBOOKS
from .core.config import PROFILES, ParameterError
from .core.paths import ResultFileError


WORKERS_HELP = ("processes a page trains its small stages in, side by side (default 2; 1: one after another); "
                "a run option: every count gives the same numbers, bit for bit")


def _set_workers(n: int | None) -> None:
    """Hand `--workers` to the notebook kernels (they inherit the environment); one-line error when out of range."""
    if n is None:
        return
    from .speed.parallel import MAX_WORKERS

    if not 1 <= n <= MAX_WORKERS:
        raise ParameterError(f"--workers must be in [1, {MAX_WORKERS}], got {n}")
    os.environ["REDLIB_WORKERS"] = str(n)


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line and exit 2, like every other rejection."""

    def error(self, message: str):
        print(f"error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)


PARAMETER_FLAGS = ("-p", "--parameter")


def _take_parameters(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """`-p NAME VALUE` pairs taken out before argparse sees them, so a VALUE such as -inf or -5 is a value, not a flag."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] in PARAMETER_FLAGS:
            if len(argv) - i < 3:
                raise ParameterError(f"{argv[i]} needs a NAME and a VALUE, e.g. -p seed 3")
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m redlib", description="Run the RED companion's notebooks and build its book.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="execute one notebook with papermill parameters")
    run.set_defaults(func=_run)
    run.add_argument("notebook", help=f"one of: {', '.join(NOTEBOOKS)}")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="a notebook parameter (repeatable), e.g. -p seed 3 -p profile full")
    run.add_argument("--output", help="an .ipynb file to write the executed notebook to, results beside it in "
                     "<its folder>/results/ (default: where the book picks it up, results in results/)")
    run.add_argument("--publish", action="store_true",
                     help="let a full-profile run with non-default parameters replace the published page")
    run.add_argument("--workers", type=int, default=None, help=WORKERS_HELP)
    book = sub.add_parser("book", help="execute every notebook with a profile and build the HTML book (strict)")
    book.set_defaults(func=_book)
    book.add_argument("--profile", default="full", help=f"one of: {', '.join(PROFILES)} (default full)")
    book.add_argument("--no-execute", action="store_true", help="build from the already executed experiment notebooks "
                      "(the reading pages are executed from their results)")
    book.add_argument("--workers", type=int, default=None, help=WORKERS_HELP)
    params = sub.add_parser("params", help="list every notebook's parameters with their defaults")
    params.set_defaults(func=_params)
    params.add_argument("--write", action="store_true",
                        help="rewrite each notebook's parameters cell from its config (where parameters are declared)")
    export = sub.add_parser("export", help="write a Task 1 split as JSONL (question, answer, operands, range)")
    export.set_defaults(func=_export)
    export.add_argument("part", choices=["train", "val", "test"], help="which part of the split")
    export.add_argument("--out", required=True, help="the JSONL file to write")
    export.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="a task1_addition parameter (seed, split, dataset_size, operand_min, ...)")
    sources = sub.add_parser("sources", help="train into the stage cache only the other pages' runs a page reuses "
                             "(robustness_and_cost: Task 1, Task 2 and MNIST), so it can be timed after them")
    sources.set_defaults(func=_sources)
    sources.add_argument("notebook", help="the page whose sources to train: robustness_and_cost")
    sources.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                         help="a parameter of that page (profile, seed, n_seeds, backbone, ...)")
    sources.add_argument("--workers", type=int, default=None, help=WORKERS_HELP)
    _add_bench(sub)
    return ap


def _add_bench(sub: argparse._SubParsersAction) -> None:
    """`bench`'s options (the whole bench, or one part of it)."""
    bench = sub.add_parser("bench", help="measure the pipeline's speed and memory (results/bench/bench.json)")
    bench.set_defaults(func=_bench)
    bench.add_argument("--smoke", action="store_true", help="tiny sizes and one repetition: checks that the bench runs")
    bench.add_argument("--out", default=None, help="output folder (default results/bench, or results/bench/smoke)")
    bench.add_argument("--profiles", default=None,
                       help="profiles whose notebooks are timed cold, e.g. smoke (default: smoke,full; smoke only with --smoke)")
    bench.add_argument("--test-command", action="store_true",
                       help="time only the README's test command (make test's steps, fresh stage cache) and update "
                            "that entry")
    bench.add_argument("--kernels", action="store_true",
                       help="measure only the micro-benchmarks (the fp32 kernels' stage-1 GFLOP/s, the small "
                            "stages' steps/s per thread count, Task 2's padding, stage 1 side by side) and update "
                            "those entries of bench.json")
    bench.add_argument("--precision", default=None, metavar="DIR",
                       help="decide stage 1's precision by its rule: Task 1 and Task 2 on seed 0 under fp32 and bf16, "
                            "each cold in its own stage cache under DIR (kept: a stopped comparison resumes), written "
                            "to precision.json beside bench.json")
    bench.add_argument("--notebooks", default=None,
                       help="re-time only these notebooks (comma-separated), one cold pass per profile, and update "
                            "their entries in an existing bench.json")
    bench.add_argument("--cache", default=None,
                       help="with --notebooks: an empty folder the timed runs fill as their stage cache (kept afterwards)")
    bench.add_argument("--warm-from", default=None,
                       help="with --notebooks: start the timed runs from a hard-linked copy of this stage cache (for a "
                            "page that reuses other pages' stages: time it after they have run); it must not hold the "
                            "timed page's own stages")
    bench.add_argument("--publish", action="store_true",
                       help="with --notebooks (default: every page, in the book's order): each timed run is the "
                            "published run itself, into this checkout's results/ and book/ (from a clean tree and an "
                            "empty --cache), and with every page the strict HTML build is timed too: one cold pass "
                            "both times and re-publishes the book")


class Stopped(KeyboardInterrupt):
    """SIGTERM (kill, timeout, a cancelled CI job), handled as Ctrl-C is: the kernel and its workers are shut down."""


def _stop(signum: int, _frame) -> None:
    raise Stopped(signal.Signals(signum).name)


def _check_run_options(args: argparse.Namespace) -> None:
    """`run` and `book`: the worker count (`-p workers N` is accepted as the run option it is) and the stage cache."""
    if args.command == "run":
        given = [v for n, v in args.parameter if n == "workers"]
        args.parameter = [(n, v) for n, v in args.parameter if n != "workers"]
        if given and args.workers is None:
            if not given[-1].isdigit():
                raise ParameterError(f"workers must be a positive integer, got {given[-1]!r}")
            args.workers = int(given[-1])
    _set_workers(args.workers)
    from .book import runner
    from .core.paths import cache_dir

    runner.writable_folder(cache_dir(), "the stage cache (REDLIB_CACHE)")
    runner.outside_published(cache_dir(), "the stage cache (REDLIB_CACHE)", "name a folder outside them")


def _run(args: argparse.Namespace) -> None:
    """`run`: one notebook with its parameters, where `--output` says (or where the book picks it up)."""
    from .book import runner

    _check_run_options(args)
    params = runner.placement(args.notebook, runner.parse_params(args.notebook, args.parameter), args.output,
                              args.publish)
    runner.execute(args.notebook, params, args.output, progress=args.progress)


def _book(args: argparse.Namespace) -> None:
    """`book`: every notebook with a profile (only the reading pages, with --no-execute), then the strict HTML build."""
    from .book import runner

    _check_run_options(args)
    runner.stage_dir(args.profile)  # validates the profile before anything runs
    if not args.no_execute:
        from .bench.cold import cold_line

        print("\n".join(runner.plan_lines(args.profile, cold_line(args.profile))), file=sys.stderr)
    index = runner.build_book(args.profile, execute_notebooks=not args.no_execute, progress=args.progress)
    print(f"book built: {index}")


def _export(args: argparse.Namespace) -> None:
    """`export`: one part of a Task 1 split as JSONL."""
    from .book import runner
    from .experiments.task1_addition import Task1Config, spec_for
    from .tasks.arithmetic_data import make_task1, to_jsonl

    cfg = Task1Config.from_params(**runner.parse_params("task1_addition", args.parameter))
    runner.outside_published(runner.check_file(args.out, ".jsonl", "--out"), "--out", "write the split elsewhere")
    path = to_jsonl(make_task1(spec_for(cfg, cfg.seed, cfg.settings[0]))[args.part], args.out)
    print(f"wrote {path}")


def _sources(args: argparse.Namespace) -> None:
    """`sources`: the runs of other pages that a page reuses, trained (or loaded) into the stage cache."""
    from .book import runner

    if args.notebook != "robustness_and_cost":
        raise ParameterError(f"{args.notebook!r} reuses no other page's runs; only robustness_and_cost does")
    _check_run_options(args)
    params = runner.parse_params(args.notebook, args.parameter)
    from .configs.robustness_and_cost import RobustnessConfig

    cfg = RobustnessConfig.from_params(**params)
    cfg.preflight()
    from .book.pages import stage1_precision
    from .core.store import Store
    from .experiments import robustness_and_cost
    from .speed import kernels

    kernels.configure(stage1_precision(cfg))
    store = Store()
    computed = robustness_and_cost.train_sources(cfg, store, progress=args.progress)
    print(f"the sources of {args.notebook} (profile {cfg.profile}, seeds {cfg.seeds}) are in {store.root}: "
          f"{computed} stages computed, {store.hits} loaded")


def _params(args: argparse.Namespace) -> None:
    """`params`: every notebook's parameters and defaults, or (--write) each parameters cell rewritten."""
    if args.write:
        from .book.runner import write_parameters_cells

        changed = write_parameters_cells()
        print(f"parameters cells rewritten: {', '.join(changed) or 'none (all follow their configs)'}")
        return
    from .book.registry import config_for

    for name in NOTEBOOKS:
        cls = config_for(name)
        print(f"{name}: " + ", ".join(f"{f}={cls.default(f)!r}" for f in cls.param_names()))


def _bench(args: argparse.Namespace) -> None:
    """`bench`: the whole bench, or one part of it (--test-command, --kernels, --notebooks / --publish)."""
    from .bench import cli

    cli.main(args)


def _stopped(err: KeyboardInterrupt) -> int:
    """After Ctrl-C or SIGTERM: the kernel and its workers are gone; say what is kept; exit 130 or 143."""
    import logging
    import time

    from .core.store import remove_orphaned_temporaries

    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # the interrupted cell's task, reported at exit
    time.sleep(1.0)  # orphaned workers notice within half a second that their page is gone
    remove_orphaned_temporaries()
    how = str(err) or "SIGINT"
    print(f"stopped ({how}): the notebook kernel and its workers were shut down; stages finished before the stop "
          "stay in the stage cache and the published pages and results are unchanged", file=sys.stderr)
    return 143 if how == "SIGTERM" else 130


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input exits 2 with a one-line message, a failed run exits 1, a stopped run 130 or 143."""
    try:
        argv, pairs = _take_parameters(list(sys.argv[1:] if argv is None else argv))
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv)
    if pairs and args.command not in ("run", "export", "sources"):
        print(f"error: -p NAME VALUE is a parameter of `run`, `export` and `sources`, not of `{args.command}`",
              file=sys.stderr)
        return 2
    if args.command in ("run", "export", "sources"):
        args.parameter = pairs  # argparse's own -p (kept for --help) never sees one: they were taken out above
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    signal.signal(signal.SIGTERM, _stop)
    from .core.settings import progress_enabled

    args.progress = progress_enabled()
    try:
        args.func(args)
    except (ParameterError, FileNotFoundError, ResultFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as err:
        return _stopped(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
