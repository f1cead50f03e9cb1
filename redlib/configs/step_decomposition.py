"""The knobs of the page `step_decomposition` (op experts, the step decomposer and program execution); no torch
here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import MAX_EPOCHS, MAX_SAMPLES, MAX_WIDTH, param
from .ranges import RangeTaskConfig, range_defaults
from .red import RedConfig
from .task2_mixed import MixedTaskConfig


@dataclass
class DecompositionConfig(MixedTaskConfig, RangeTaskConfig, RedConfig):
    """Op experts on the shared backbone, the step decomposer, and program execution under three routings."""

    step_mix: str = param("2:0.2,3:0.4,4:0.4", "share of programs per number of steps (the paper's decomposer data: "
                                               "20/40/40%)")
    op_samples: int | None = param(None, "single-step training samples per operation (the paper: 20k)")
    tagger_hidden: int = param(128, "hidden width of the decomposer's bidirectional GRU")
    tagger_lr: float = param(0.001, "AdamW learning rate of the decomposer")
    tagger_epochs: int | None = param(None, "cap for the decomposer")
    tagger_samples: int | None = param(None, "train expressions the decomposer learns from (val: an eighth)")

    NOTEBOOK: ClassVar[str] = "step_decomposition"
    KEY: ClassVar[str] = "sd"  # its stage-cache namespace ("sd/"), claim ids ("sd.") and glued values ("sd_")
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = range_defaults(
        ["isolated", "attribution"], smoke={"op_samples": 1000, "tagger_epochs": 3, "tagger_samples": 2000},
        full={"op_samples": 20_000, "tagger_epochs": 10, "tagger_samples": 4000})

    @classmethod
    def extension_forms(cls) -> list[str]:
        """The range task's, and "attribution": on the first seed of the claims' setting, the 2x2 of stage 1 at 1e-3 or
        1e-4 and every small stage at 1e-3 or 1e-4, each under the same convergence rule (what moves execution)."""
        return [*super().extension_forms(), "attribution"]

    @property
    def attribution(self) -> bool:
        """Whether the 2x2 attribution runs."""
        return "attribution" in (self.extensions or [])

    def check(self) -> None:
        super().check()
        self.require_positive("tagger_hidden", "op_samples", "tagger_epochs", "tagger_samples")
        self.require_at_most(MAX_WIDTH, "tagger_hidden")
        self.require_at_most(MAX_EPOCHS, "tagger_epochs")
        self.require_at_most(MAX_SAMPLES, "op_samples", "tagger_samples")
        self.require_finite("tagger_lr")

    def data_words(self) -> str:
        return (f"step mix `{self.step_mix}`, {self.op_samples} training steps per operation, the decomposer trained "
                f"on {self.tagger_samples} expressions for up to {self.tagger_epochs} epochs")
