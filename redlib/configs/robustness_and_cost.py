"""The knobs of the page `robustness_and_cost` (routing noise, plug-in modularity, ablations and cost) and the source
pages whose runs it reuses; no torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import ParameterError, TrainingConfig, param
from .mnist_label5 import MnistConfig
from .red import RedConfig
from .task1_addition import Task1Config
from .task2_mixed import Task2Config


def _numbers(name: str, values: list, low: float, high: float, kind: type = float) -> list:
    """The list parameter `name`'s distinct values in order, each in [low, high] (a one-line error if not)."""
    if not values or any(not low <= v <= high for v in values):
        raise ParameterError(f"parameter {name!r} takes a non-empty list of numbers in [{low:g}, {high:g}], got "
                             f"{values!r}")
    return sorted({kind(v) for v in values})


@dataclass
class RobustnessConfig(TrainingConfig):
    """The robustness, modularity, ablation and cost page: which runs it reuses and what it sweeps."""

    seed: int = param(0, "first seed; the runs of seed, ..., seed+n_seeds-1 of the Task 1, Task 2 and MNIST pages are "
                         "reused")
    n_seeds: int | None = param(None, "how many seeds of the source pages are reused")
    train_seeds: int | None = param(None, "of those, how many the studies that train new stages use (replacement, "
                                          "late expert, ranks)")
    backbone: str = param("embedded", "the arithmetic pages' backbone (\"embedded\" or a local model folder, e.g. "
                                      "Qwen3-0.6B)")
    mnist_data_dir: str | None = param(None, "None: the embedded 5,000 digits; or the MNIST IDX folder the MNIST page "
                                             "used")
    noise_levels: list[float] = param([0, 0.25, 0.5, 1, 2, 4], "sd of the Gaussian noise on router logits, in units "
                                                                "of each gate's logit sd")
    misroute_fractions: list[float] = param([0, 0.1, 0.2, 0.3, 0.5, 0.75, 1], "fractions of inputs sent to a wrong "
                                                                              "expert")
    flatten_levels: list[float] = param([0, 0.25, 0.5, 0.75, 1], "amounts of flattening toward uniform weights (1: "
                                                                 "uniform)")
    rank_divisors: list[int] = param([2, 4, 8], "the rank ablation uses ranks d / divisor (must include 4, the paper's "
                                                "d/4)")
    replacement_seed: int = param(1000, "experts replaced by ones trained with seed replacement_seed + run seed")
    stable_tol: float = param(0.02, "the plug-in claim holds when accuracy on the untouched domains moves by at most "
                                    "this")

    NOTEBOOK: ClassVar[str] = "robustness_and_cost"
    # its glued values start with it ("rb_"); its claims keep the paper's four prefixes, and the stages it trains are the
    # source pages' kinds, under their keys
    KEY: ClassVar[str] = "rb"
    SEED_DATA: ClassVar[str] = "the source pages' seeds and data"
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {"smoke": {"n_seeds": 1, "train_seeds": 1},
                                                             "full": {"n_seeds": 3, "train_seeds": 2}}

    def check(self) -> None:
        super().check()
        if self.n_seeds < 1:
            raise ParameterError(f"parameter 'n_seeds' must be >= 1, got {self.n_seeds}")
        if not 1 <= self.train_seeds <= self.n_seeds:
            raise ParameterError(f"parameter 'train_seeds' must be in [1, n_seeds={self.n_seeds}], got {self.train_seeds}")
        fewest = min(len(src.seeds) for src in self.sources().values())
        if self.n_seeds > fewest:
            raise ParameterError(f"parameter 'n_seeds' must be at most {fewest}, the seeds the source pages run in "
                                 f"profile {self.profile!r}, got {self.n_seeds}")
        if not 0 < self.stable_tol < 1:
            raise ParameterError(f"parameter 'stable_tol' must be in (0, 1), got {self.stable_tol}")
        self.levels()
        if 4 not in self.ranks:
            raise ParameterError(f"parameter 'rank_divisors' must include 4 (the paper's r = d/4), got {self.rank_divisors!r}")

    def preflight(self) -> None:
        """The source pages' own machine checks: the backbone folder (with its blocks), the MNIST folder, the device."""
        for src in self.sources().values():
            src.preflight()
        super().preflight()

    def levels(self) -> dict[str, list[float]]:
        """Strengths swept per perturbation (`perturbation.PERTURBATIONS`)."""
        misrouted = _numbers("misroute_fractions", self.misroute_fractions, 0, 1)
        return {"logit noise": _numbers("noise_levels", self.noise_levels, 0, 1e3), "misrouted (random expert)": misrouted,
                "misrouted (adjacent expert)": misrouted, "flattened": _numbers("flatten_levels", self.flatten_levels, 0, 1)}

    def trains(self, seed: int) -> bool:
        """Whether the studies that train new stages (replacement, a late expert, other ranks) run on this seed."""
        return seed < self.seed + self.train_seeds

    @property
    def ranks(self) -> list[int]:
        """Residual rank divisors of the rank ablation (r = d / divisor)."""
        return _numbers("rank_divisors", self.rank_divisors, 1, 1024, int)

    def sources(self) -> dict[str, RedConfig]:
        """The configs of the pages whose runs this page reuses, at their profile's values (so their stages load, and
        their learning rates are chosen on their own seeds, as on their pages)."""
        common = {"profile": self.profile, "seed": self.seed, "device": self.device}
        return {Task1Config.KEY: Task1Config.from_params(**common, backbone=self.backbone),
                Task2Config.KEY: Task2Config.from_params(**common, backbone=self.backbone),
                MnistConfig.KEY: MnistConfig.from_params(**common, data_dir=self.mnist_data_dir)}
