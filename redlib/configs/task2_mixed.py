"""The knobs of the page `task2_mixed` (arithmetic Task 2, mixed addition and subtraction) and the fields every page
on mixed expressions adds; no torch here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import ParameterError, param
from ..tasks.mixed import PHRASINGS, parse_mix
from .ranges import PAPER_BUDGET, RangeTaskConfig, Setting, mix_from_words, range_choices, range_defaults
from .red import RedConfig


@dataclass
class MixedTaskConfig:
    """The fields every page on mixed expressions adds: the share of each number of operations and the phrasings (a
    group composed before `RangeTaskConfig`, as `class Task2Config(MixedTaskConfig, RangeTaskConfig, RedConfig)`)."""

    step_mix: str = param("1:0.8,2:0.2", "share of expressions per number of operations (the paper's results: about "
                                         "80% single-operation)")
    n_phrasings: int = param(len(PHRASINGS), 'phrasings used: "What is ...?", bare, "Compute ..., then ...", "If you '
                                             'subtract b from a ..."')

    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {**RedConfig.CHOICES, **range_choices(("iid", "isolated"))}

    def check(self) -> None:
        super().check()
        check_mix(self, "step_mix")
        if not 1 <= self.n_phrasings <= len(PHRASINGS):
            raise ParameterError(f"parameter 'n_phrasings' must be in [1, {len(PHRASINGS)}], got {self.n_phrasings}")

    def data_words(self) -> str:
        return f"step mix `{self.step_mix}`"


@dataclass
class Task2Config(MixedTaskConfig, RangeTaskConfig, RedConfig):
    """Arithmetic Task 2 (mixed): range experts, routers, RED and the four baselines on expressions."""

    NOTEBOOK: ClassVar[str] = "task2_mixed"
    KEY: ClassVar[str] = "t2"  # its stage-cache namespace ("t2/"), claim ids ("t2.") and glued values ("t2_")
    CODE_MOE: ClassVar[bool] = True  # the released code's MoE (a gate over its logit experts) beside the paper's
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = range_defaults(
        ["isolated", "mix:50/50", PAPER_BUDGET])

    @classmethod
    def extension_forms(cls) -> list[str]:
        """The range task's, "mix:<percent shares, ...>": the claims' split under another step mix, in percent of one,
        two, ... operations ("mix:50/50"), and "paper_budget": the small stages of the first seed under the paper's
        epoch budgets."""
        return [*super().extension_forms(), "mix:<percent shares, e.g. 50/50>", PAPER_BUDGET]

    def check(self) -> None:
        super().check()
        for e in self.extensions or []:
            if e.startswith("mix:"):
                try:
                    parse_mix(mix_from_words(e[4:]))
                except ValueError:
                    raise ParameterError(f"extension {e!r} of {self.NOTEBOOK}: after 'mix:' come the percent shares of "
                                         "one, two, ... operations, summing to 100, e.g. 'mix:50/50'") from None

    @property
    def settings(self) -> list[Setting]:
        """The range task's settings, then the claims' split under each other step mix of `extensions`."""
        main = super().settings
        mixes = [mix_from_words(e[4:]) for e in self.extensions or [] if e.startswith("mix:")]
        return main + [Setting(main[0].split, main[0].number_format, mix=m) for m in dict.fromkeys(mixes)
                       if parse_mix(m) != parse_mix(self.step_mix)]


def check_mix(cfg: MixedTaskConfig, name: str) -> None:
    """A one-line ParameterError when the step-mix parameter `name` does not parse."""
    try:
        parse_mix(getattr(cfg, name))
    except ValueError as err:
        raise ParameterError(f"parameter {name!r}: {err}") from None
