"""The knobs of the page `routing_heatmaps` (the three routing-analysis experiments); no torch here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..core.config import (MAX_EPOCHS, MAX_LAYERS, MAX_SAMPLES, MAX_SEEDS, MAX_WIDTH, ParameterError, TrainingConfig,
                           param)
from ..core.settings import TrainConfig
from ..models.folders import tokenizer_path
from ..tasks.idx import check_idx_dir

TARGET_DIGITS = (0, 7)  # experiment 2's pretrained expert tells these digits from the rest
PAPER_PATIENCE = 3  # a stage whose best epoch is this close to its cap was still improving (the paper's patience)
EMBEDDINGS = ("random", "average")
PAPER_SIZES = {"code": {"d_model": 768, "layers": 2, "heads": 8, "ff": 3072},
               "domain": {"d_model": 256, "layers": 1, "heads": 4, "ff": 512}}


@dataclass
class RoutingHeatmapsConfig(TrainingConfig):
    """The three routing-analysis experiments: code expert, '0 or 7' digit expert, lightly pretrained domain experts."""

    n_seeds: int | None = param(None, "(the paper: 1, 1 and 3 for the three experiments)")
    tokenizer: str = param("embedded", "\"embedded\" (the MiniLM backbone's tokenizer) or a local tokenizer folder "
                                       "such as gpt2")
    full_vocab: bool = param(False, "False: embeddings and LM head cover the tokens that occur in the corpus only")
    causal: bool = param(True, "causal attention mask in the text experts (False: the paper's unmasked encoder)")
    max_len: int = param(128, "tokens per sample at most (the paper: 128)")
    text_lr: float = param(1e-4, "Adam learning rate of the text models (the paper: 1e-4)")
    text_batch: int = param(16, "text batch size (the paper does not say)")
    eval_samples: int | None = param(None, "held-out samples per domain for the routing analysis")
    code_samples: int | None = param(None, "experiment 1 training samples per domain (the paper: 500)")
    code_epochs: int | None = param(None, "experiment 1 epochs of each phase (the paper: 5)")
    code_d_model: int | None = param(None, "experiment 1 width (the paper: 768)")
    code_layers: int = param(2, "experiment 1 layers per expert (the paper: 2)")
    code_heads: int | None = param(None, "experiment 1 attention heads (the paper: 8)")
    code_ff: int | None = param(None, "experiment 1 feed-forward width (the paper: 3072)")
    mnist_data_dir: str | None = param(None, "None: the embedded 5,000 digits; or a folder of the MNIST IDX files")
    digit_lr: float = param(1e-3, "experiment 2 Adam learning rate (the paper: 1e-3)")
    digit_batch: int = param(64, "experiment 2 batch size (the paper does not say)")
    digit_hidden: int = param(128, "experiment 2 expert hidden width (the paper: 128)")
    digit_dropout: float = param(0.2, "experiment 2 dropout in experts and gate (the paper: 0.2)")
    digit_pretrain_epochs: int | None = param(None, "experiment 2 expert pretraining epochs (the paper: 10)")
    digit_epochs: int | None = param(None, "experiment 2 MoE epochs (the paper: 15)")
    domain_pretrain_samples: int | None = param(None, "experiment 3 pretraining samples per domain")
    domain_moe_samples: int | None = param(None, "experiment 3 MoE samples per domain")
    domain_pretrain_epochs: int | None = param(None, "experiment 3 expert pretraining epochs (the paper: 2)")
    domain_moe_epochs: int | None = param(None, "experiment 3 MoE epochs (the paper: 6)")
    domain_d_model: int | None = param(None, "experiment 3 width (the paper: 256)")
    domain_layers: int = param(1, "experiment 3 layers per expert (the paper: 1)")
    domain_heads: int = param(4, "experiment 3 attention heads (the paper: 4)")
    domain_ff: int = param(512, "experiment 3 feed-forward width (the paper: 512)")
    domain_embedding: str = param("random", "MoE embeddings: \"random\" or \"average\" of the pretrained experts' "
                                            "(the paper: either)")
    entropy_weight: float = param(0.01, "weight of the router entropy term in the second setting of experiment 3")
    converge_cap: int | None = param(None, "extension, first seed: every phase trained until its validation loss "
                                           "stops improving (patience 3), at most this many epochs; 0: not run")
    stop_patience: int | None = param(None, "None: every epoch run (the paper's fixed epochs); or stop after this "
                                            "many epochs without a better validation loss")

    NOTEBOOK: ClassVar[str] = "routing_heatmaps"
    KEY: ClassVar[str] = "ra"  # its stage-cache namespace ("ra/"), claim ids ("ra.") and glued values ("ra_")
    SEED_DATA: ClassVar[str] = "each seed its own texts; one digit split"
    CHOICES: ClassVar[dict[str, tuple[Any, ...]]] = {"domain_embedding": EMBEDDINGS}
    PROFILE_DEFAULTS: ClassVar[dict[str, dict[str, Any]]] = {
        "smoke": {"n_seeds": 2, "eval_samples": 10, "code_samples": 40, "code_epochs": 1, "code_d_model": 32,
                  "code_heads": 2, "code_ff": 64, "digit_pretrain_epochs": 1, "digit_epochs": 2,
                  "domain_pretrain_samples": 20, "domain_moe_samples": 40, "domain_pretrain_epochs": 1,
                  "domain_moe_epochs": 1, "domain_d_model": 32, "converge_cap": 2},
        "full": {"n_seeds": 3, "eval_samples": 100, "code_samples": 500, "code_epochs": 5, "code_d_model": 128,
                 "code_heads": 4, "code_ff": 512, "digit_pretrain_epochs": 10, "digit_epochs": 15,
                 "domain_pretrain_samples": 300, "domain_moe_samples": 600, "domain_pretrain_epochs": 2,
                 "domain_moe_epochs": 6, "domain_d_model": 128, "converge_cap": 60},
    }

    def check(self) -> None:
        super().check()
        self.require_positive("n_seeds", "max_len", "text_batch", "eval_samples", "code_samples", "code_epochs",
                              "code_d_model", "code_layers", "code_heads", "code_ff", "digit_batch", "digit_hidden",
                              "digit_pretrain_epochs", "digit_epochs", "domain_pretrain_samples", "domain_moe_samples",
                              "domain_pretrain_epochs", "domain_moe_epochs", "domain_d_model", "domain_layers",
                              "domain_heads", "domain_ff")
        self.require_at_most(MAX_SEEDS, "n_seeds")
        self.require_at_most(MAX_EPOCHS, "code_epochs", "digit_pretrain_epochs", "digit_epochs", "domain_pretrain_epochs",
                             "domain_moe_epochs", "converge_cap", "stop_patience")
        if self.converge_cap < 0 or (self.stop_patience is not None and self.stop_patience < 1):
            raise ParameterError(f"parameters 'converge_cap' (>= 0) and 'stop_patience' (>= 1 or None) got "
                                 f"{self.converge_cap} and {self.stop_patience}")
        self.require_at_most(MAX_WIDTH, "max_len", "code_d_model", "code_heads", "code_ff", "digit_hidden",
                             "domain_d_model", "domain_heads", "domain_ff", "text_batch", "digit_batch")
        self.require_at_most(MAX_LAYERS, "code_layers", "domain_layers")
        self.require_at_most(MAX_SAMPLES, "eval_samples", "code_samples", "domain_pretrain_samples", "domain_moe_samples")
        self.require_finite("text_lr", "digit_lr", "entropy_weight")
        if not 0 <= self.digit_dropout < 1:
            raise ParameterError(f"parameter 'digit_dropout' must be in [0, 1), got {self.digit_dropout}")
        for name in ("code", "domain"):
            d, h = getattr(self, f"{name}_d_model"), getattr(self, f"{name}_heads")
            if d % h:
                raise ParameterError(f"parameter '{name}_d_model' ({d}) must be a multiple of '{name}_heads' ({h})")

    def preflight(self) -> None:
        """The tokenizer folder and the MNIST folder (when given) exist and hold what they should (checked before torch
        loads); the device exists."""
        tokenizer_path(self.tokenizer)
        if self.mnist_data_dir is not None:
            check_idx_dir(self.mnist_data_dir)
        super().preflight()

    def paper_sizes(self, which: str) -> bool:
        """Whether experiment 1 ('code') or 3 ('domain') runs at the paper's model sizes."""
        return all(getattr(self, f"{which}_{k}") == v for k, v in PAPER_SIZES[which].items())

    def adam(self, which: str, seed: int, epochs: int, desc: str) -> TrainConfig:
        """The paper's training of the 'text' or 'digit' models: Adam (no weight decay) at `<which>_lr`, batches of
        `<which>_batch`, every epoch run and the best on validation kept."""
        lr, batch = getattr(self, f"{which}_lr"), getattr(self, f"{which}_batch")
        return TrainConfig(lr=lr, weight_decay=0.0, batch_size=batch, virtual_batch=batch, max_epochs=epochs,
                           patience=min(epochs, self.stop_patience or epochs), seed=seed, desc=desc)

    def converged(self) -> "RoutingHeatmapsConfig":
        """The extension's config: the first seed, every phase until its validation loss stops improving for
        PAPER_PATIENCE epochs, at most `converge_cap` epochs."""
        cap = self.converge_cap
        return replace(self, n_seeds=1, stop_patience=PAPER_PATIENCE, code_epochs=cap, digit_pretrain_epochs=cap,
                       digit_epochs=cap, domain_pretrain_epochs=cap, domain_moe_epochs=cap)
