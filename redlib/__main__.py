"""Command line: `python -m redlib run|book|params`."""

from __future__ import annotations

import argparse
import os
import sys

from .config import NOTEBOOKS, PROFILES, ParameterError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m redlib", description="Run the RED companion's notebooks and build its book.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute one notebook with papermill parameters")
    run.add_argument("notebook", help=f"one of: {', '.join(NOTEBOOKS)}")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                     help="a notebook parameter (repeatable), e.g. -p seed 3 -p profile full")
    run.add_argument("--output", help="where to write the executed notebook (default: where the book picks it up)")
    book = sub.add_parser("book", help="execute every notebook with a profile and build the HTML book (strict)")
    book.add_argument("--profile", default="full", help=f"one of: {', '.join(PROFILES)} (default full)")
    book.add_argument("--no-execute", action="store_true", help="build from the already executed notebooks")
    sub.add_parser("params", help="list every notebook's parameters with their defaults")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input exits 2 with a one-line message, a failed run exits 1."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    progress = not os.environ.get("CI")
    from . import runner

    try:
        if args.command == "run":
            params = runner.parse_params(args.notebook, args.parameter)
            runner.execute(args.notebook, params, args.output, progress=progress)
        elif args.command == "book":
            runner.stage_dir(args.profile)  # validates the profile before anything runs
            index = runner.build_book(args.profile, execute_notebooks=not args.no_execute, progress=progress)
            print(f"book built: {index}")
        elif args.command == "params":
            from .config import config_for

            for name in NOTEBOOKS:
                cls = config_for(name)
                print(f"{name}: " + ", ".join(f"{f}={getattr(cls, f)!r}" for f in cls.param_names()))
    except (ParameterError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
