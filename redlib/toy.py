"""Toy experiments A/B/C: experts for y = (a+b)/200 trained alone on five diagonal domains, then combined.

x = (a/100, b/100) with a, b in [1, 100]; a prediction is correct when round(200 * y_hat) == a + b,
i.e. when it is within half a unit of the true sum. Errors are reported in those units (|200 y_hat - (a+b)|).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from .combiners import OutputMixture, average_parameters
from .config import ToyConfig
from .experts import BasePlusResidual, LinearExpert, MLPExpert, ScaledExpert
from .metrics import per_group
from .runtime import generator, seed_everything
from .store import Store
from .train import TrainConfig, fit

DOMAINS: list[tuple[int, int]] = [(1, 20), (21, 40), (41, 60), (61, 80), (81, 100)]
DOMAIN_NAMES = [f"D{i + 1} [{lo},{hi}]" for i, (lo, hi) in enumerate(DOMAINS)]
STAGE_VERSION = 1  # bump when the training code of a toy stage changes, so old cache entries are not reused


@dataclass(frozen=True)
class ToyData:
    """Integer operands and the model's view of them: x (N, 2) and y (N, 1)."""

    a: Tensor
    b: Tensor

    @property
    def x(self) -> Tensor:
        return torch.stack([self.a, self.b], 1).float() / 100

    @property
    def y(self) -> Tensor:
        return ((self.a + self.b).float() / 200).unsqueeze(1)

    def subset(self, idx: Tensor) -> "ToyData":
        return ToyData(self.a[idx], self.b[idx])


def grid(lo: int = 1, hi: int = 100) -> ToyData:
    """Every (a, b) with lo <= a, b <= hi."""
    r = torch.arange(lo, hi + 1)
    a, b = torch.meshgrid(r, r, indexing="ij")
    return ToyData(a.flatten(), b.flatten())


def domain_of(a: Tensor, b: Tensor) -> Tensor:
    """Domain index 0-4 of each point, or -1 where a and b fall in different domains."""
    da, db = (a - 1) // 20, (b - 1) // 20
    return torch.where(da == db, da, torch.full_like(da, -1))


def split(data: ToyData, val_fraction: float, seed: int) -> tuple[ToyData, ToyData]:
    """Random train/validation split of a domain's points with an explicit generator."""
    perm = torch.randperm(len(data.a), generator=generator(seed))
    n_val = max(1, round(val_fraction * len(perm)))
    return data.subset(perm[n_val:]), data.subset(perm[:n_val])


def correct(y_hat: Tensor, data: ToyData) -> Tensor:
    """Boolean per point: round(200 * y_hat) == a + b."""
    return torch.round(200 * y_hat.squeeze(-1)).long() == (data.a + data.b)


def abs_error(y_hat: Tensor, data: ToyData) -> Tensor:
    """|200 * y_hat - (a + b)|, the error in units of the sum."""
    return (200 * y_hat.squeeze(-1).double() - (data.a + data.b).double()).abs()


def mse_loss(model: nn.Module, batch) -> Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def train_config(cfg: ToyConfig, seed: int, desc: str) -> TrainConfig:
    """The fit-loop settings of a toy run."""
    return TrainConfig(lr=cfg.lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, virtual_batch=cfg.virtual_batch,
                       max_epochs=cfg.max_epochs, patience=cfg.patience, seed=seed, desc=desc)


def train_on(model: nn.Module, data: ToyData, cfg: ToyConfig, seed: int, store: Store, kind: str, desc: str,
             key_extra: dict | None = None) -> dict:
    """Fit `model` on `data` (split train/val), or load it from the stage cache for the same configuration."""
    tc = train_config(cfg, seed, desc)
    key = {"stage": STAGE_VERSION, "train": asdict(tc), "hidden": cfg.hidden, "scale": cfg.residual_scale,
           "val_fraction": cfg.val_fraction, "a": data.a.tolist(), "b": data.b.tolist(), **(key_extra or {})}

    def run(m: nn.Module) -> dict:
        tr, va = split(data, cfg.val_fraction, seed)
        res = fit(m, mse_loss, (tr.x, tr.y), (va.x, va.y), tc)
        return {"best_epoch": res.best_epoch, "epochs_run": len(res.history), "best_val_loss": res.best_val_loss}

    return store.module(f"toy/{kind}", key, model, run)


def exact_base() -> LinearExpert:
    """The paper's fixed base f(x) = 0.5 x1 + 0.5 x2."""
    base = LinearExpert()
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[0.5, 0.5]]))
        base.bias.zero_()
    return base


def domain_experts(make: Callable[[], nn.Module], kind: str, cfg: ToyConfig, seed: int, store: Store,
                   key_extra: dict | None = None) -> list[nn.Module]:
    """One expert per domain, each trained only on its own domain's points."""
    full = grid()
    dom = domain_of(full.a, full.b)
    experts = []
    for i in range(len(DOMAINS)):
        seed_everything(seed * 100 + i)
        model = make()
        train_on(model, full.subset(torch.nonzero(dom == i).squeeze(1)), cfg, seed * 100 + i, store, kind, f"{kind} D{i + 1}",
                 key_extra)
        experts.append(model)
    return experts


@torch.no_grad()
def evaluate(models: dict[str, nn.Module], data: ToyData | None = None) -> pd.DataFrame:
    """Accuracy and mean |error| (sum units) of each model on each domain and off the domains."""
    data = data or grid()
    dom = domain_of(data.a, data.b).numpy()
    names = {d: DOMAIN_NAMES[d] if d >= 0 else "off-domain" for d in range(-1, len(DOMAINS))}
    truth = (data.a + data.b).numpy()
    tables = []
    for name, model in models.items():
        y_sum = 200 * model(data.x).squeeze(-1).double()
        # accuracy on the rounded sum; the error on the unrounded prediction
        acc = per_group(truth, torch.round(y_sum).long().numpy(), dom, names, y_value=y_sum.numpy())
        tables.append(acc.rename(columns={"group": "domain"}).assign(model=name))
    out = pd.concat(tables, ignore_index=True)
    order = [names[d] for d in range(len(DOMAINS))] + ["off-domain"]
    out["domain"] = pd.Categorical(out["domain"], categories=order, ordered=True)
    return out.sort_values(["model", "domain"], kind="stable")[["model", "domain", "accuracy", "mae", "n"]].reset_index(drop=True)


@torch.no_grad()
def diagonal_predictions(models: dict[str, nn.Module]) -> pd.DataFrame:
    """Predictions (as 200 * y_hat) along the diagonal a = b and the anti-diagonal b = 101 - a, with the truth."""
    a = torch.arange(1, 101)
    lines = {"diagonal a = b": ToyData(a, a), "anti-diagonal b = 101 - a": ToyData(a, 101 - a)}
    rows = []
    for line, data in lines.items():
        truth = (data.a + data.b).tolist()
        for name, model in models.items():
            pred = (200 * model(data.x).squeeze(-1)).tolist()
            rows += [{"line": line, "a": int(ai), "model": name, "prediction": p, "truth": t}
                     for ai, p, t in zip(a.tolist(), pred, truth)]
    return pd.DataFrame(rows)


def experiment_a(cfg: ToyConfig, seed: int, store: Store) -> tuple[dict[str, nn.Module], pd.DataFrame]:
    """Linear experts, their parameter average and output average; plus each expert's learned weights."""
    experts = domain_experts(LinearExpert, "linear", cfg, seed, store)
    weights = pd.DataFrame([{"expert": f"E{i + 1}", "w1": e.weight[0, 0].item(), "w2": e.weight[0, 1].item(),
                             "b": e.bias[0].item()} for i, e in enumerate(experts)])
    models = {f"expert E{i + 1}": e for i, e in enumerate(experts)}
    models |= {"parameter average": average_parameters(experts), "output average": OutputMixture(experts)}
    return models, weights


def experiment_b(cfg: ToyConfig, seed: int, store: Store) -> dict[str, nn.Module]:
    """MLP experts, their parameter average and output average."""
    experts = domain_experts(lambda: MLPExpert(hidden=cfg.hidden), "mlp", cfg, seed, store)
    models = {f"expert E{i + 1}": e for i, e in enumerate(experts)}
    return models | {"parameter average": average_parameters(experts), "output average": OutputMixture(experts)}


def learned_base(cfg: ToyConfig, seed: int, store: Store) -> LinearExpert:
    """A linear base trained on the union of the five domains."""
    full = grid()
    seed_everything(seed * 100 + 99)
    base = LinearExpert()
    train_on(base, full.subset(torch.nonzero(domain_of(full.a, full.b) >= 0).squeeze(1)), cfg, seed * 100 + 99,
             store, "linear_base", "learned base")
    return base


def experiment_c(cfg: ToyConfig, seed: int, store: Store, base: nn.Module, base_name: str) -> dict[str, nn.Module]:
    """Base alone, base + each residual expert, base + all residual experts mixed with alpha = 1/5."""
    kind = f"residual_{base_name}"
    wrapped = domain_experts(lambda: BasePlusResidual(base, ScaledExpert(MLPExpert(hidden=cfg.hidden), cfg.residual_scale)),
                             kind, cfg, seed, store, {"base": [p.tolist() for p in base.parameters()]})
    residuals = [w.residual for w in wrapped]
    models = {"base alone": base}
    models |= {f"base + r{i + 1}": BasePlusResidual(base, r) for i, r in enumerate(residuals)}
    return models | {"base + mix of all r": BasePlusResidual(base, OutputMixture(residuals))}


@torch.no_grad()
def residual_size(residuals: list[nn.Module], data: ToyData | None = None) -> pd.DataFrame:
    """Largest |r_i(x)| (sum units) of each residual expert on its own domain and on the whole grid."""
    data = data or grid()
    dom = domain_of(data.a, data.b)
    rows = []
    for i, r in enumerate(residuals):
        mag = (200 * r(data.x).squeeze(-1)).abs()
        rows.append({"expert": f"r{i + 1}", "max |r| own domain": mag[dom == i].max().item(),
                     "max |r| whole grid": mag.max().item()})
    return pd.DataFrame(rows)


def worst_domain(evals: pd.DataFrame, models: list[str], metric: str = "accuracy") -> pd.Series:
    """Per seed, the lowest `metric` over the five domains and the given models (off-domain points excluded)."""
    sel = evals[evals["model"].isin(models) & (evals["domain"] != "off-domain")]
    return sel.groupby("seed")[metric].min()


def best_domain(evals: pd.DataFrame, models: list[str], metric: str = "accuracy") -> pd.Series:
    """Per seed, the highest `metric` over the five domains and the given models."""
    sel = evals[evals["model"].isin(models) & (evals["domain"] != "off-domain")]
    return sel.groupby("seed")[metric].max()


def own_domain(evals: pd.DataFrame, models: list[str], metric: str = "accuracy") -> pd.Series:
    """Per seed, the lowest `metric` of models[i] on domain i: each expert judged on its own domain only."""
    home = evals["model"].map(dict(zip(models, DOMAIN_NAMES)))
    sel = evals[home.notna() & (home == evals["domain"].astype(str))]
    return sel.groupby("seed")[metric].min()
