"""Profiles and per-notebook configs; the papermill `parameters` cell of each notebook mirrors one of these.

A field left at `None` in a notebook takes its profile's value, so `-p profile smoke`
alone gives a quick run and any single knob can still be overridden.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

PROFILES = ("smoke", "full")
DEVICE_PATTERN = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")


class ParameterError(ValueError):
    """A bad notebook parameter; the message is one line naming the problem and what is allowed."""


def _allowed_types(hint: Any) -> tuple[type, ...]:
    """The runtime types a field's annotation admits (`int | None` -> (int, NoneType))."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(t for a in typing.get_args(hint) for t in _allowed_types(a))
    return (type(None),) if hint is None else (hint,)


def _type_name(types_: tuple[type, ...]) -> str:
    return " or ".join("None" if t is type(None) else t.__name__ for t in types_)


def _type_ok(value: Any, types_: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # bool is an int subclass; only a bool field takes it
        return bool in types_
    if isinstance(value, int) and float in types_ and int not in types_:
        return True  # 1 is a fine float
    return isinstance(value, types_)


@dataclass
class NotebookConfig:
    """Fields every notebook takes: profile, base seed, device and results root."""

    profile: str = "full"
    seed: int = 0
    device: str = "cpu"
    results_dir: str = "results"

    # Values that `None` fields take, per profile; each subclass fills this.
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {p: {} for p in PROFILES}
    NOTEBOOK: ClassVar[str] = ""
    # Parameters restricted to a set of values (beyond `profile`), checked with the types.
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {}

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the notebook's papermill parameters, in order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def field_types(cls) -> dict[str, tuple[type, ...]]:
        """Allowed runtime types per parameter."""
        hints = typing.get_type_hints(cls)
        return {n: _allowed_types(hints[n]) for n in cls.param_names()}

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        """Raise ParameterError on an unknown name, a wrong type or an unknown profile."""
        names = cls.param_names()
        types_ = cls.field_types()
        for name, value in params.items():
            if name not in types_:
                raise ParameterError(
                    f"unknown parameter {name!r} for notebook {cls.NOTEBOOK}; allowed: {', '.join(names)}"
                )
            if not _type_ok(value, types_[name]):
                raise ParameterError(
                    f"parameter {name!r} of {cls.NOTEBOOK} must be {_type_name(types_[name])}, "
                    f"got {value!r} ({type(value).__name__})"
                )
        for name, allowed in cls.CHOICES.items():
            value = params.get(name)
            if value is not None and value not in allowed:
                raise ParameterError(
                    f"unknown value {value!r} for parameter {name!r} of {cls.NOTEBOOK}; allowed: {', '.join(map(str, allowed))}"
                )
        profile = params.get("profile", cls.profile)
        if profile not in PROFILES:
            raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
        device = params.get("device", cls.device)
        if not DEVICE_PATTERN.match(device):
            raise ParameterError(f"unknown device {device!r}; allowed: cpu, auto, cuda, cuda:N, mps")

    @classmethod
    def coerce(cls, name: str, text: str) -> Any:
        """Turn a command-line string into the parameter's type (one-line error if it cannot)."""
        types_ = cls.field_types().get(name)
        if types_ is None:
            raise ParameterError(
                f"unknown parameter {name!r} for notebook {cls.NOTEBOOK}; allowed: {', '.join(cls.param_names())}"
            )
        if type(None) in types_ and text.lower() in ("none", "null"):
            return None
        for t in types_:
            if t is bool and text.lower() in ("true", "false", "1", "0"):
                return text.lower() in ("true", "1")
            if t in (int, float):
                try:
                    return t(text)
                except ValueError:
                    continue
            if t is str:
                return text
        raise ParameterError(
            f"parameter {name!r} of {cls.NOTEBOOK} must be {_type_name(types_)}, got {text!r}"
        )

    @classmethod
    def from_params(cls, **params: Any):
        """Validate the parameters and fill `None` fields from the profile."""
        cls.validate(params)
        cfg = cls(**params)
        for name, value in cls.PROFILE_DEFAULTS[cfg.profile].items():
            if getattr(cfg, name) is None:
                setattr(cfg, name, value)
        cfg.check()
        return cfg

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]):
        """Build the config from a notebook's globals (the parameters cell plus papermill's injection)."""
        return cls.from_params(**{n: namespace[n] for n in cls.param_names() if n in namespace})

    def check(self) -> None:
        """Range checks after profile defaults are filled; subclasses extend."""
        if self.seed < 0:
            raise ParameterError(f"parameter 'seed' must be >= 0, got {self.seed}")

    def require_positive(self, *names: str) -> None:
        """One-line error for the first of `names` below 1."""
        for name in names:
            if getattr(self, name) < 1:
                raise ParameterError(f"parameter {name!r} must be >= 1, got {getattr(self, name)}")

    def check_batches(self) -> None:
        """The virtual batch must be a whole number of micro-batches."""
        if self.virtual_batch % self.batch_size:
            raise ParameterError(
                f"parameter 'virtual_batch' ({self.virtual_batch}) must be a multiple of 'batch_size' ({self.batch_size})"
            )

    @property
    def seeds(self) -> list[int]:
        """The seeds this run uses: `seed`, `seed+1`, ... (`n_seeds` of them where the config has it)."""
        return list(range(self.seed, self.seed + int(getattr(self, "n_seeds", 1) or 1)))

    def asdict(self) -> dict[str, Any]:
        """The resolved parameters as a plain dict."""
        return dataclasses.asdict(self)


@dataclass
class ToyConfig(NotebookConfig):
    """Toy experiments A/B/C: linear, MLP and residual experts on five diagonal domains."""

    n_seeds: int | None = None
    max_epochs: int | None = None
    patience: int | None = None
    lr: float = 1e-2
    batch_size: int = 64
    virtual_batch: int = 64
    weight_decay: float = 0.0
    hidden: int = 64
    residual_scale: float = 0.1
    val_fraction: float = 0.2

    NOTEBOOK: ClassVar[str] = "toy_experiments"
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"n_seeds": 2, "max_epochs": 100, "patience": 20},
        "full": {"n_seeds": 5, "max_epochs": 3000, "patience": 300},
    }

    def check(self) -> None:
        super().check()
        self.require_positive("n_seeds", "max_epochs", "patience", "batch_size", "virtual_batch", "hidden")
        self.check_batches()
        if not 0 < self.val_fraction < 1:
            raise ParameterError(f"parameter 'val_fraction' must be in (0, 1), got {self.val_fraction}")
        if self.lr <= 0:
            raise ParameterError(f"parameter 'lr' must be > 0, got {self.lr}")


@dataclass
class Task1Config(NotebookConfig):
    """Arithmetic Task 1 (addition): backbone stage, range experts, routers, RED and the four baselines."""

    n_seeds: int | None = None
    backbone: str = "embedded"
    k_trainable: int = 2
    split: str = "pairs"
    splits_reported: str | None = None
    dataset_size: str | None = None
    operand_min: int = 1
    operand_max: int = 50
    n_templates: int = 1
    backbone_fraction: float = 0.1
    lr: float = 1e-4
    head_lr: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 64
    virtual_batch: int = 64
    max_epochs: int | None = None
    backbone_epochs: int | None = None
    patience: int = 3
    expert_hidden: int = 256
    router_hidden: int = 256
    rank_divisor: int = 4
    code_scale: float = 0.1

    NOTEBOOK: ClassVar[str] = "task1_addition"
    SIZES: ClassVar[dict[str, tuple[int, int, int]]] = {
        "final": (64_000, 8_000, 8_000), "first": (20_000, 2_500, 2_500), "tiny": (2_000, 250, 250)}
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {
        "split": ("pairs", "iid"), "splits_reported": ("pairs", "iid", "pairs,iid"), "dataset_size": tuple(SIZES)}
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"n_seeds": 1, "dataset_size": "tiny", "max_epochs": 3, "backbone_epochs": 2, "splits_reported": "pairs,iid"},
        "full": {"n_seeds": 3, "dataset_size": "final", "max_epochs": 60, "backbone_epochs": 10, "splits_reported": "pairs,iid"},
    }

    def check(self) -> None:
        super().check()
        self.require_positive("n_seeds", "max_epochs", "backbone_epochs", "patience", "batch_size", "virtual_batch",
                              "rank_divisor", "n_templates")
        self.check_batches()
        if not 0 < self.backbone_fraction <= 1:
            raise ParameterError(f"parameter 'backbone_fraction' must be in (0, 1], got {self.backbone_fraction}")
        if self.k_trainable < 0:
            raise ParameterError(f"parameter 'k_trainable' must be >= 0, got {self.k_trainable}")
        from .backbone import BackboneError, resolve_backbone  # file checks only: no model is loaded here

        try:
            resolve_backbone(self.backbone)
        except BackboneError as err:
            raise ParameterError(str(err)) from None

    @property
    def split_list(self) -> list[str]:
        """The splits this run measures, the main `split` first."""
        return [self.split] + [s for s in str(self.splits_reported).split(",") if s != self.split]


@dataclass
class PageConfig(NotebookConfig):
    """Pages that only read result files (ledger, front matter): profile, and where results live."""

    NOTEBOOK: ClassVar[str] = "page"


def _page_config(notebook: str) -> type[PageConfig]:
    """The config class of one reading page: a PageConfig that knows its notebook's name."""
    return type(f"{PageConfig.__name__}[{notebook}]", (PageConfig,), {"NOTEBOOK": notebook, "__doc__": PageConfig.__doc__})


LedgerConfig = _page_config("claims_ledger")
PaperVsCodeConfig = _page_config("paper_vs_code")
ReproduceConfig = _page_config("reproduce")
BenchPageConfig = _page_config("speed_and_memory")
IntroConfig = _page_config("intro")


# Every notebook of the book, in reading order, with the config its parameters cell mirrors.
NOTEBOOKS: dict[str, type[NotebookConfig]] = {
    "toy_experiments": ToyConfig,
    "task1_addition": Task1Config,
    # pages that read the results above: executed after them
    "claims_ledger": LedgerConfig,
    "paper_vs_code": PaperVsCodeConfig,
    "reproduce": ReproduceConfig,
    "speed_and_memory": BenchPageConfig,
    "intro": IntroConfig,
}


def config_for(notebook: str) -> type[NotebookConfig]:
    """The config class of a notebook (one-line error listing the notebooks if unknown)."""
    try:
        return NOTEBOOKS[notebook]
    except KeyError:
        raise ParameterError(f"unknown notebook {notebook!r}; allowed: {', '.join(NOTEBOOKS)}") from None


__all__ = ["PROFILES", "ParameterError", "NotebookConfig", "ToyConfig", "Task1Config", "NOTEBOOKS", "config_for"]
