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
# what each stage kind in the cache holds (the bench page names them)
STAGE_KINDS = {"task1/prefix": "frozen-prefix states (computed once)", "task1/stage1": "stage 1: top blocks + global head",
               "task1/features": "pooled features of every question", "task1/expert": "stage 2: MoE head experts",
               "task1/residual": "stage 2: RED residual experts", "task1/code": "stage 2: code-variant experts",
               "task1/router": "stage 3: router", "task1/joint": "stage 4: residuals and router tuned jointly"}
METHODS = ("global head", "oracle experts", "uniform averaging", "softmax MoE", "RED", "RED stage 4", "RED code variant")


def spec_for(cfg: Task1Config, seed: int, split: str) -> Task1Spec:
    """The dataset a (config, seed, split) uses."""
    n_train, n_val, n_test = cfg.SIZES[cfg.dataset_size]
    return Task1Spec(cfg.operand_min, cfg.operand_max, cfg.n_templates, n_train, n_val, n_test, split, seed)


def train_config(cfg: Task1Config, seed: int, desc: str, lr: float, epochs: int | None = None) -> TrainConfig:
    """The fit-loop settings of a Task 1 stage."""
    return TrainConfig(lr=lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, virtual_batch=cfg.virtual_batch,
                       max_epochs=epochs or cfg.max_epochs, patience=cfg.patience, seed=seed, desc=desc)


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
    labels = {k: torch.tensor(df["label"].to_numpy()) for k, df in data.items()}
    ranges = {k: torch.tensor(df["range"].to_numpy()) for k, df in data.items()}
    tokens = bb.tokenize(texts)
    base_key = {"stage": STAGE_VERSION, "backbone": str(bb.path), "k": bb.k, "texts": _digest(texts)}
    dev = bb.device
    prefix = store.tensors("task1/prefix", base_key, lambda: ({"prefix": bb.prefix(tokens)}, {}))[0]["prefix"].to(dev)
    seconds["prefix cache"] = time.time() - t0

    # Stage 1: top-k blocks + global head on a fraction of train
    t0 = time.time()
    seed_everything(seed)
    bb.reset_top()
    head = nn.Linear(bb.dim, N_CLASSES).to(dev)
    sub = subsample(pd.DataFrame({"i": ids["train"].numpy(), "y": labels["train"].numpy()}), cfg.backbone_fraction, seed)
    tc1 = train_config(cfg, seed, "stage 1: top blocks + head", cfg.lr, cfg.backbone_epochs)
    key1 = {**base_key, "data": asdict(spec), "fraction": cfg.backbone_fraction, "train": asdict(tc1)}
    model1 = _Stage1(bb, head, prefix, tokens.attention_mask.to(dev))
    trainable = nn.ModuleDict({"top": bb.top_blocks(), "head": head})

    def train1(_: nn.Module) -> dict:
        tr = (torch.tensor(sub["i"].to_numpy()), torch.tensor(sub["y"].to_numpy()))
        # validation repeats few distinct questions: score each once (the top blocks are the costly part)
        val_ids, first = np.unique(ids["val"].numpy(), return_index=True)
        res = fit(model1, _ce, tr, (torch.as_tensor(val_ids), labels["val"][first]), tc1)
        return {"best_epoch": res.best_epoch, "epochs_run": len(res.history)}

    store.module("task1/stage1", key1, trainable, train1)
    bb.eval()
    head.requires_grad_(False)
    seconds["stage 1 (backbone + global head)"] = time.time() - t0

    # Pooled features of every distinct question with the fixed backbone
    t0 = time.time()

    @torch.no_grad()
    def pooled() -> tuple[dict[str, Tensor], dict]:
        return {"h": torch.cat([bb.forward_top(prefix[s:s + 512], model1.mask[s:s + 512])
                                for s in range(0, len(texts), 512)])}, {}

    h_all = store.tensors("task1/features", key1, pooled)[0]["h"].to(dev)
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

        model.to(dev)
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
    train_module("joint stage 4", _Joint(red4, router4), lambda m, b: F.cross_entropy(m(b[0]), b[1]), None, labels,
                 {"rank": rank, "from_router": True})  # a router of another width fails to load and is retrained
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
    true_range = torch.tensor(run.data[split]["range"].to_numpy())
    mix = ProbMixture(run.experts)
    alpha = run.router(h)
    alphas = {"oracle experts": F.one_hot(true_range, K).float(), "uniform averaging": torch.full((len(h), K), 1 / K),
              "softmax MoE": alpha}
    probs = {"global head": (run.head(h).softmax(-1), None)}
    for name, a in alphas.items():
        probs[name] = (mix(h, a.to(h.device)), a)
    probs["RED"] = (ResidualMixture(run.residuals, run.head)(h, alpha), alpha)
    a4 = run.router4(h)
    probs["RED stage 4"] = (run.red4(h, a4), a4)
    probs["RED code variant"] = (LogitMixture(run.code_experts, run.head, run.code_scale)(h, alpha), alpha)
    return {k: (p.argmax(-1).cpu().numpy(), None if a is None else a.cpu().numpy()) for k, (p, a) in probs.items()}


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
        pred = run.router(run.features[split]).argmax(-1).cpu().numpy()
        rows.append({"split_part": split, "router_accuracy": accuracy(run.data[split]["range"].to_numpy(), pred)})
    return pd.DataFrame(rows).assign(seed=run.seed, split=run.split)


@torch.no_grad()
def case_study(run: Task1Run, bb: Backbone, queries: list[str]) -> pd.DataFrame:
    """Router weights and each routed method's answer for a few hand-picked questions (call right after run_task1)."""
    h = bb(bb.tokenize(queries)).to(run.head.weight.device)
    alpha = run.router(h)
    answers = {"global head": run.head(h), "softmax MoE": ProbMixture(run.experts)(h, alpha),
               "RED": ResidualMixture(run.residuals, run.head)(h, alpha)}
    rows = []
    for j, q in enumerate(queries):
        row = {"query": q, **{f"alpha {RANGE_NAMES[i].split()[0]}": float(alpha[j, i]) for i in range(K)}}
        row |= {f"{m} answer": int(v[j].argmax()) + 2 for m, v in answers.items()}
        rows.append(row)
    return pd.DataFrame(rows).assign(seed=run.seed, split=run.split)


# Qwen3-0.6B's published shape, for counting parameters from the configuration alone (no weights).
QWEN3_0_6B = {"vocab_size": 151_936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True}


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def parameter_cost(bb: Backbone, cfg: Task1Config, query: str) -> pd.DataFrame:
    """Parameters of RED's residuals + router vs the backbone and the MoE's experts; router vs backbone compute."""
    from transformers import Qwen3Config, Qwen3Model

    with torch.device("meta"):
        qwen = Qwen3Model(Qwen3Config(**QWEN3_0_6B))
    tokens = int(bb.tokenize([query]).attention_mask.sum())
    shapes = [(f"{cfg.backbone} ({type(bb.full).__name__})", bb.dim, bb.full, bb.full.get_input_embeddings()),
              ("Qwen3-0.6B shape", QWEN3_0_6B["hidden_size"], qwen, qwen.get_input_embeddings())]
    rows = []
    for name, d, model, emb in shapes:
        with torch.device("meta"):
            residual = LowRankResidual(d, max(1, d // cfg.rank_divisor))
            router = Router(d, K, cfg.router_hidden)
            expert = HeadExpert(d, N_CLASSES, cfg.expert_hidden)
        backbone, body = _count(model), _count(model) - _count(emb)
        red = K * _count(residual) + _count(router)
        router_macs = _count(router) - sum(m.out_features for m in router.modules() if isinstance(m, nn.Linear))
        rows.append({"backbone": name, "d": d, "backbone parameters": backbone, "RED residuals + router": red,
                     "RED share of backbone": red / backbone, "MoE experts": K * _count(expert),
                     "MoE / RED expert parameters": (K * _count(expert)) / (K * _count(residual)),
                     "router share of compute": router_macs / (body * tokens), "tokens per question": tokens})
    return pd.DataFrame(rows)
