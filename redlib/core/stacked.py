"""Stacked small stages: several same-shaped modules, each with its own data, trained as one with a leading expert axis.

The experts of one kind in one seed (classifier experts, RED residuals, code experts, op experts) are tiny models on
cached features, so a separate fit costs about one Python step per batch per expert. Stacked, each `nn.Linear` of
the experts becomes one batched product over the experts (`torch.baddbmm`), and a step serves them all. It is the
same mathematics as `train.fit` run once per expert:

- each expert keeps its own parameters (the stack holds the experts' own tensors, nothing is copied), its own data
  order (its own generator, seeded as its fit would be), its own virtual batch and short last group;
- each expert has its own AdamW state and step count: every parameter is its own tensor in the optimiser, and an
  expert steps only when its own group is complete (the others' gradients are set aside for that step);
- each expert has its own early stopping on its own validation loss; a stopped expert leaves the stack (its
  parameters no longer change) and its best state is restored at the end.

Only the order of fp32 sums differs from separate fits (a batched product, a masked mean over a padded batch), so
the parameters agree with separate fits to fp32 round-off (`tests/test_stacked.py` states the bound measured).
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.optim.adamw import adamw as adamw_update
from tqdm import tqdm

from .runtime import generator
from .settings import progress_enabled
from .train import ADAMW, FitResult, TrainConfig, next_cap

# logits(model, h): the stage's answer for features h (..., d) -> (..., C); its loss is cross-entropy against y
LogitsFn = Callable[[nn.Module, Tensor], Tensor]
Pair = tuple[Tensor, Tensor]  # (features (N, d), classes (N,))
SHARED = ("lr", "weight_decay", "batch_size", "virtual_batch", "optimizer")  # knobs one stack must share


class StackedLinear(nn.Module):
    """The `nn.Linear` at one place in every expert as one batched product: weight (E, d_in, d_out), bias (E, 1, d_out),
    applied to the active experts' inputs (E_active, B, d_in) -> (E_active, B, d_out)."""

    def __init__(self, layers: list[nn.Linear]):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([layer.weight.detach().t() for layer in layers]).contiguous())
        has_bias = layers[0].bias is not None
        self.bias = nn.Parameter(torch.stack([layer.bias.detach() for layer in layers])[:, None]) if has_bias else None
        self.active: Tensor | None = None  # the experts computed (None: all)

    def forward(self, x: Tensor) -> Tensor:
        pick = (lambda t: t) if self.active is None else (lambda t: t[self.active])  # noqa: E731
        w = pick(self.weight)
        return torch.bmm(x, w) if self.bias is None else torch.baddbmm(pick(self.bias), x, w)

    def write(self, k: int, layer: nn.Linear) -> None:
        """Copy expert k's current weights into its own layer."""
        with torch.no_grad():
            layer.weight.copy_(self.weight[k].t())
            if self.bias is not None:
                layer.bias.copy_(self.bias[k, 0])


def stack(models: Sequence[nn.Module]) -> tuple[nn.Module, dict[str, StackedLinear]]:
    """One module computing every expert at once on (E, B, d) inputs: a copy of the first expert's structure whose
    `nn.Linear` layers are `StackedLinear`s holding every expert's weights (copied from the experts), by layer name.
    Every parameter must belong to a Linear (the elementwise layers between them are shared), and every expert
    must have the same structure and shapes."""
    template = models[0]
    names = [name for name, m in template.named_modules() if isinstance(m, nn.Linear) and name]
    in_linears = sum(p.numel() for name in names for p in template.get_submodule(name).parameters())
    if not names or in_linears != sum(p.numel() for p in template.parameters()):
        raise ValueError(f"stack: every parameter of {type(template).__name__} must belong to an nn.Linear inside it")
    shapes = lambda m: [(n, tuple(p.shape)) for n, p in m.named_parameters()]  # noqa: E731
    if any(shapes(m) != shapes(template) for m in models):
        raise ValueError("stack: the experts differ in structure or shapes")
    stacked = copy.deepcopy(template)
    layers: dict[str, StackedLinear] = {}
    for name in names:
        layers[name] = StackedLinear([m.get_submodule(name) for m in models])
        parent, _, child = name.rpartition(".")
        setattr(stacked.get_submodule(parent), child, layers[name])
    return stacked, layers


def _padded(pairs: list[Pair], orders: list[Tensor], rows: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each expert's rows in its order, zero-padded to `rows`: features (E, rows, d), classes (E, rows), and a
    mask (E, rows) of real rows."""
    E, d = len(pairs), pairs[0][0].shape[1]
    x = pairs[0][0].new_zeros(E, rows, d)
    y = pairs[0][1].new_zeros(E, rows)
    mask = torch.zeros(E, rows, device=x.device)
    for k, ((xs, ys), order) in enumerate(zip(pairs, orders)):
        n = len(order)
        x[k, :n], y[k, :n], mask[k, :n] = xs[order], ys[order], 1.0
    return x, y, mask


def _row_losses(stacked: nn.Module, logits: LogitsFn, x: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy of every row (E, B)."""
    out = logits(stacked, x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)


@torch.no_grad()
def _val_losses(stacked: nn.Module, logits: LogitsFn, vals: list[Pair], batch_size: int = 1024) -> list[float]:
    """Each active expert's mean validation loss (as `train.evaluate_loss`: batch means weighted by batch size)."""
    x, y, mask = _padded(vals, [torch.arange(len(v[1])) for v in vals], max(len(v[1]) for v in vals))
    total = torch.zeros(len(vals), dtype=torch.float64)
    for start in range(0, x.shape[1], batch_size):
        part = slice(start, start + batch_size)
        total += (_row_losses(stacked, logits, x[:, part], y[:, part]) * mask[:, part]).sum(1).double().cpu()
    return [float(t) / max(len(v[1]), 1) for t, v in zip(total, vals)]


def fit_stacked(models: Sequence[nn.Module], logits: LogitsFn, trains: Sequence[Pair], vals: Sequence[Pair],
                cfgs: Sequence[TrainConfig], desc: str = "stacked") -> list[FitResult]:
    """`train.fit` of every expert k on its own (trains[k], vals[k]) under cfgs[k], with the loss
    cross-entropy(logits(model, h), y), all trained at once; each expert ends holding its state of lowest
    validation loss."""
    E = len(models)
    if not E == len(trains) == len(vals) == len(cfgs):
        raise ValueError("fit_stacked: one train set, validation set and config per expert")
    for knob in SHARED:
        if len({getattr(c, knob) for c in cfgs}) > 1:
            raise ValueError(f"fit_stacked: the experts of one stack must share {knob!r}")
    tc = cfgs[0]
    if tc.virtual_batch % tc.batch_size:
        raise ValueError(f"virtual_batch ({tc.virtual_batch}) must be a multiple of batch_size ({tc.batch_size})")
    accum, bs = tc.virtual_batch // tc.batch_size, tc.batch_size
    stacked, layers = stack(models)
    stacked.train()
    opt = StackedAdamW(list(stacked.parameters()), tc.lr, tc.weight_decay, tc.optimizer)
    gens = [generator(c.seed) for c in cfgs]
    n_batches = [math.ceil(len(t[1]) / bs) for t in trains]
    results = [FitResult() for _ in models]
    waited = [0] * E
    live = [k for k in range(E) if cfgs[k].max_epochs and n_batches[k]]
    caps = [c.max_epochs or 0 for c in cfgs]  # each expert's cap, doubled by the convergence rule as `train.fit`'s
    for k in range(E):
        results[k].cap = caps[k]
    bar = tqdm(total=max((c.max_epochs or 0) for c in cfgs), desc=desc, leave=False, disable=not progress_enabled(),
               mininterval=1.0)
    epoch = 0
    while live:
        orders = [torch.randperm(len(trains[k][1]), generator=gens[k]) for k in live]
        x, y, mask = _padded([trains[k] for k in live], orders, max(n_batches[k] for k in live) * bs)
        running = _epoch(stacked, layers, opt, logits, (x, y, mask), live, n_batches, accum, E)
        _activate(layers, live, E)
        stacked.eval()
        val = _val_losses(stacked, logits, [vals[k] for k in live])
        stacked.train()
        for j, k in enumerate(list(live)):
            res, cfg = results[k], cfgs[k]
            res.history.append({"epoch": epoch, "train_loss": float(running[j]) / n_batches[k], "val_loss": val[j]})
            if val[j] < res.best_val_loss - cfg.min_delta:
                res.best_val_loss, res.best_epoch, waited[k] = val[j], epoch, 0
                for name, layer in layers.items():  # the expert's own module holds its best state
                    layer.write(k, models[k].get_submodule(name))
            else:
                waited[k] += 1
                res.stopped_early = waited[k] >= cfg.patience
            if not res.stopped_early:
                caps[k] = res.cap = next_cap(epoch + 1, caps[k], cfg)
            if res.stopped_early or epoch + 1 >= caps[k]:
                live.remove(k)
        epoch += 1
        bar.total = max([caps[k] for k in live] + [epoch])
        bar.update()
        bar.set_postfix(training=len(live), refresh=False)
    bar.close()
    for m in models:
        m.eval()
    return results


def _epoch(stacked: nn.Module, layers: dict[str, StackedLinear], opt: StackedAdamW, logits: LogitsFn,
           data: tuple[Tensor, Tensor, Tensor], live: list[int], n_batches: list[int], accum: int, E: int) -> Tensor:
    """One epoch of the `live` experts over their padded, ordered rows (E_live, rows, ...): each expert's batch i
    while it has one, an AdamW step for each expert whose group of `accum` batches (or its epoch) is complete.
    Returns each live expert's summed batch losses."""
    x, y, mask = data
    bs = x.shape[1] // max(n_batches[k] for k in live)
    groups = torch.tensor([[min(accum, n_batches[k] - (i // accum) * accum) for k in live]
                           for i in range(x.shape[1] // bs)], dtype=x.dtype, device=x.device)
    running = torch.zeros(len(live), dtype=x.dtype, device=x.device)
    _activate(layers, live, E)
    for i in range(len(groups)):
        rows = [j for j, k in enumerate(live) if i < n_batches[k]]  # positions in `live` with a batch i
        part = slice(i * bs, (i + 1) * bs)
        if len(rows) == len(live):  # every expert still has a batch i (the common case: no copies)
            act, xb, yb, mb, group = live, x[:, part], y[:, part], mask[:, part], groups[i]
        else:
            act = [live[j] for j in rows]
            _activate(layers, act, E)
            xb, yb, mb, group = x[rows, part], y[rows, part], mask[rows, part], groups[i, rows]
        per_expert = (_row_losses(stacked, logits, xb, yb) * mb).sum(1) / mb.sum(1)
        # the last group of an epoch may be short: each expert scales by its own group's real size
        (per_expert / group).sum().backward()
        if len(rows) == len(live):
            running += per_expert.detach()
        else:
            running[rows] += per_expert.detach()
        if (i + 1) % accum == 0 and len(act) == E:
            opt.step(None)  # every expert's group is complete
        elif due := [k for k in act if (i + 1) % accum == 0 or i + 1 == n_batches[k]]:
            opt.step(due)
    return running


def _activate(layers: dict[str, StackedLinear], experts: list[int], E: int) -> None:
    """Compute only `experts` from now on."""
    active = None if len(experts) == E else torch.tensor(experts)
    for layer in layers.values():
        layer.active = active


class StackedAdamW:
    """torch's AdamW (its functional form, fused where the device has it) over stacked parameters (E, ...), each
    expert's slice of each tensor a parameter of its own: its own moments and step count. A step updates the experts
    it names and no other, then clears their gradients (torch's optimiser keeps one step count per tensor, so it
    could not step part of one)."""

    def __init__(self, params: list[nn.Parameter], lr: float, weight_decay: float, kind: str = ADAMW):
        self.params, self.lr, self.weight_decay = params, lr, weight_decay
        self.fused = kind == "fused" and params[0].device.type in ("cpu", "cuda")
        E = params[0].shape[0]
        self.exp_avg = [torch.zeros_like(p) for p in params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in params]
        self.steps = [[torch.tensor(0.0) for _ in params] for _ in range(E)]

    @torch.no_grad()
    def step(self, experts: list[int] | None) -> None:
        """One step of `experts` (None: all of them) on their accumulated gradients, which are then cleared."""
        ks = range(len(self.steps)) if experts is None else experts
        tensors = [[t[k] for k in ks for t in ts] for ts in (self.params, [p.grad for p in self.params], self.exp_avg,
                                                             self.exp_avg_sq)]
        adamw_update(*tensors, [], [s for k in ks for s in self.steps[k]], foreach=not self.fused, fused=self.fused,
                     amsgrad=False, beta1=0.9, beta2=0.999, lr=self.lr, weight_decay=self.weight_decay, eps=1e-8,
                     maximize=False)
        for p in self.params:
            if experts is None:
                p.grad = None
            else:
                p.grad[experts] = 0.0
