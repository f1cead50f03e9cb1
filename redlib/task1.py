"""Task 1 stages: backbone stage (top-k blocks + global head), range experts, routers, RED variants; evaluation.

Stage 1 trains on the frozen-prefix cache (only the top k blocks run); once it is fixed, pooled features of
every distinct question are cached and stages 2-4 train small modules on them. Every stage is stored under
the hash of what produced it, so a re-run loads it instead of training again.
"""

from __future__ import annotations

import copy
import hashlib
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .arithmetic import BOUNDARY_SUMS, N_CLASSES, RANGE_NAMES, RANGES, Task1Spec, make_task1, subsample
from .backbone import Backbone
from .combiners import LogitMixture, ProbMixture, ResidualMixture
from .config import Task1Config
from .experts import HeadExpert, LowRankLogits, LowRankResidual
from .metrics import accuracy, macro_f1
from .routers import Router
from .runtime import seed_everything
from .store import Store
from .train import TrainConfig, fit

STAGE_VERSION = 1
K = len(RANGES)
METHODS = ("global head", "oracle experts", "uniform averaging", "softmax MoE", "RED", "RED stage 4", "RED code variant")


def spec_for(cfg: Task1Config, seed: int, split: str) -> Task1Spec:
    """The dataset a (config, seed, split) uses."""
    n_train, n_val, n_test = cfg.SIZES[cfg.dataset_size]
    return Task1Spec(cfg.operand_min, cfg.operand_max, cfg.n_templates, n_train, n_val, n_test, split, seed)


def train_config(cfg: Task1Config, seed: int, desc: str, lr: float) -> TrainConfig:
    """The fit-loop settings of a Task 1 stage."""
    return TrainConfig(lr=lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, virtual_batch=cfg.virtual_batch,
                       max_epochs=cfg.max_epochs, patience=cfg.patience, seed=seed, desc=desc)


def _digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]


@dataclass
class Task1Run:
    """Everything one (seed, split) run produces."""

    seed: int
    split: str
    data: dict[str, pd.DataFrame]
    features: dict[str, Tensor]  # split name -> (N, d) pooled features per sample
    head: nn.Linear
    experts: list[nn.Module]
    residuals: list[nn.Module]
    code_experts: list[nn.Module]
    router: Router
    red4: ResidualMixture
    router4: Router
    code_scale: float = 0.1
    seconds: dict[str, float] = field(default_factory=dict)


class _Stage1(nn.Module):
    """Top k blocks + linear head over cached prefix states, indexed by distinct-question id."""

    def __init__(self, bb: Backbone, head: nn.Linear, prefix: Tensor, mask: Tensor):
        super().__init__()
        self.bb, self.head = bb, head
        self.register_buffer("prefix", prefix, persistent=False)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, idx: Tensor) -> Tensor:
        return self.head(self.bb.forward_top(self.prefix[idx], self.mask[idx]))


def _ce(model: nn.Module, batch) -> Tensor:
    x, y = batch
    return F.cross_entropy(model(x), y)


def run_task1(cfg: Task1Config, seed: int, split: str, bb: Backbone, store: Store) -> Task1Run:
    """All stages for one seed and split, each loaded from the cache when already computed."""
    seconds: dict[str, float] = {}
    t0 = time.time()
    spec = spec_for(cfg, seed, split)
    data = make_task1(spec)
    texts = sorted(set().union(*(set(df["text"]) for df in data.values())))
    index = {t: i for i, t in enumerate(texts)}
    ids = {k: torch.tensor(df["text"].map(index).to_numpy()) for k, df in data.items()}
    labels = {k: torch.as_tensor(df["label"].to_numpy()) for k, df in data.items()}
    ranges = {k: torch.as_tensor(df["range"].to_numpy()) for k, df in data.items()}
    tokens = bb.tokenize(texts)
    base_key = {"stage": STAGE_VERSION, "backbone": str(bb.path), "k": bb.k, "texts": _digest(texts)}
    prefix = store.tensors("task1/prefix", base_key, lambda: ({"prefix": bb.prefix(tokens)}, {}))[0]["prefix"]
    seconds["prefix cache"] = time.time() - t0

    # Stage 1: top-k blocks + global head on a fraction of train
    t0 = time.time()
    seed_everything(seed)
    bb.reset_top()
    head = nn.Linear(bb.dim, N_CLASSES)
    sub = subsample(pd.DataFrame({"i": ids["train"].numpy(), "y": labels["train"].numpy()}), cfg.backbone_fraction, seed)
    tc1 = train_config(cfg, seed, "stage 1: top blocks + head", cfg.lr)
    key1 = {**base_key, "data": asdict(spec), "fraction": cfg.backbone_fraction, "train": asdict(tc1)}
    model1 = _Stage1(bb, head, prefix, tokens.attention_mask)
    trainable = nn.ModuleDict({"top": bb.top_blocks(), "head": head})

    def train1(_: nn.Module) -> dict:
        tr = (torch.as_tensor(sub["i"].to_numpy()), torch.as_tensor(sub["y"].to_numpy()))
        res = fit(model1, _ce, tr, (ids["val"], labels["val"]), tc1)
        return {"best_epoch": res.best_epoch, "epochs_run": len(res.history)}

    store.module("task1/stage1", key1, trainable, train1)
    bb.eval()
    head.requires_grad_(False)
    seconds["stage 1 (backbone + global head)"] = time.time() - t0

    # Pooled features of every distinct question with the fixed backbone
    t0 = time.time()

    @torch.no_grad()
    def pooled() -> tuple[dict[str, Tensor], dict]:
        return {"h": torch.cat([bb.forward_top(prefix[s:s + 512], tokens.attention_mask[s:s + 512])
                                for s in range(0, len(texts), 512)])}, {}

    h_all = store.tensors("task1/features", key1, pooled)[0]["h"]
    feats = {k: h_all[v] for k, v in ids.items()}
    seconds["pooled features"] = time.time() - t0
    d, rank = bb.dim, max(1, bb.dim // cfg.rank_divisor)

    def train_module(name: str, model: nn.Module, loss, sel: dict[str, Tensor] | None, targets: dict[str, Tensor],
                     extra: dict) -> nn.Module:
        tc = train_config(cfg, seed, name, cfg.head_lr)
        key = {**key1, "module": name, "train2": asdict(tc), **extra}

        def train(m: nn.Module) -> dict:
            pick = (lambda k: sel[k]) if sel else (lambda k: slice(None))
            res = fit(m, loss, (feats["train"][pick("train")], targets["train"][pick("train")]),
                      (feats["val"][pick("val")], targets["val"][pick("val")]), tc)
            return {"best_epoch": res.best_epoch, "epochs_run": len(res.history)}

        store.module("task1/" + name.split()[0], key, model, train)
        return model.requires_grad_(False).eval()

    # Stage 2: experts, each trained alone on its own range
    t0 = time.time()
    experts, residuals, code_experts = [], [], []
    for i in range(K):
        sel = {k: ranges[k] == i for k in ("train", "val")}
        seed_everything(seed * 100 + i)
        experts.append(train_module(f"expert R{i + 1}", HeadExpert(d, N_CLASSES, cfg.expert_hidden), _ce, sel, labels,
                                    {"hidden": cfg.expert_hidden}))
        seed_everything(seed * 100 + i)
        res = LowRankResidual(d, rank)
        residuals.append(train_module(f"residual R{i + 1}", res, lambda m, b: F.cross_entropy(head(b[0] + m(b[0])), b[1]),
                                      sel, labels, {"rank": rank}))
        seed_everything(seed * 100 + i)
        code = LowRankLogits(d, rank, N_CLASSES)
        code_experts.append(train_module(
            f"code R{i + 1}", code, lambda m, b: F.cross_entropy(head(b[0]) + cfg.code_scale * m(b[0]), b[1]),
            sel, labels, {"rank": rank, "scale": cfg.code_scale}))
    seconds["stage 2 (15 experts)"] = time.time() - t0

    # Stage 3: router on range labels, experts frozen
    t0 = time.time()
    seed_everything(seed)
    router = train_module("router", Router(d, K, cfg.router_hidden), lambda m, b: F.cross_entropy(m.logits(b[0]), b[1]),
                          None, ranges, {"hidden": cfg.router_hidden})
    seconds["stage 3 (router)"] = time.time() - t0

    # Stage 4 variant: residuals and router tuned together on all data
    t0 = time.time()
    router4 = copy.deepcopy(router).requires_grad_(True)
    red4 = ResidualMixture([copy.deepcopy(r).requires_grad_(True) for r in residuals], head)
    joint = nn.ModuleDict({"residuals": red4.residuals, "router": router4})
    train_module("joint stage 4", _Joint(red4, router4), lambda m, b: F.cross_entropy(m(b[0]), b[1]), None, labels,
                 {"rank": rank, "from_router": True})
    joint.requires_grad_(False)
    seconds["stage 4 (joint tuning)"] = time.time() - t0
    return Task1Run(seed, split, data, feats, head, experts, residuals, code_experts, router, red4, router4,
                    cfg.code_scale, seconds)


class _Joint(nn.Module):
    """RED logits with its own router, so residuals and router train together."""

    def __init__(self, red: ResidualMixture, router: Router):
        super().__init__()
        self.red, self.router = red, router

    def forward(self, h: Tensor) -> Tensor:
        return self.red.logits(h, self.router(h))


@torch.no_grad()
def predict(run: Task1Run, split: str = "test") -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Predicted labels (and routing weights where a method routes) of every method on a split."""
    h = run.features[split]
    true_range = torch.as_tensor(run.data[split]["range"].to_numpy())
    mix = ProbMixture(run.experts)
    alpha = run.router(h)
    alphas = {"oracle experts": F.one_hot(true_range, K).float(), "uniform averaging": torch.full((len(h), K), 1 / K),
              "softmax MoE": alpha}
    out: dict[str, tuple[np.ndarray, np.ndarray | None]] = {"global head": (run.head(h).argmax(-1).numpy(), None)}
    for name, a in alphas.items():
        out[name] = (mix(h, a).argmax(-1).numpy(), a.numpy())
    out["RED"] = (ResidualMixture(run.residuals, run.head)(h, alpha).argmax(-1).numpy(), alpha.numpy())
    a4 = run.router4(h)
    out["RED stage 4"] = (run.red4(h, a4).argmax(-1).numpy(), a4.numpy())
    out["RED code variant"] = (LogitMixture(run.code_experts, run.head, run.code_scale)(h, alpha).argmax(-1).numpy(),
                               alpha.numpy())
    return out


def score(run: Task1Run, split: str = "test") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Overall and per-range accuracy / macro-F1 of every method, plus accuracy on boundary sums."""
    df = run.data[split]
    y, rng, s = df["label"].to_numpy(), df["range"].to_numpy(), df["sum"].to_numpy()
    boundary = np.isin(s, BOUNDARY_SUMS)
    overall, per_range = [], []
    for method, (pred, _) in predict(run, split).items():
        overall.append({"method": method, "accuracy": accuracy(y, pred), "macro_f1": macro_f1(y, pred, np.unique(y)),
                        "boundary_accuracy": accuracy(y[boundary], pred[boundary]) if boundary.any() else np.nan})
        for i in range(K):
            sel = rng == i
            per_range.append({"method": method, "range": RANGE_NAMES[i], "accuracy": accuracy(y[sel], pred[sel]),
                              "macro_f1": macro_f1(y[sel], pred[sel], np.unique(y[sel]))})
    meta = {"seed": run.seed, "split": run.split}
    return pd.DataFrame(overall).assign(**meta), pd.DataFrame(per_range).assign(**meta)


@torch.no_grad()
def router_accuracy(run: Task1Run) -> pd.DataFrame:
    """The router's own range-classification accuracy on train, val and test."""
    rows = []
    for split in ("train", "val", "test"):
        pred = run.router(run.features[split]).argmax(-1).numpy()
        rows.append({"split_part": split, "router_accuracy": accuracy(run.data[split]["range"].to_numpy(), pred)})
    return pd.DataFrame(rows).assign(seed=run.seed, split=run.split)
