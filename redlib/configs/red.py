"""The RED pipeline's knobs (no torch here: a rejected parameter is answered before torch loads); the modules they
size are built in `red/types.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Mapping

from ..core.claims import rate
from ..core.config import MAX_EPOCHS, MAX_WIDTH, ExperimentConfig, ParameterError, param
from ..core.settings import PRECISIONS, StageSettings, TrainConfig
from ..tasks.mixed import parse_mix
from .ranges import mix_words


@dataclass
class RedConfig(ExperimentConfig):
    """The RED pipeline's knobs, the paper's values as defaults; a task's config adds its data's."""

    lr: float = param(1e-4, "AdamW learning rate of stage 1 (the paper: 1e-4)")
    max_epochs: int | None = param(None, "first epoch cap of the experts, residuals, routers and heads (the paper: 60; "
                                         "with double_cap a cap never decides)")
    patience: int | None = param(10, "early-stopping patience in epochs of every stage (the paper: 3; our guard: 10)")
    double_cap: bool | None = param(None, "the convergence rule: a stage that reaches its epoch cap without early "
                                          "stopping trains on with the cap doubled (as a re-run with the doubled cap "
                                          "would), until patience stops it")
    backbone_fraction: float = param(0.1, "share of train used for the backbone stage (the finalized setup: 10%)")
    backbone_epochs: int | None = param(None, "cap for stage 1 (the paper: 60)")
    backbone_patience: int | None = param(None, "early-stopping patience of stage 1 (the paper: 3): enough that a "
                                                "plateau does not end it")
    precision: str | None = param(None, "stage 1's arithmetic: {choices} (bf16 autocast over the encoder's trainable "
                                        "blocks and the head, fp32 weights and AdamW; the paper trained its backbone "
                                        "stage in mixed precision; the published default decided by "
                                        "`bench --precision`'s rule)")
    head_lr: float = param(1e-4, "AdamW lr of every expert, router and residual (the paper: 1e-4)")
    expert_hidden: int = param(0, "hidden width of the classifier experts (0: the paper's linear expert d -> C)")
    router_hidden: int = param(256, "hidden width of the two-layer router (the paper: 256)")
    rank_divisor: int = param(4, "the residual rank is d / rank_divisor (the paper: d/4)")
    code_scale: float = param(0.1, "the released code's scale on the routed expert logits")
    extensions: list[str] | None = param(None, "what runs beside the paper's protocol, as extensions no verdict reads, "
                                               "a list of {extensions}")

    def check(self) -> None:
        super().check()
        optional = [n for n in ("backbone_patience",) if getattr(self, n) is not None]  # None: `patience`
        self.require_positive("backbone_epochs", "rank_divisor", *optional)
        self.require_at_most(MAX_EPOCHS, "backbone_epochs", *optional)
        self.require_at_most(MAX_WIDTH, "expert_hidden", "router_hidden", "rank_divisor")
        self.require_finite("head_lr", "code_scale")
        if not 0 < self.backbone_fraction <= 1:
            raise ParameterError(f"parameter 'backbone_fraction' must be in (0, 1], got {self.backbone_fraction}")
        forms = self.extension_forms()
        for e in self.extensions or []:
            if e not in forms and not any(f.endswith(">") and e.startswith(f[:f.index("<")]) for f in forms):
                raise ParameterError(f"unknown extension {e!r} in parameter 'extensions' of {self.NOTEBOOK}; allowed: "
                                     + (", ".join(forms) or "none (this page has none)"))
        if self.expert_hidden < 0 or self.router_hidden < 1:
            raise ParameterError(f"parameters 'expert_hidden' (0: a linear expert) must be >= 0 and 'router_hidden' >= 1, "
                                 f"got {self.expert_hidden} and {self.router_hidden}")

    # the choice parameters every RED page has; a page's CHOICES adds its own to these
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {"precision": PRECISIONS}

    # the released code's MoE over its residual-trained logit experts, as an extra stage (the MNIST page's)
    CODE_MOE: ClassVar[bool] = False
    # stage 1's rows with as many of each class (the research code's MNIST base), else drawn at random (the paper's)
    BALANCED_BASE: ClassVar[bool] = False

    @classmethod
    def extension_forms(cls) -> list[str]:
        """The entries `extensions` takes on this page (a form ending in "<...>", as Task 2's "mix:<percent shares,
        ...>", takes a value of the reader's after the colon)."""
        return []

    def fit_config(self, seed: int, desc: str, lr: float | None = None, max_epochs: int | None = None) -> TrainConfig:
        """A stage's fit settings, under the convergence rule when `double_cap`."""
        return replace(super().fit_config(seed, desc, lr, max_epochs), double_cap=bool(self.double_cap))

    def stage1_config(self, seed: int, lr: float) -> TrainConfig:
        """Stage 1's fit settings: the shared knobs at `lr`, capped at `backbone_epochs`, with `backbone_patience`."""
        tc = self.fit_config(seed, "stage 1: encoder top + head", lr, self.backbone_epochs)
        # a config without profile values for it (the pipeline's own, in tests) trains stage 1 in fp32
        return replace(tc, patience=self.backbone_patience or self.patience, precision=self.precision or "fp32")

    def stage_settings(self, lrs: Mapping[str, float] | None = None, budget: Mapping[str, Any] | None = None
                       ) -> StageSettings:
        """A run's training settings, resolved once: stage 1 at `lr`, every small stage at `head_lr`, where an
        extension asks a kind named in `lrs` at its rate ("stage1" too), and the small stages under `budget` (an
        extension's epoch budget: max_epochs, patience, double_cap)."""
        lrs = dict(lrs or {})
        small = replace(self.fit_config(0, "", self.head_lr), **dict(budget or {}))
        return StageSettings(self.stage1_config(0, lrs.get("stage1", self.lr)), small, lrs)

    def variants_on(self, seed: int) -> bool:
        """Whether the variant methods (the released code's logit experts and their MoE gate, joint stage 4, the global
        head on all of train) train on `seed`: here on every seed (MNIST judges the code's forms as its alternative);
        the range pages train them on their first `variant_seeds` seeds."""
        return True

    def rank(self, d: int) -> int:
        """The residual rank r = d / rank_divisor (at least 1)."""
        return max(1, d // self.rank_divisor)


# the switches that `extensions` replaced, as runs before it recorded them
LEGACY_EXTENSIONS = ("splits_reported", "digits_variant_on", "mix_variant", "attribution", "crossed_splits")


def _listed(value: list | str | None) -> list[str]:
    """A recorded list of splits: a list, or the comma-separated string of older runs ("none": empty)."""
    if isinstance(value, str):
        return [v for v in value.split(",") if v != "none"]
    return list(value or [])


def upgraded(params: Mapping[str, Any]) -> dict[str, Any]:
    """Recorded parameters in today's names: a run from before `extensions` recorded its extensions as five switches
    (the other split in `splits_reported`, `digits_variant_on`, Task 2's `mix_variant`, the step decomposition's
    `attribution`, MNIST's `crossed_splits`); they become the one list, as that run would pass it now. A RED page's
    run from before `precision` trained stage 1 in fp32, and a range page's from before `variant_seeds` trained the
    variant methods on every seed: recorded as such."""
    params = dict(params)
    if "head_lr" in params:  # a RED page's run
        params.setdefault("precision", "fp32")
        if "split_seeds" in params:  # a range page's
            params.setdefault("variant_seeds", params.get("n_seeds") or 1)
    if not any(k in params for k in LEGACY_EXTENSIONS):
        return params
    split, reported = params.get("split", "iid"), _listed(params.get("splits_reported"))
    ext = [s for s in reported if s != split] + [f"digits:{s}" for s in _listed(params.get("digits_variant_on"))
                                                 if s in reported or s == split]
    mix = params.get("mix_variant")
    if mix not in (None, "none") and parse_mix(mix) != parse_mix(params.get("step_mix", mix)):
        ext.append(f"mix:{mix_words(mix)}")
    ext += [k for k in ("attribution", "crossed_splits") if params.get(k)]
    return {**{k: v for k, v in params.items() if k not in LEGACY_EXTENSIONS}, "extensions": ext}


def protocol_words(cfg: RedConfig) -> str:
    """How a page's stages trained, in words, from its resolved parameters (the page's protocol sentence)."""
    rates = f"AdamW at lr {rate(cfg.lr)}" + ("" if cfg.head_lr == cfg.lr else f" (stage 1), {rate(cfg.head_lr)} (the rest)")
    experts = ("linear classifier experts" if not cfg.expert_hidden
               else f"classifier experts with a hidden layer of {cfg.expert_hidden}")
    s1_patience = cfg.backbone_patience or cfg.patience
    patience = (f"patience {cfg.patience}" if s1_patience == cfg.patience
                else f"patience {s1_patience} (stage 1), {cfg.patience} (the rest)")
    caps = (f"a first cap of {cfg.backbone_epochs} epochs (stage 1) and {cfg.max_epochs} (the rest), doubled while a "
            "stage still improves at it, so that patience ends every stage" if cfg.double_cap
            else f"caps of {cfg.backbone_epochs} epochs (stage 1) and {cfg.max_epochs} (the rest)")
    precision = ", stage 1 under bf16 autocast (fp32 weights and AdamW)" if cfg.precision == "bf16" else ""
    return f"{rates}, virtual batch {cfg.virtual_batch}, {experts}, {patience}, {caps}{precision}"
