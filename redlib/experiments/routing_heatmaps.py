"""The routing-heatmaps page's three experiments: does a softmax-gated MoE route to experts pretrained on a sub-domain?

1. a code expert pretrained alone, then one of four experts of a token-level MoE language model;
2. a '0 or 7' digit expert pretrained alone, then one of four experts of an MLP MoE classifier;
3. four experts each lightly pretrained on its own text domain, then combined by a token-level MoE.
This module trains them (every stage cached), measures their routing and gives the page's tables (`run`), claims
and findings; `routing_heatmaps_report` reads the tables. Its knobs: `configs/routing_heatmaps.py`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from tqdm import tqdm

from ..configs.routing_heatmaps import PAPER_PATIENCE, TARGET_DIGITS, RoutingHeatmapsConfig
from ..core.claims import verdicts_beside
from ..core.runtime import derived_seed, device_key, resolve_device, seed_everything
from ..core.settings import progress_enabled, still_improving
from ..core.store import Store
from ..core.train import TrainConfig, fit
from ..models.moe import PAD, ExpertLM, GatedMoE, LMShape, MLPClassifier, TokenMoE, lm_loss
from ..red.encoders import digest
from ..tasks import mnist
from ..tasks import text_domains as td
from . import routing_heatmaps_report as rr

STAGE_VERSION = 1  # bump when a stage's training code changes, so old cache entries are not reused
# The cache kinds of the routing stages ("ra/<kind>", under its KEY), and what each holds (the Speed page names them).
STAGE_KINDS = {"code_expert": "routing: the pretrained code expert", "code_moe": "routing: the token MoE of experiment 1",
               "digit_expert": "routing: the pretrained 0-or-7 expert", "digit_moe": "routing: the gated MoE of experiment 2",
               "domain_expert": "routing: the pretrained domain experts",
               "domain_moe": "routing: the token MoE of experiment 3"}


@dataclass
class Corpus:
    """Encoded texts of several domains: train / val / eval ids, the domain of each row, and the tokenizer."""

    parts: dict[str, td.Encoded]
    domains: dict[str, np.ndarray]  # part -> domain index per row
    names: tuple[str, ...]
    tokenizer: Any

    @property
    def vocab_size(self) -> int:
        """Embedding rows: PAD plus the vocabulary."""
        return len(self.parts["train"].vocab) + 1

    def rows(self, part: str, domain: int) -> Tensor:
        """The ids of one domain's rows of a part."""
        return self.parts[part].ids[torch.from_numpy(self.domains[part] == domain)]


def shape(cfg: RoutingHeatmapsConfig, which: str, vocab: int) -> LMShape:
    """The token model of experiment 1 ('code') or 3 ('domain') over a vocabulary of `vocab` ids."""
    g = lambda f: getattr(cfg, f"{which}_{f}")  # noqa: E731
    return LMShape(vocab, g("d_model"), g("layers"), g("heads"), g("ff"), cfg.max_len, causal=cfg.causal)


def corpus(cfg: RoutingHeatmapsConfig, names: tuple[str, ...], counts: dict[str, int], seed: int, tokenizer) -> Corpus:
    """Generate `counts[part]` samples per domain and part, tokenize them, and map them to one shared vocabulary."""
    texts = {part: [t for d in names for t in td.generate(d, n, seed, part)] for part, n in counts.items()}
    if cfg.full_vocab:
        vocab = list(range(len(tokenizer)))
    else:
        vocab = td.encode([t for part in texts.values() for t in part], tokenizer, cfg.max_len).vocab
    parts = {part: td.encode(t, tokenizer, cfg.max_len, vocab) for part, t in texts.items()}
    domains = {part: np.repeat(np.arange(len(names)), n) for part, n in counts.items()}
    return Corpus(parts, domains, names, tokenizer)


def _val(n: int) -> int:
    return max(2, n // 10)


def _fit_meta(res) -> dict:
    return {"best_epoch": res.best_epoch, "epochs_run": len(res.history), "history": res.history}


def _fit_stage(cfg: RoutingHeatmapsConfig, model: nn.Module, kind: str, key: dict, loss, train: tuple, val: tuple,
               tc: TrainConfig, store: Store) -> dict:
    """Fit `model` with `loss` (or load it from the stage cache for the same configuration); its metadata and key."""
    device = resolve_device(cfg.device)
    model.to(device)
    assert kind in STAGE_KINDS, kind
    full = {"stage": STAGE_VERSION, "train": asdict(tc), **key, **device_key(device)}
    meta = store.module(f"{cfg.KEY}/{kind}", full, model, lambda m: _fit_meta(fit(m, loss, train, val, tc)))
    return {**meta, "key": full}


def _lm(entropy_weight: float = 0.0):
    """The token models' loss on a batch of ids, with its entropy weight."""
    return lambda model, batch: lm_loss(model, batch[0], entropy_weight)


def _train_lm(cfg: RoutingHeatmapsConfig, model: nn.Module, kind: str, key: dict, train: Tensor, val: Tensor, tc: TrainConfig,
              store: Store, entropy_weight: float = 0.0) -> dict:
    """Fit a token model on rows of ids (or load it from the stage cache)."""
    return _fit_stage(cfg, model, kind, {**key, "entropy_weight": entropy_weight}, _lm(entropy_weight), (train,), (val,),
                      tc, store)


def code_experiment(cfg: RoutingHeatmapsConfig, seed: int, tokenizer, store: Store) -> tuple[TokenMoE, Corpus, pd.DataFrame]:
    """Experiment 1: a code expert pretrained alone, then expert 0 (with the embeddings) of a 4-expert MoE."""
    names = td.EXPERIMENT_DOMAINS["code"]
    c = corpus(cfg, names, {"train": cfg.code_samples, "val": _val(cfg.code_samples), "eval": cfg.eval_samples},
               seed, tokenizer)
    s = shape(cfg, "code", c.vocab_size)
    data = {"shape": asdict(s), "data": c.parts["train"].digest, "val": c.parts["val"].digest}
    seed_everything(derived_seed(seed, 0))
    lm = ExpertLM(s)
    pre = _train_lm(cfg, lm, "code_expert", data, c.rows("train", 0), c.rows("val", 0),
                    cfg.adam("text", derived_seed(seed, 0), cfg.code_epochs, "exp 1: code expert"), store)
    seed_everything(derived_seed(seed, 1))
    moe = TokenMoE(s, len(names))
    moe.embed.load_state_dict(lm.embed.state_dict())
    moe.experts[0].load_state_dict(lm.expert.state_dict())
    main = _train_lm(cfg, moe, "code_moe", {**data, "pretrained": pre["key"]}, c.parts["train"].ids, c.parts["val"].ids,
                     cfg.adam("text", derived_seed(seed, 1), cfg.code_epochs, "exp 1: MoE"), store)
    return moe, c, _epochs({"code expert": pre, "MoE": main}, seed)


def domain_experiment(cfg: RoutingHeatmapsConfig, seed: int, tokenizer, store: Store) -> tuple[dict[float, TokenMoE], Corpus, pd.DataFrame]:
    """Experiment 3: four experts each pretrained on its own domain, then one MoE per entropy weight (0 and the
    configured one), every expert loaded from its pretraining."""
    names = td.EXPERIMENT_DOMAINS["domains"]
    n_pre, n_moe = cfg.domain_pretrain_samples, cfg.domain_moe_samples
    c = corpus(cfg, names, {"pretrain": n_pre, "pretrain_val": _val(n_pre), "train": n_moe, "val": _val(n_moe),
                            "eval": cfg.eval_samples}, seed, tokenizer)
    s = shape(cfg, "domain", c.vocab_size)
    data = {"shape": asdict(s), "data": c.parts["pretrain"].digest, "val": c.parts["pretrain_val"].digest}
    experts, metas = [], {}
    for i, name in enumerate(names):
        seed_everything(derived_seed(seed, i))
        lm = ExpertLM(s)
        metas[f"{name} expert"] = _train_lm(
            cfg, lm, "domain_expert", {**data, "domain": name}, c.rows("pretrain", i), c.rows("pretrain_val", i),
            cfg.adam("text", derived_seed(seed, i), cfg.domain_pretrain_epochs, f"exp 3: {name} expert"), store)
        experts.append(lm)
    moes = {}
    for w in dict.fromkeys([0.0, float(cfg.entropy_weight)]):
        seed_everything(derived_seed(seed, 10))
        moe = TokenMoE(s, len(names))
        for e, lm in zip(moe.experts, experts):
            e.load_state_dict(lm.expert.state_dict())
        if cfg.domain_embedding == "average":
            states = [lm.embed.state_dict() for lm in experts]
            moe.embed.load_state_dict({k: torch.stack([st[k] for st in states]).mean(0) for k in states[0]})
        key = {"shape": asdict(s), "data": c.parts["train"].digest, "val": c.parts["val"].digest,
               "embedding": cfg.domain_embedding, "pretrained": [m["key"] for m in metas.values()]}
        metas[f"MoE, entropy weight {w:g}"] = _train_lm(
            cfg, moe, "domain_moe", key, c.parts["train"].ids, c.parts["val"].ids,
            cfg.adam("text", derived_seed(seed, 10), cfg.domain_moe_epochs, f"exp 3: MoE (entropy {w:g})"), store, w)
        moes[w] = moe
    return moes, c, _epochs(metas, seed)


def _epochs(metas: dict[str, dict], seed: int) -> pd.DataFrame:
    """Epochs run, the (0-based, as on every page) epoch whose weights were kept, its validation loss, and the cap and
    patience it ran under (patience = cap: these stages train their fixed epochs, as the paper's), per stage."""
    return pd.DataFrame([{"seed": seed, "stage": k, "epochs run": m["epochs_run"], "best epoch": m["best_epoch"],
                          "best val loss": min(h["val_loss"] for h in m["history"]),
                          "max epochs": m["key"]["train"]["max_epochs"], "patience": m["key"]["train"]["patience"],
                          "still improving at the cap":
                              still_improving(m["best_epoch"], m["key"]["train"]["max_epochs"], PAPER_PATIENCE),
                          "cached": m["cached"]}
                         for k, m in metas.items()])


@torch.no_grad()
def token_routing(model: TokenMoE, ids: Tensor) -> list[np.ndarray]:
    """Per row, the routing weights (tokens x experts) of its real tokens (padding excluded)."""
    model.eval()
    out = []
    for start in range(0, len(ids), 256):
        batch = ids[start:start + 256].to(next(model.parameters()).device)
        _, alpha = model(batch)
        out += [a[b != PAD].cpu().numpy() for a, b in zip(alpha, batch)]
    return out


def text_routing(model: TokenMoE, c: Corpus, part: str = "eval") -> pd.DataFrame:
    """Per held-out sample and expert: its mean routing weight over the sample's tokens and its share of their
    top-1 choices, with the sample's domain, index within the domain and token count."""
    alphas, dom = token_routing(model, c.parts[part].ids), c.domains[part]
    rows = []
    for j, a in enumerate(alphas):
        top = np.bincount(a.argmax(1), minlength=a.shape[1])
        within = int((dom[:j] == dom[j]).sum())
        rows += [{"domain": c.names[dom[j]], "sample": within, "tokens": len(a), "expert": e,
                  "weight": float(a[:, e].mean()), "top tokens": int(top[e])} for e in range(a.shape[1])]
    return pd.DataFrame(rows)


def token_view(model: TokenMoE, c: Corpus, domain: int, row: int = 0) -> pd.DataFrame:
    """Each token of one held-out sample with its top expert and that expert's weight."""
    ids = c.rows("eval", domain)[row:row + 1]
    alpha = token_routing(model, ids)[0]
    toks = td.tokens(td.Encoded(ids, c.parts["eval"].vocab), 0, c.tokenizer)
    return pd.DataFrame({"token": toks, "top expert": alpha.argmax(1), "weight": alpha.max(1)})


def digit_data(cfg: RoutingHeatmapsConfig) -> dict[str, tuple[Tensor, Tensor]]:
    """Train / val / test digits as flat normalised vectors (N, 784) and labels (N,)."""
    return {part: (mnist.to_tensor(x).flatten(1), torch.from_numpy(y)) for part, (x, y) in
            mnist.splits(cfg.mnist_data_dir, 0).items()}


def _classify(model: nn.Module, batch) -> Tensor:
    x, y = batch
    out = model(x)
    return nn.functional.cross_entropy(out[0] if isinstance(out, tuple) else out, y)


def digit_experiment(cfg: RoutingHeatmapsConfig, seed: int, data: dict[str, tuple[Tensor, Tensor]], store: Store
                     ) -> tuple[GatedMoE, pd.DataFrame]:
    """Experiment 2: a '0 or 7' expert pretrained alone, then expert 0 (body only) of a 4-expert MoE on 10 classes."""
    is07 = lambda y: torch.isin(y, torch.tensor(TARGET_DIGITS)).long()  # noqa: E731
    base = {"data": {p: digest(x) for p, (x, _) in data.items()}, "hidden": cfg.digit_hidden, "dropout": cfg.digit_dropout}

    def train(model: nn.Module, kind: str, key: dict, parts: dict, t: TrainConfig) -> dict:
        return _fit_stage(cfg, model, kind, {**base, **key}, _classify, parts["train"], parts["val"], t, store)

    seed_everything(derived_seed(seed, 20))
    expert = MLPClassifier(hidden=cfg.digit_hidden, classes=2, dropout=cfg.digit_dropout)
    binary = {p: (x, is07(y)) for p, (x, y) in data.items()}
    pre = train(expert, "digit_expert", {}, binary, cfg.adam("digit", derived_seed(seed, 20), cfg.digit_pretrain_epochs, "exp 2: 0-or-7 expert"))
    seed_everything(derived_seed(seed, 21))
    moe = GatedMoE([MLPClassifier(hidden=cfg.digit_hidden, dropout=cfg.digit_dropout) for _ in range(4)],
                   dropout=cfg.digit_dropout)
    moe.experts[0].load_body(expert)
    main = train(moe, "digit_moe", {"pretrained": pre["key"]}, data, cfg.adam("digit", derived_seed(seed, 21), cfg.digit_epochs, "exp 2: MoE"))
    return moe, _epochs({"0-or-7 expert": pre, "MoE": main}, seed)


@torch.no_grad()
def digit_routing(moe: GatedMoE, data: dict[str, tuple[Tensor, Tensor]]) -> tuple[pd.DataFrame, float]:
    """Per test digit: its label, the gate's weight for each expert and its top expert; and the MoE's accuracy."""
    moe.eval()
    x, y = data["test"]
    logits, g = moe(x.to(next(moe.parameters()).device))
    g, pred = g.cpu().numpy(), logits.argmax(1).cpu().numpy()
    df = pd.DataFrame(g, columns=[f"w{e}" for e in range(g.shape[1])]).assign(digit=y.numpy(), top=g.argmax(1))
    return df, float((pred == y.numpy()).mean())


# ---- the page: every seed of the three experiments, its tables, claims and findings ----

def profile_words(cfg: RoutingHeatmapsConfig) -> str:
    """The page's opening line: profile, seeds, the tokenizer and how the text experts read."""
    tok = td.load_tokenizer(cfg.tokenizer)
    return (f"Profile **{cfg.profile}**, seeds {cfg.seeds}, tokenizer `{cfg.tokenizer}` ({type(tok).__name__}, "
            f"{len(tok):,} ids), {'causal' if cfg.causal else 'unmasked'} text experts.")


def run(cfg: RoutingHeatmapsConfig, store: Store) -> dict[str, pd.DataFrame]:
    """The three experiments on every seed, read out as the page's tables (each row tagged with its seed): routing
    per domain or digit, the first seed's token views, every stage's epochs; and the first seed trained longer
    (tables `converged_*`) where `converge_cap` asks for it."""
    tok = td.load_tokenizer(cfg.tokenizer)
    seeds = lambda what: tqdm(cfg.seeds, desc=what, disable=not progress_enabled())  # noqa: E731
    code_routes, epochs, views = [], {"1": [], "2": [], "3": []}, []
    for s in seeds("experiment 1"):
        moe, c, ep = code_experiment(cfg, s, tok, store)
        code_routes.append(text_routing(moe, c).assign(seed=s))
        epochs["1"].append(ep)
        if s == cfg.seed:
            views = [token_view(moe, c, c.names.index(d)).assign(sample=f"{d} sample") for d in ("code", "story")]
    digits, digit_rows, digit_acc = digit_data(cfg), [], {}
    for s in seeds("experiment 2"):
        moe, ep = digit_experiment(cfg, s, digits, store)
        rows, digit_acc[s] = digit_routing(moe, digits)
        digit_rows.append(rows.assign(seed=s))
        epochs["2"].append(ep)
    domain_routes = []
    for s in seeds("experiment 3"):
        moes, c, ep = domain_experiment(cfg, s, tok, store)
        domain_routes += [text_routing(m, c).assign(seed=s, setting=rr.setting_name(w)) for w, m in moes.items()]
        epochs["3"].append(ep)
    code_routes, digit_rows = pd.concat(code_routes, ignore_index=True), pd.concat(digit_rows, ignore_index=True)
    domains = rr.by_domain(pd.concat(domain_routes, ignore_index=True))
    t = {"code_routing": rr.by_domain(code_routes), "code_routing_first5": rr.by_domain(code_routes, first=5),
         "token_views": pd.concat(views, ignore_index=True), "digit_routing": rr.digit_table(digit_rows),
         "digit_contrast": rr.digit_contrast(digit_rows, digit_acc), "domain_routing": domains,
         "domain_match": rr.matching(domains, td.EXPERIMENT_DOMAINS["domains"]),
         "epochs": pd.concat([pd.concat(x).assign(experiment=e) for e, x in epochs.items()], ignore_index=True)}
    if cfg.converge_cap:
        t |= {f"converged_{name}": df for name, df in converged_run(cfg, tok, digits, store).items()}
    return t


def converged_run(cfg: RoutingHeatmapsConfig, tokenizer, digits: dict, store: Store) -> dict[str, pd.DataFrame]:
    """The three experiments again under `cfg.converged()` (first seed): the tables the claims read and the epochs."""
    long = cfg.converged()
    s = long.seed
    moe, c, ep1 = code_experiment(long, s, tokenizer, store)
    routes = text_routing(moe, c).assign(seed=s)
    digit_moe, ep2 = digit_experiment(long, s, digits, store)
    rows, acc = digit_routing(digit_moe, digits)
    moes, c3, ep3 = domain_experiment(long, s, tokenizer, store)
    domains = rr.by_domain(pd.concat([text_routing(m, c3).assign(seed=s, setting=rr.setting_name(w))
                                      for w, m in moes.items()], ignore_index=True))
    return {"code": rr.by_domain(routes), "code_first5": rr.by_domain(routes, first=5),
            "contrast": rr.digit_contrast(rows.assign(seed=s), {s: acc}),
            "match": rr.matching(domains, td.EXPERIMENT_DOMAINS["domains"]),
            "epochs": pd.concat([e.assign(experiment=x) for x, e in (("1", ep1), ("2", ep2), ("3", ep3))],
                                ignore_index=True)}


def converged(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame] | None:
    """The tables of the first seed trained longer, by the names `converged_run` gives them (None: not run)."""
    found = {name.removeprefix("converged_"): df for name, df in tables.items() if name.startswith("converged_")}
    return found or None


def claims(cfg: RoutingHeatmapsConfig, tables: dict[str, pd.DataFrame]) -> dict[str, dict]:
    """ra.code_expert, ra.mnist07 and ra.domain_match per seed (`routing_heatmaps_report.claims`), with the first
    seed trained longer beside each as an extension where it ran."""
    t = tables
    out = rr.claims(cfg, t["code_routing"], t["digit_contrast"], t["domain_match"], t["code_routing_first5"])
    return rr.with_converged(out, cfg, converged(t))


def found(cfg: RoutingHeatmapsConfig, tables: dict[str, pd.DataFrame], verdicts: dict[str, str]) -> dict[str, object]:
    """The numbers and verdicts the page's conclusions paste in (glued as `ra_*`)."""
    measured, longer = claims(cfg, tables), converged(tables)
    return {**rr.found(cfg, measured, verdicts, tables["digit_contrast"], tables["domain_match"],
                       tables["domain_routing"]),
            "ra_converged_epochs": rr.epochs_words(longer["epochs"]) if longer else "not run",
            "ra_converged_moved": verdicts_beside(measured, rr.converged_label(cfg) if longer else None)}
