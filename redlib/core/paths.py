"""Where things live (repository root, results, stage cache), the words of a one-line path error and the error of a
bad result file; no torch here, so a bad path is answered before torch loads."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The repository root: $REDLIB_ROOT, else the checkout holding this package, else the cwd."""
    if env := os.environ.get("REDLIB_ROOT"):
        return Path(env).resolve()
    here = Path(__file__).resolve().parents[2]  # redlib/core/runtime.py -> the checkout
    return here if (here / "_toc.yml").exists() else Path.cwd()


def cache_dir() -> Path:
    """Stage cache folder ($REDLIB_CACHE or <root>/cache); deleting it is always safe."""
    return Path(os.environ.get("REDLIB_CACHE", project_root() / "cache"))


def resolve_path(path: str | os.PathLike) -> Path:
    """A path from a parameter: absolute as given, relative to the repository root otherwise."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else project_root() / p


def not_a_folder(path: Path) -> str:
    """Why `path` is no folder, in the words of a one-line error: 'is a file, not a folder' or 'does not exist'."""
    return "is a file, not a folder" if path.exists() else "does not exist"


def read_one_byte(files) -> None:
    """Open each file and read a byte: an OSError (no permission, a dangling link, a folder named like a file) comes
    now, before any kernel starts, instead of in the middle of a run."""
    for f in files:
        with open(f, "rb") as fh:
            fh.read(1)


def os_error_words(err: OSError) -> str:
    """An OSError in the words of a one-line error: 'PermissionError: Permission denied: /the/file'."""
    return f"{type(err).__name__}: {err.strerror or err}" + (f": {err.filename}" if err.filename else "")


class ResultFileError(ValueError):
    """A result file that was changed by hand, or cannot be read; the message is one line naming the file."""
