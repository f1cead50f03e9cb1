"""The one training loop every experiment uses: AdamW, virtual batch, early stopping, best state restored."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from tqdm import tqdm

from .runtime import generator
from .settings import ADAMW, ADAMW_KINDS, CAP_LIMIT, PRECISIONS, TrainConfig, progress_enabled

Batch = Sequence[Tensor]
LossFn = Callable[[nn.Module, Batch], Tensor]


def adamw(params: list[nn.Parameter], lr: float, weight_decay: float, kind: str = ADAMW) -> torch.optim.AdamW:
    """AdamW over `params`, fused where asked and the parameters' device has it (CPU, CUDA), else foreach."""
    if kind not in ADAMW_KINDS:
        raise ValueError(f"AdamW kind must be one of {', '.join(ADAMW_KINDS)}, got {kind!r}")
    device = params[0].device.type if params else "cpu"
    how = {"fused": True} if kind == "fused" and device in ("cpu", "cuda") else {"foreach": True}
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **how)


@dataclass
class FitResult:
    """What a fit did: per-epoch losses, the epoch whose state was kept, and its validation loss."""

    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = -1
    best_val_loss: float = math.inf
    stopped_early: bool = False
    cap: int = 0  # the epoch cap it ended under: the config's, or that cap doubled as often as the rule asked


def autocast(model: nn.Module, precision: str) -> torch.autocast:
    """The context a fit's forward passes run in: bf16 autocast on the model's device for "bf16" (its products in
    bf16, its weights and reductions in fp32), else a no-op."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    device = _device_of(model)
    return torch.autocast(device.type if device is not None else "cpu", dtype=torch.bfloat16,
                          enabled=precision == "bf16")


def next_cap(epochs_run: int, cap: int, cfg: TrainConfig) -> int:
    """The convergence rule, after `epochs_run` epochs under `cap` without early stopping: the cap it trains on under
    (`cap` while below it; at it, doubled when `cfg.double_cap`, else unchanged: the fit ends). Nothing in a fit
    depends on its cap but where it ends, so training on under the doubled cap is the re-run with the cap doubled,
    bit for bit (`tests/test_train.py`)."""
    if epochs_run < cap or not cfg.double_cap:
        return cap
    return min(2 * cap, CAP_LIMIT) if cap < CAP_LIMIT else cap


def _batches(data: Batch, batch_size: int, order: Tensor | None = None, device: torch.device | None = None):
    n = len(data[0])
    idx = order if order is not None else torch.arange(n)
    for start in range(0, n, batch_size):
        sel = idx[start : start + batch_size]
        yield [t[sel].to(device) if device is not None else t[sel] for t in data]


def _device_of(model: nn.Module) -> torch.device | None:
    p = next(model.parameters(), None)
    return p.device if p is not None else None


@torch.no_grad()
def evaluate_loss(model: nn.Module, loss_fn: LossFn, data: Batch, batch_size: int = 1024,
                  precision: str = "fp32") -> float:
    """Mean loss of `model` over `data`, in eval mode, weighted by batch size (forward in `precision`)."""
    model.eval()
    total, n = 0.0, 0
    for batch in _batches(data, batch_size, device=_device_of(model)):
        k = len(batch[0])
        with autocast(model, precision):
            loss = loss_fn(model, batch)
        total += float(loss) * k
        n += k
    return total / max(n, 1)


def fit(model: nn.Module, loss_fn: LossFn, train: Batch, val: Batch, cfg: TrainConfig) -> FitResult:
    """Train the parameters of `model` that require grad; keep the state with the lowest validation loss (forward
    passes, validation's too, in `cfg.precision`; weights and AdamW in fp32)."""
    if cfg.virtual_batch % cfg.batch_size:
        raise ValueError(f"virtual_batch ({cfg.virtual_batch}) must be a multiple of batch_size ({cfg.batch_size})")
    accum = cfg.virtual_batch // cfg.batch_size
    params = [p for p in model.parameters() if p.requires_grad]
    opt = adamw(params, cfg.lr, cfg.weight_decay, cfg.optimizer)
    gen = generator(cfg.seed)
    n = len(train[0])
    result = FitResult()
    best_state = copy.deepcopy(model.state_dict())
    waited = 0
    cap = cfg.max_epochs
    bar = tqdm(total=cap, desc=cfg.desc, leave=False, disable=not progress_enabled(), mininterval=1.0)
    epoch = 0
    while epoch < cap:
        model.train()
        order = torch.randperm(n, generator=gen)
        opt.zero_grad(set_to_none=True)
        running, steps = 0.0, 0
        n_batches = math.ceil(n / cfg.batch_size)
        for i, batch in enumerate(_batches(train, cfg.batch_size, order, _device_of(model))):
            # the last group of an epoch may be short: scale by its real size
            group = min(accum, n_batches - (i // accum) * accum)
            with autocast(model, cfg.precision):
                loss = loss_fn(model, batch)
            (loss / group).backward()
            running += loss.item()
            steps += 1
            if (i + 1) % accum == 0 or i + 1 == n_batches:
                opt.step()
                opt.zero_grad(set_to_none=True)
        val_loss = evaluate_loss(model, loss_fn, val, precision=cfg.precision)
        result.history.append({"epoch": epoch, "train_loss": running / max(steps, 1), "val_loss": val_loss})
        bar.set_postfix(val=f"{val_loss:.3g}", refresh=False)
        if val_loss < result.best_val_loss - cfg.min_delta:
            result.best_val_loss, result.best_epoch, waited = val_loss, epoch, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            waited += 1
            if waited >= cfg.patience:
                result.stopped_early = True
                break
        epoch += 1
        bar.update()
        cap = next_cap(epoch, cap, cfg)
        bar.total = cap
    bar.close()
    result.cap = cap
    model.load_state_dict(best_state)
    model.eval()
    return result
