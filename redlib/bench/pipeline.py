"""The pipeline's own measurements for `make bench`: what the frozen-prefix and feature caches buy over recomputing
the backbone (on the embedded backbone and on stacks of Qwen3-0.6B's shape), and inference throughput of the global
head, the softmax MoE and RED."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ..configs.task1_addition import Task1Config
from ..models.backbone import Backbone
from ..models.combiners import ProbMixture, ResidualMixture
from ..models.folders import embedded_path
from ..red.types import expert_module, residual_module, router_module
from ..tasks.arithmetic import N_CLASSES, RANGE_NAMES, Task1Spec
from ..tasks.arithmetic_data import make_task1
from .micro import timed

PAPER_BATCH = 16  # the paper's micro-batch (accumulated to 64); ours is Task 1's batch_size
# Qwen3-0.6B: 28 blocks, hidden 1024, MLP 3072, 16 heads (8 KV), head dim 128. On a 2-core CPU the
# stack keeps its depth and shape ratios at a quarter of the width.
QWEN_SHAPE = {"num_hidden_layers": 28, "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 64}


def qwen_shaped(layers: int, root: Path) -> Path:
    """A randomly initialised Qwen3 stack of Qwen3-0.6B's shape (reduced width) with `layers` blocks, on disk."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

    path = root / f"qwen3_shaped_{layers}"
    if not (path / "config.json").exists():
        tok = AutoTokenizer.from_pretrained(embedded_path(), local_files_only=True)
        torch.manual_seed(0)
        Qwen3Model(Qwen3Config(vocab_size=tok.vocab_size, **{**QWEN_SHAPE, "num_hidden_layers": layers})).save_pretrained(path)
        tok.save_pretrained(path)
    return path


def _questions(n: int) -> list[str]:
    return make_task1(Task1Spec(n_train=n, n_val=1, n_test=1, split="iid", n_templates=5, seed=0))["train"]["text"].tolist()


def prefix_vs_naive(backbone: str, n: int, batches: list[int], reps: int, k: int = 2) -> list[dict]:
    """One epoch of stage-1 training (top k blocks + head) with the cached prefix and with the full forward, per batch size."""
    torch.manual_seed(0)
    bb = Backbone(backbone, k)
    tokens = bb.tokenize(_questions(n))
    t = time.perf_counter()
    prefix = bb.prefix(tokens)
    prefix_seconds = time.perf_counter() - t
    head = nn.Linear(bb.dim, N_CLASSES)
    y = torch.randint(N_CLASSES, (n,), generator=torch.Generator().manual_seed(0))
    params = [p for p in bb.parameters() if p.requires_grad] + list(head.parameters())
    L = bb.n_blocks
    common = {"backbone": backbone if backbone == "embedded" else Path(backbone).name, "blocks": L, "k": k, "samples": n,
              "tokens_per_sample": int(tokens.attention_mask.sum(1).float().mean()), "prefix_seconds_once": prefix_seconds,
              "bound": (L + 2 * k) / (3 * k)}
    rows = []
    for batch in batches:
        opt = torch.optim.AdamW(params, lr=1e-5)  # the fit loop's optimiser

        def epoch(cached: bool) -> None:
            for s in range(0, n, batch):
                ids, mask = tokens.input_ids[s:s + batch], tokens.attention_mask[s:s + batch]
                h = bb.forward_top(prefix[s:s + batch], mask) if cached else bb(type(tokens)(ids, mask))
                F.cross_entropy(head(h), y[s:s + batch]).backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

        cached, naive = timed(lambda: epoch(True), reps), timed(lambda: epoch(False), reps)
        rows.append({**common, "batch": batch, "cached_epoch": cached, "naive_epoch": naive,
                     "speedup": naive["median"] / cached["median"]})
    return rows


def features_vs_recompute(n: int, batch: int, reps: int) -> dict:
    """One epoch of router training on cached pooled features vs recomputing the (frozen) backbone each step."""
    torch.manual_seed(0)
    bb = Backbone("embedded", 0)
    tokens = bb.tokenize(_questions(n))
    with torch.no_grad():
        feats = torch.cat([bb(type(tokens)(tokens.input_ids[s:s + 256], tokens.attention_mask[s:s + 256]))
                           for s in range(0, n, 256)])
    K = len(RANGE_NAMES)
    r = torch.randint(K, (n,), generator=torch.Generator().manual_seed(0))
    router = router_module(Task1Config(), bb.dim, K)
    opt = torch.optim.AdamW(router.parameters(), lr=1e-4)

    def epoch(cached: bool) -> None:
        for s in range(0, n, batch):
            if cached:
                h = feats[s:s + batch]
            else:
                with torch.no_grad():
                    h = bb(type(tokens)(tokens.input_ids[s:s + batch], tokens.attention_mask[s:s + batch]))
            F.cross_entropy(router.logits(h), r[s:s + batch]).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    cached, recompute = timed(lambda: epoch(True), reps), timed(lambda: epoch(False), reps)
    return {"samples": n, "batch": batch, "cached_epoch": cached, "recompute_epoch": recompute,
            "speedup": recompute["median"] / cached["median"]}


@torch.no_grad()
def throughput(n: int, reps: int) -> dict:
    """Queries per second of the global head, softmax MoE and RED on cached features, and the backbone's own rate."""
    torch.manual_seed(0)
    bb = Backbone("embedded", 2)
    d, K, cfg = bb.dim, len(RANGE_NAMES), Task1Config()  # the modules Task 1 trains, at its default sizes
    h = torch.randn(n, d)
    head, router = nn.Linear(d, N_CLASSES), router_module(cfg, d, K)
    moe = ProbMixture([expert_module(cfg, d, N_CLASSES) for _ in range(K)])
    red = ResidualMixture([residual_module(cfg, d) for _ in range(K)], head)
    methods = {"global head": lambda: head(h).argmax(-1), "softmax MoE": lambda: moe(h, router(h)).argmax(-1),
               "RED": lambda: red(h, router(h)).argmax(-1)}
    out = {m: {**timed(fn, reps)} for m, fn in methods.items()}
    for m in out:
        out[m]["queries_per_second"] = n / out[m]["median"]
    tokens = bb.tokenize(_questions(min(n, 2048)))
    backbone = timed(lambda: bb(tokens), max(1, reps // 2))
    qps_backbone = len(tokens.input_ids) / backbone["median"]
    red_extra = (1 / out["RED"]["queries_per_second"]) / (1 / qps_backbone)
    return {"methods": out, "backbone": {**backbone, "queries_per_second": qps_backbone},
            "red_extra_cost_vs_backbone": red_extra,
            "params": {"backbone": sum(p.numel() for p in bb.full.parameters()),
                       "red_residuals_and_router": sum(p.numel() for p in [*red.residuals.parameters(), *router.parameters()]),
                       "moe_experts_and_router": sum(p.numel() for p in [*moe.parameters(), *router.parameters()])}}
