"""MNIST's IDX files: found in the reader's folder, checked from their headers and sizes before any kernel starts,
and read (numpy only, no torch: a bad folder is answered before torch loads)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from ..core.config import ParameterError
from ..core.paths import not_a_folder

IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read(path: Path, size: int = -1) -> bytes:
    """The first `size` bytes (all with -1) of a file, gzipped or not; a one-line error if it cannot be read."""
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as fh:
            return fh.read(size)
    except (OSError, EOFError) as err:
        raise ParameterError(f"MNIST file {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None


def _check_magic(path: Path, raw: bytes) -> None:
    if len(raw) < 4 or raw[:2] != b"\x00\x00" or raw[2] != 0x08 or raw[3] not in (1, 3):
        what = "is empty" if not raw else f"has a bad magic number ({raw[:4].hex()})"
        raise ParameterError(f"{path} is not an MNIST IDX file of unsigned bytes: it {what}")


def _data_size(path: Path) -> int:
    """Bytes of the file's IDX content: its size, or for a .gz the uncompressed size its gzip trailer records."""
    try:
        if path.suffix != ".gz":
            return path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(-4, os.SEEK_END)
            return int.from_bytes(fh.read(4), "little")  # ISIZE: the size modulo 2**32, exact for MNIST's files
    except OSError as err:
        raise ParameterError(f"MNIST file {str(path)!r} cannot be read ({type(err).__name__}: {err})") from None


def _dims(path: Path, raw: bytes) -> list[int]:
    """The dimensions an IDX file's header (the start of `raw`) declares; one-line error if it is no IDX header."""
    _check_magic(path, raw)
    if len(raw) < 4 + 4 * raw[3]:
        raise ParameterError(f"{path} is truncated: its IDX header is incomplete")
    return [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3])]


def _check_data(path: Path, dims: list[int], size: int) -> None:
    if size != int(np.prod(dims)):
        raise ParameterError(f"{path} is truncated: header says {dims}, found {size} bytes of data")


def _check_size(path: Path) -> None:
    """One-line error unless the file has an IDX header and exactly the data its dimensions call for (read from the
    header and the file's size, not its data)."""
    dims = _dims(path, _read(path, 4 + 4 * 3))  # the longest header: 3 dimensions
    _check_data(path, dims, _data_size(path) - 4 - 4 * len(dims))


def read_idx(path: Path) -> np.ndarray:
    """One IDX file (gzipped or not) as an array: unsigned bytes, 1 dimension (labels) or 3 (images)."""
    raw = _read(path)
    dims = _dims(path, raw)
    body = np.frombuffer(raw, np.uint8, offset=4 + 4 * len(dims))
    _check_data(path, dims, body.size)
    return body.reshape(dims)


def _find(folder: Path, stem: str) -> Path | None:
    return next((p for p in (folder / stem, folder / f"{stem}.gz") if p.is_file()), None)


def check_idx_dir(data_dir: str) -> dict[str, tuple[Path, Path]]:
    """The four standard MNIST IDX files in the folder (each may be gzipped), as part -> (images, labels) paths;
    else a one-line error naming the files expected."""
    folder = Path(data_dir).expanduser()
    try:
        found = {stem: _find(folder, stem) for pair in IDX_FILES.values() for stem in pair}
    except OSError as err:  # a folder this user may not read (permissions), a broken mount, ...
        why = f"{type(err).__name__}: {err.strerror or err}"
        raise ParameterError(f"data_dir {str(folder)!r} cannot be read ({why})") from None
    missing = [stem for stem, path in found.items() if path is None]
    if not folder.is_dir() or missing:
        state = f"it {not_a_folder(folder)}" if not folder.is_dir() else f"missing: {', '.join(missing)}"
        raise ParameterError(f"data_dir {str(folder)!r} must be a folder holding the MNIST IDX files "
                             f"{', '.join(found)} (each may end in .gz); {state}")
    for path in found.values():  # readable, with an IDX header and all its data: checked before any kernel starts
        _check_size(path)
    return {part: (found[images], found[labels]) for part, (images, labels) in IDX_FILES.items()}
