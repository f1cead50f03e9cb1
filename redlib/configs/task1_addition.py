"""The knobs of the page `task1_addition` (arithmetic Task 1, addition); no torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import ParameterError, param
from ..tasks.arithmetic import DATA_SOURCES, MAX_SUM, TEMPLATES, VAL_SHARE
from .ranges import PAPER_BUDGET, RangeTaskConfig, range_choices, range_defaults
from .red import RedConfig


@dataclass
class Task1Config(RangeTaskConfig, RedConfig):
    """Arithmetic Task 1 (addition): backbone stage, range experts, routers, RED and the four baselines."""

    data_source: str = param("text", "\"text\" (the paper's: a, b uniform) or \"released\" (the authors' generator: "
                                     "sum uniform over 2..99)")
    pairs_test_share: float = param(0.2, "share of the distinct operand pairs held out for test on the pairs split "
                                         "(val: 10%)")
    operand_min: int = param(1, "operands a, b in [operand_min, operand_max] (the paper: [1,50], once [2,50])")
    operand_max: int = param(50, "(the paper: 50)")
    n_templates: int = param(1, 'question templates used (1: "What is a plus b?" only; up to 5 paraphrases)')

    NOTEBOOK: ClassVar[str] = "task1_addition"
    KEY: ClassVar[str] = "t1"  # its stage-cache namespace ("t1/"), claim ids ("t1.") and glued values ("t1_")
    CODE_MOE: ClassVar[bool] = True  # the released code's MoE (a gate over its logit experts) beside the paper's
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {**RedConfig.CHOICES, **range_choices(("iid", "pairs")),
                                                       "data_source": DATA_SOURCES}
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = range_defaults(
        ["pairs", "digits:pairs", PAPER_BUDGET], full={"split_seeds": 3})

    @classmethod
    def extension_forms(cls) -> list[str]:
        """The range task's, and "paper_budget": the small stages of the first seed under the paper's epoch budgets."""
        return [*super().extension_forms(), PAPER_BUDGET]

    def check(self) -> None:
        super().check()
        self.require_positive("n_templates")
        if not 1 <= self.operand_min <= self.operand_max or 2 * self.operand_max > MAX_SUM:
            raise ParameterError(f"operands must satisfy 1 <= operand_min <= operand_max <= {MAX_SUM // 2} (sums up to "
                                 f"{MAX_SUM}), got [{self.operand_min}, {self.operand_max}]")
        if self.n_templates > len(TEMPLATES):
            raise ParameterError(f"parameter 'n_templates' must be in [1, {len(TEMPLATES)}], got {self.n_templates}")
        if not 0 < self.pairs_test_share <= 1 - 2 * VAL_SHARE:
            raise ParameterError(f"parameter 'pairs_test_share' must be in (0, {1 - 2 * VAL_SHARE:g}], "
                                 f"got {self.pairs_test_share}")

    def data_words(self) -> str:
        return f"data source `{self.data_source}`"
