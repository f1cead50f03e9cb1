"""Toy experiments A/B/C: experts for y = (a+b)/200 trained alone on five diagonal domains, then combined.

x = (a/100, b/100) with a, b in [1, 100]; a prediction is correct when round(200 * y_hat) == a + b,
i.e. when it is within half a unit of the true sum. Errors are reported in those units (|200 y_hat - (a+b)|).
Its knobs: `configs/toy_experiments.py`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import pandas as pd
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..core import measure
from ..configs.toy_experiments import ToyConfig
from ..core.metrics import per_group
from ..core.runtime import derived_seed, generator, seed_everything
from ..core.store import Store
from ..core.train import fit
from ..models.combiners import OutputMixture, average_parameters
from ..models.experts import BasePlusResidual, LinearExpert, MLPExpert, ScaledExpert

DOMAINS: list[tuple[int, int]] = [(1, 20), (21, 40), (41, 60), (61, 80), (81, 100)]
DOMAIN_NAMES = [f"D{i + 1} [{lo},{hi}]" for i, (lo, hi) in enumerate(DOMAINS)]
STAGE_VERSION = 1  # bump when the training code of a toy stage changes, so old cache entries are not reused
# The cache kinds of the toy stages ("toy/<kind>", under its KEY), and what each holds (the Speed page names them).
STAGE_KINDS = {"linear_base": "toy: the shared linear base", "linear": "toy: linear experts",
               "mlp": "toy: MLP experts", "residual_exact": "toy: residual experts on the exact base",
               "residual_learned": "toy: residual experts on a learned base"}
WEIGHT_TOL = 0.01  # how far a linear expert's w1, w2, b may sit from [0.5, 0.5, 0] for toy.linear.weights


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


def mse_loss(model: nn.Module, batch) -> Tensor:
    x, y = batch
    return F.mse_loss(model(x), y)


def train_on(model: nn.Module, data: ToyData, cfg: ToyConfig, seed: int, store: Store, kind: str, desc: str,
             key_extra: dict | None = None) -> dict:
    """Fit `model` on `data` (split train/val), or load it from the stage cache for the same configuration."""
    tc = cfg.fit_config(seed, desc)
    key = {"stage": STAGE_VERSION, "train": asdict(tc), "hidden": cfg.hidden, "scale": cfg.residual_scale,
           "val_fraction": cfg.val_fraction, "a": data.a.tolist(), "b": data.b.tolist(), **(key_extra or {})}

    def run(m: nn.Module) -> dict:
        tr, va = split(data, cfg.val_fraction, seed)
        res = fit(m, mse_loss, (tr.x, tr.y), (va.x, va.y), tc)
        return {"best_epoch": res.best_epoch, "epochs_run": len(res.history), "best_val_loss": res.best_val_loss}

    assert kind in STAGE_KINDS, kind
    return store.module(f"{cfg.KEY}/{kind}", key, model, run)


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
        seed_everything(derived_seed(seed, i))
        model = make()
        train_on(model, full.subset(torch.nonzero(dom == i).squeeze(1)), cfg, derived_seed(seed, i), store, kind, f"{kind} D{i + 1}",
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
    seed_everything(derived_seed(seed, 99))
    base = LinearExpert()
    train_on(base, full.subset(torch.nonzero(domain_of(full.a, full.b) >= 0).squeeze(1)), cfg, derived_seed(seed, 99),
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


PARTS = ("c", "a", "b")  # the experiments a seed runs, longest first (the order parallel workers take them)


def part_tables(cfg: ToyConfig, piece: tuple[str, int], store: Store) -> dict[str, pd.DataFrame]:
    """One experiment ('a', 'b' or 'c') of one seed: its evaluations (and weights or residual sizes), each tagged with
    the seed, and for the first seed its prediction curves."""
    part, seed = piece
    first = seed == cfg.seed
    if part == "a":
        models, w = experiment_a(cfg, seed, store)
        out = {"evals_a": evaluate(models).assign(seed=seed), "weights_a": w.assign(seed=seed)}
        return out | ({"curves_a": diagonal_predictions(models)} if first else {})
    if part == "b":
        models = experiment_b(cfg, seed, store)
        return {"evals_b": evaluate(models).assign(seed=seed)} | ({"curves_b": diagonal_predictions(models)} if first else {})
    out, evals, sizes = {}, [], []
    for base_name, base in {"exact": exact_base(), "learned": learned_base(cfg, seed, store)}.items():
        models = experiment_c(cfg, seed, store, base, base_name)
        evals.append(evaluate(models).assign(seed=seed, base=base_name))
        sizes.append(residual_size([models[f"base + r{i + 1}"].residual for i in range(len(DOMAINS))])
                     .assign(seed=seed, base=base_name))
        if first and base_name == "exact":
            out["curves_c"] = diagonal_predictions(models)
    return out | {"evals_c": pd.concat(evals), "sizes_c": pd.concat(sizes)}


def profile_words(cfg: ToyConfig) -> str:
    """The page's opening line: profile, seeds and how every model trains."""
    return (f"Running profile **{cfg.profile}** with seeds {cfg.seeds}, up to {cfg.max_epochs} epochs (patience "
            f"{cfg.patience}), AdamW lr {cfg.lr}, weight decay {cfg.weight_decay}.")


# the page's tables: run's names (its result files) for part_tables' names
TABLES = {"evals_a": "a_linear_eval", "weights_a": "a_linear_weights", "evals_b": "b_mlp_eval",
          "evals_c": "c_residual_eval", "sizes_c": "c_residual_sizes", "curves_a": "curves_a", "curves_b": "curves_b",
          "curves_c": "curves_c"}


def run(cfg: ToyConfig, store: Store) -> dict[str, pd.DataFrame]:
    """Experiments A, B and C for every seed (in `parallel.worker_count()` processes, one torch thread each: tiny
    models run faster so and stay bit-reproducible): each table concatenated in seed order, by its result name."""
    from ..speed.parallel import map_pieces, worker_count

    torch.set_num_threads(1)
    pieces = [(part, s) for part in PARTS for s in cfg.seeds]
    done = dict(zip(pieces, map_pieces(part_tables, cfg, pieces, store, worker_count(), desc="toy experiments")))
    tables = {}
    for part in sorted(PARTS):
        for s in cfg.seeds:
            for name, df in done[(part, s)].items():
                tables.setdefault(TABLES[name], []).append(df)
    return {name: pd.concat(dfs) for name, dfs in tables.items()}


def base_gap(evals_c: pd.DataFrame) -> float:
    """The largest accuracy difference between the exact and the learned base in any (seed, model, domain) cell of
    experiment C: 0 when the two heatmaps are one result shown twice."""
    keys = [c for c in ("seed", "model", "domain") if c in evals_c.columns]
    side = evals_c.pivot_table(index=keys, columns="base", values="accuracy")
    return float((side["exact"] - side["learned"]).abs().max())


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


def claims(cfg: ToyConfig, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """The measurement behind each toy claim, per seed (accuracy claims use the worst domain, exact base)."""
    evals_a, weights_a, evals_b, evals_c = (tables[k] for k in ("a_linear_eval", "a_linear_weights", "b_mlp_eval",
                                                                "c_residual_eval"))
    singles = [f"base + r{i + 1}" for i in range(len(DOMAINS))]
    exact, learned = evals_c[evals_c["base"] == "exact"], evals_c[evals_c["base"] == "learned"]
    dev = (weights_a[["w1", "w2", "b"]] - [0.5, 0.5, 0.0]).abs().max(axis=1).groupby(weights_a["seed"]).max()
    mlp_avg = pd.concat([best_domain(evals_b, ["parameter average"]), best_domain(evals_b, ["output average"])],
                        axis=1).max(axis=1)
    worst = "accuracy on the worst domain"
    return {
        "toy.linear.weights": measure.bound(
            dev, 0.0, WEIGHT_TOL, measure="max |deviation| of w1, w2, b from [0.5, 0.5, 0] over the 5 experts",
            mean_weights=weights_a[["w1", "w2", "b"]].mean().to_dict()),
        "toy.linear.param_average": measure.bound(worst_domain(evals_a, ["parameter average"]), 1.0, 1.0, measure=worst),
        "toy.linear.output_average": measure.bound(worst_domain(evals_a, ["output average"]), 1.0, 1.0, measure=worst),
        "toy.mlp.average_collapse": measure.bound(
            mlp_avg, 0.0, 0.07, measure="accuracy on the best domain, the better of parameter and output averaging"),
        "toy.residual.base_only": measure.bound(
            worst_domain(exact, ["base alone"]), 1.0, 1.0, measure=worst + ", exact base",
            learned_base=worst_domain(learned, ["base alone"]).tolist()),
        "toy.residual.single_expert": measure.bound(
            worst_domain(exact, singles), 1.0, 1.0, measure="accuracy on the worst (expert, domain) pair, exact base",
            own_domain=own_domain(exact, singles).tolist(), learned_base=worst_domain(learned, singles).tolist()),
        "toy.residual.all_mixed": measure.bound(
            worst_domain(exact, ["base + mix of all r"]), 1.0, 1.0, measure=worst + ", exact base",
            learned_base=worst_domain(learned, ["base + mix of all r"]).tolist()),
    }


def found(cfg: ToyConfig, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `toy_*`)."""
    from ..core.claims import load_claims, seeds_words, spread, verdict_keys

    measured = claims(cfg, tables)
    weights_a, evals_b, evals_c = tables["a_linear_weights"], tables["b_mlp_eval"], tables["c_residual_eval"]
    m = lambda cid: measured[cid]["per_seed"]  # noqa: E731
    dev = pd.Series(m("toy.linear.weights"), dtype=float)
    experts = [f"expert E{i + 1}" for i in range(len(DOMAINS))]
    far = (weights_a[["w1", "w2", "b"]] - [0.5, 0.5, 0.0]).abs().max(axis=1) > WEIGHT_TOL
    off = evals_b["model"].isin(experts) & (evals_b["domain"] == "off-domain")
    low, high = load_claims()["toy.mlp.average_collapse"]["paper"]
    return {
        "toy_dev_mean": dev.mean(), "toy_dev_max": dev.max(), "toy_n_seeds": seeds_words(len(dev)),
        "toy_weight_tol": WEIGHT_TOL,
        "toy_far_experts": ", ".join(sorted(set(weights_a.loc[far, "expert"]))) or "no expert",
        "toy_max_epochs": cfg.max_epochs,
        "toy_mlp_off_domain": evals_b.loc[off, "accuracy"].mean(), "toy_paper_low": low, "toy_paper_high": high,
        "toy_own_domain_worst": min(measured["toy.residual.single_expert"]["own_domain"]),
        "toy_learned_mix": spread(worst_domain(evals_c[evals_c["base"] == "learned"], ["base + mix of all r"])),
        "toy_c_base_gap": base_gap(evals_c),
        **{f"toy_{cid.removeprefix('toy.').replace('.', '_')}": spread(m(cid)) for cid in (
            "toy.linear.param_average", "toy.linear.output_average", "toy.mlp.average_collapse",
            "toy.residual.base_only", "toy.residual.single_expert", "toy.residual.all_mixed")},
        **verdict_keys("toy", verdicts),
    }
