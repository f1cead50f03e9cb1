"""Notebook configs: one dataclass per notebook, each parameter declared once as a field (`param(default, help)`).

The notebook's papermill `parameters` cell follows from its config (`parameters_source`, written by
`python -m redlib params --write` and checked by a test), and so does the Reproduce page's parameter table.

A field left at `None` in a notebook takes its profile's value, so `-p profile smoke`
alone gives a quick run and any single knob can still be overridden. `check()` is pure
(types, ranges, orderings); `preflight()` checks the machine (folders, devices) and runs
at the start of a run, before any kernel or training starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from .settings import TrainConfig, TrainSettings

PROFILES = ("smoke", "full")
DEVICE_PATTERN = re.compile(r"^(cpu|auto|mps|cuda(:\d+)?)$")
MAX_SEEDS = 100  # seeds of one run (the full profile runs 3-5)
MAX_EPOCHS = 100_000  # the toy experiments run up to 3,000
MAX_BATCH = 65_536
MAX_WIDTH = 65_536  # hidden widths, model widths and sequence lengths (ours are at most a few thousand)
MAX_LAYERS = 64
MAX_SAMPLES = 10_000_000  # generated samples of one part (the paper's largest set has 80k)
MAX_SEED = 10**9  # stages seed torch with seed * 100 + i, which must stay far inside 64 bits


class ParameterError(ValueError):
    """A bad notebook parameter; the message is one line naming the problem and what is allowed."""


def param(default: Any, help: str) -> Any:
    """A notebook parameter, declared once: its default and what it does (the parameters cell and the Reproduce page
    show the help; `{notebook}` and `{choices}` in it are filled in, and a `None` default that a profile fills gets
    the profile's values appended). A list default is copied for each config."""
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"help": help, "default": default})
    return dataclasses.field(default=default, metadata={"help": help})


def literal(value: Any) -> str:
    """A parameter value as a parameters cell writes it ("full", 0.0001, None, ["iid", "pairs"])."""
    if isinstance(value, list):
        return "[" + ", ".join(map(literal, value)) + "]"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _allowed_types(hint: Any) -> tuple[Any, ...]:
    """The runtime types a field's annotation admits (`int | None` -> (int, NoneType); a list stays `list[float]`)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(t for a in typing.get_args(hint) for t in _allowed_types(a))
    return (type(None),) if hint is None else (hint,)


def _element(t: Any) -> type | None:
    """The element type of a list type (`list[float]` -> float), else None."""
    return typing.get_args(t)[0] if typing.get_origin(t) is list else None


def _type_name(types_: tuple[Any, ...]) -> str:
    return " or ".join("None" if t is type(None) else f"a list of {_element(t).__name__}" if _element(t)
                       else t.__name__ for t in types_)


def _parse(t: Any, text: str) -> Any:
    """A command-line string as type `t` (ValueError if it is not one); a list is comma-separated ("0,0.5,1",
    "[0, 0.5, 1]"), and "" or "[]" is an empty one."""
    if _element(t):
        return [_parse(_element(t), v.strip().strip("'\"")) for v in text.strip().strip("[]").split(",") if v.strip()]
    if t is bool and text.lower() in ("true", "false", "1", "0"):
        return text.lower() in ("true", "1")
    if t in (int, float, str):
        return t(text)
    raise ValueError(text)


def _type_ok(value: Any, types_: tuple[Any, ...]) -> bool:
    if isinstance(value, (list, tuple)):  # papermill and YAML give lists; a tuple is one too
        return any(_element(t) and all(_type_ok(v, (_element(t),)) for v in value) for t in types_)
    if isinstance(value, bool):  # bool is an int subclass; only a bool field takes it
        return bool in types_
    if isinstance(value, int) and float in types_ and int not in types_:
        return True  # 1 is a fine float
    return isinstance(value, tuple(t for t in types_ if not _element(t)))


@dataclass
class NotebookConfig:
    """The field every notebook takes, its profile; a page that trains adds its first seed, device and results root
    (`TrainingConfig`), a reading page where the results it reads live (`PageConfig`)."""

    profile: str = param("full", '"smoke" (seconds, for CI) or "full" (the published page)')

    # Values that `None` fields take, per profile; each subclass fills this.
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {p: {} for p in PROFILES}
    NOTEBOOK: ClassVar[str] = ""
    # an experiment page's one short name: its stage-cache namespace and the start of its claim ids and glue names
    KEY: ClassVar[str] = ""
    # Parameters restricted to a set of values (beyond `profile`), checked with the types.
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {}
    # What varies with the seed besides the initialisation (the ledger's spread says it), and what the page's claims
    # are measured on where no parameter says (the ledger's "measured on")
    SEED_DATA: ClassVar[str] = "seeds"
    MEASURED_ON: ClassVar[str] = ""

    @classmethod
    def seed_data(cls, params: Mapping[str, Any]) -> str:
        """What varies with the seed besides the initialisation, in a run with these recorded parameters."""
        return cls.SEED_DATA

    @classmethod
    def param_names(cls) -> list[str]:
        """Names of the notebook's papermill parameters, in order."""
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def default(cls, name: str) -> Any:
        """Parameter `name`'s declared default (a fresh copy of a list)."""
        field = {f.name: f for f in dataclasses.fields(cls)}[name]
        return list(field.metadata["default"]) if "default" in field.metadata else field.default

    @classmethod
    def describe(cls, name: str) -> str:
        """What parameter `name` does: its help, with the allowed values and the profiles' values filled in."""
        field = {f.name: f for f in dataclasses.fields(cls)}[name]
        allowed = cls.CHOICES.get(name, PROFILES if name == "profile" else ())
        choices = ", ".join(map(literal, allowed[:-1])) + " or " + literal(allowed[-1]) if allowed else ""
        forms = list(map(literal, getattr(cls, "extension_forms", list)()))
        extensions = ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else "".join(forms) or "none here"
        text = field.metadata.get("help", "").format(notebook=cls.NOTEBOOK, choices=choices, extensions=extensions)
        if field.default is None and all(name in d for d in cls.PROFILE_DEFAULTS.values()):
            values = ", ".join(f"{p} {literal(cls.PROFILE_DEFAULTS[p][name])}" for p in PROFILES)
            text += ("; " if text else "") + f"None: the profile's value ({values})"
        return text

    @classmethod
    def parameters_source(cls) -> str:
        """The notebook's `parameters` cell, as it follows from this config (one line per parameter)."""
        return "\n".join(f"{n} = {literal(cls.default(n))}  # {cls.describe(n)}" for n in cls.param_names())

    @classmethod
    def field_types(cls) -> dict[str, tuple[Any, ...]]:
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
            for v in (value if isinstance(value, (list, tuple)) else [] if value is None else [value]):
                if v not in allowed:
                    raise ParameterError(f"unknown value {v!r} for parameter {name!r} of {cls.NOTEBOOK}; allowed: "
                                         + ", ".join(map(str, allowed)) + (" (a list of them)" if value != v else ""))
        profile = params.get("profile", cls.profile)
        if profile not in PROFILES:
            raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
        device = params.get("device", getattr(cls, "device", "cpu"))
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
        if any(_element(t) for t in types_) and text.lower() == "none":
            return []  # a list parameter's "none" is the empty list (leaving it out gives the profile's value)
        if type(None) in types_ and text.lower() in ("none", "null"):
            return None
        for t in types_:
            try:
                return _parse(t, text)
            except ValueError:
                continue
        raise ParameterError(
            f"parameter {name!r} of {cls.NOTEBOOK} must be {_type_name(types_)}, got {text!r}"
        )

    @classmethod
    def listed(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """`params` with each list parameter as a list: a tuple, one number, or a comma-separated string (papermill's
        `-p`, and the runs recorded before these parameters were lists) is turned into one ("none": the empty list)."""
        lists = {n for n, ts in cls.field_types().items() if any(_element(t) for t in ts)}
        out = dict(params)
        for name in lists & set(params):
            value = params[name]
            if isinstance(value, tuple):
                out[name] = list(value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):  # papermill's `-p rank_divisors 4`
                out[name] = [value]
            elif isinstance(value, str):
                out[name] = cls.coerce(name, value)
        return out

    @classmethod
    def from_params(cls, **params: Any):
        """Validate the parameters and fill `None` fields from the profile."""
        params = cls.listed(params)
        cls.validate(params)
        cfg = cls(**params)
        for name, value in cls.PROFILE_DEFAULTS[cfg.profile].items():
            if getattr(cfg, name) is None:
                setattr(cfg, name, list(value) if isinstance(value, list) else value)
        cfg.check()
        return cfg

    @classmethod
    def from_namespace(cls, namespace: Mapping[str, Any]):
        """Build the config from a notebook's globals (the parameters cell plus papermill's injection)."""
        return cls.from_params(**{n: namespace[n] for n in cls.param_names() if n in namespace})

    def check(self) -> None:
        """Range checks after profile defaults are filled (no disk, no devices); subclasses extend."""

    def preflight(self) -> None:
        """Checks that look at this machine (device available, folders present); subclasses extend."""

    def require_results(self) -> None:
        """Checks on the results a page reads before it runs: none for a page that trains (reading pages extend)."""

    def require_positive(self, *names: str) -> None:
        """One-line error for the first of `names` below 1."""
        for name in names:
            if getattr(self, name) < 1:
                raise ParameterError(f"parameter {name!r} must be >= 1, got {getattr(self, name)}")

    def require_at_most(self, limit: int, *names: str) -> None:
        """One-line error for the first of `names` above `limit` (sizes and counts this machine cannot hold or run)."""
        for name in names:
            v = getattr(self, name)
            if v is not None and v > limit:
                raise ParameterError(f"parameter {name!r} must be <= {limit:,}, got {v:,} (far beyond what this "
                                     "companion runs; larger values would exhaust memory or time before any result)")

    def require_finite(self, *names: str, low: float = 0.0, inclusive: bool = False) -> None:
        """One-line error for the first of `names` that is not a finite number above `low` (or at it, if inclusive)."""
        for name in names:
            v = getattr(self, name)
            if not math.isfinite(v) or v < low or (v == low and not inclusive):
                raise ParameterError(f"parameter {name!r} must be a finite number {'>=' if inclusive else '>'} {low}, got {v}")

    def non_default(self) -> dict[str, Any]:
        """The parameters that differ from the profile's defaults (where results go is not one of them)."""
        base = type(self).from_params(profile=self.profile)
        return {k: v for k, v in self.asdict().items() if k != "results_dir" and v != getattr(base, k)}

    def asdict(self) -> dict[str, Any]:
        """The resolved parameters as a plain dict."""
        return dataclasses.asdict(self)


@dataclass
class TrainingConfig(NotebookConfig):
    """A page that trains: its first seed, its device and where its results go."""

    seed: int = param(0, "first seed; the run uses seed, seed+1, ..., seed+n_seeds-1")
    device: str = param("cpu", '"cpu", "cuda", "cuda:N", "mps" or "auto"')
    results_dir: str = param("results", "results go to <results_dir>/<profile>/{notebook}/")

    def check(self) -> None:
        super().check()
        if not 0 <= self.seed <= MAX_SEED:
            raise ParameterError(f"parameter 'seed' must be in [0, {MAX_SEED}], got {self.seed}")

    def preflight(self) -> None:
        """The device exists on this machine; subclasses extend."""
        from .runtime import resolve_device

        super().preflight()
        try:
            resolve_device(self.device)
        except RuntimeError as err:
            raise ParameterError(str(err)) from None

    @property
    def seeds(self) -> list[int]:
        """The seeds this run uses: `seed`, `seed+1`, ... (`n_seeds` of them where the config has it)."""
        return list(range(self.seed, self.seed + int(getattr(self, "n_seeds", 1) or 1)))


@dataclass
class ExperimentConfig(TrainingConfig):
    """A notebook that trains: the fit loop's knobs (`TrainSettings`, one set for every stage) and how many seeds."""

    lr: float = param(1e-4, "AdamW learning rate")
    weight_decay: float = param(0.01, "AdamW weight decay")
    batch_size: int = param(64, "micro-batch; gradients accumulate to virtual_batch (no layer depends on the batch)")
    virtual_batch: int = param(64, "samples per optimiser step (the paper's LLM stages: 64)")
    max_epochs: int | None = param(None, "epoch cap")
    patience: int | None = param(3, "early-stopping patience in epochs (the paper: 3)")
    n_seeds: int | None = param(None, "how many seeds run: seed, seed+1, ...")

    def check(self) -> None:
        super().check()
        self.require_positive("n_seeds", "max_epochs", "patience", "batch_size", "virtual_batch")
        self.require_at_most(MAX_SEEDS, "n_seeds")
        self.require_at_most(MAX_EPOCHS, "max_epochs", "patience")
        self.require_at_most(MAX_BATCH, "batch_size", "virtual_batch")
        self.require_finite("lr")
        self.require_finite("weight_decay", inclusive=True)
        if self.virtual_batch % self.batch_size:
            raise ParameterError(
                f"parameter 'virtual_batch' ({self.virtual_batch}) must be a multiple of 'batch_size' ({self.batch_size})"
            )

    def fit_config(self, seed: int, desc: str, lr: float | None = None, max_epochs: int | None = None) -> TrainConfig:
        """The fit loop's settings for one stage: these knobs, with this stage's seed, label and (optionally) lr / epochs."""
        knobs = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainSettings)}
        return TrainConfig(**{**knobs, "lr": lr or self.lr, "max_epochs": max_epochs or self.max_epochs}, seed=seed,
                           desc=desc)


@dataclass
class PageConfig(NotebookConfig):
    """Pages that only read result files (ledger, front matter): profile, and where results live."""

    profile: str = param("full", "which results to read: results/<profile>/")
    results_dir: str = param("results", "where the notebooks wrote their results")

    NOTEBOOK: ClassVar[str] = "page"

    def require_results(self) -> None:
        """A reading page needs its profile's results: a missing folder is a one-line error, not a page of
        "not measured" (checked when the page runs, after where it writes is settled)."""
        from .paths import not_a_folder, resolve_path

        where = resolve_path(self.results_dir) / self.profile
        if not where.is_dir():
            raise ParameterError(f"parameter 'results_dir': {where} {not_a_folder(where)}; this page reads the "
                                 f"{self.profile!r} results the experiment pages wrote there: run them with the "
                                 f"same results_dir first (`make book PROFILE={self.profile}` fills "
                                 f"results/{self.profile}/)")


def page_config(notebook: str) -> type[PageConfig]:
    """The config class of one reading page: a PageConfig that knows its notebook's name."""
    return type(f"{PageConfig.__name__}[{notebook}]", (PageConfig,), {"NOTEBOOK": notebook, "__doc__": PageConfig.__doc__})


__all__ = ["PROFILES", "ParameterError", "param", "literal", "NotebookConfig", "TrainingConfig", "ExperimentConfig",
           "PageConfig", "page_config"]
