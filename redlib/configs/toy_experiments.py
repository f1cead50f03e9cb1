"""The knobs of the page `toy_experiments` (toy experiments A/B/C); no torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import MAX_WIDTH, ExperimentConfig, ParameterError, param


@dataclass
class ToyConfig(ExperimentConfig):
    """Toy experiments A/B/C: linear, MLP and residual experts on five diagonal domains."""

    device: str = param("cpu", "the toys are tiny: they always train on the CPU")
    lr: float = param(1e-2, "AdamW learning rate")
    weight_decay: float = param(0.0, "AdamW weight decay (0: decay would pull the weights off 0.5)")
    patience: int | None = param(None, "early-stopping patience in epochs")
    hidden: int = param(64, "width of the 2-hidden-layer MLP experts (the paper: 64)")
    residual_scale: float = param(0.1, "residual experts are residual_scale * MLP(x) (the paper: 0.1)")
    val_fraction: float = param(0.2, "share of each domain's points held out for early stopping")

    NOTEBOOK: ClassVar[str] = "toy_experiments"
    KEY: ClassVar[str] = "toy"  # its stage-cache namespace ("toy/"), claim ids ("toy.") and glued values ("toy_")
    SEED_DATA: ClassVar[str] = "one test grid for all seeds"
    MEASURED_ON: ClassVar[str] = "toy grid"
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"n_seeds": 2, "max_epochs": 100, "patience": 20},
        "full": {"n_seeds": 5, "max_epochs": 3000, "patience": 300},
    }

    def check(self) -> None:
        super().check()
        self.require_positive("hidden")
        self.require_at_most(MAX_WIDTH, "hidden")
        self.require_finite("residual_scale")
        if not 0 < self.val_fraction < 1:
            raise ParameterError(f"parameter 'val_fraction' must be in (0, 1), got {self.val_fraction}")
