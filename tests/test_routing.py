"""The routing-analysis experiments: text domains, tokenization, the MoE models, training with the cache, the claims."""

import re

import numpy as np
import pandas as pd
import pytest
import torch

from redlib.configs.routing_heatmaps import PAPER_PATIENCE, RoutingHeatmapsConfig
from redlib.core.config import ParameterError
from redlib.core.store import Store, state_equal
from redlib.experiments import routing_heatmaps as ra
from redlib.experiments import routing_heatmaps_report as rr
from redlib.models.moe import PAD, GatedMoE, LMShape, MLPClassifier, TokenMoE, lm_loss
from redlib.tasks import text_domains as td


@pytest.fixture(scope="module")
def tok():
    return td.load_tokenizer("embedded")


def tiny(**kw) -> RoutingHeatmapsConfig:
    base = dict(profile="smoke", n_seeds=1, eval_samples=6, code_samples=12, domain_pretrain_samples=8,
                domain_moe_samples=12, code_d_model=16, domain_d_model=16, code_heads=2, domain_heads=2, code_ff=32,
                domain_ff=32, digit_hidden=16)
    return RoutingHeatmapsConfig.from_params(**{**base, **kw})


def test_domains_are_reproducible_per_seed_and_part_and_consistent():
    for d in td.TEMPLATES:
        assert td.generate(d, 20, 3) == td.generate(d, 20, 3)
        assert td.generate(d, 20, 3) != td.generate(d, 20, 4) and td.generate(d, 20, 3) != td.generate(d, 20, 3, "eval")
    for text in td.generate("math", 300, 0):
        if m := re.fullmatch(r"The sum of (\d+) and (\d+) is (\d+)\.", text):
            assert int(m[1]) + int(m[2]) == int(m[3])
    with pytest.raises(ParameterError, match="unknown text domain 'poetry'; allowed: code"):
        td.generate("poetry", 1, 0)


def test_encoding_maps_to_a_compact_vocabulary_and_back(tok):
    texts = td.generate("code", 5, 0) + td.generate("story", 5, 0)
    enc = td.encode(texts, tok, 128)
    assert enc.ids.min() == PAD and enc.ids.max() == len(enc.vocab)
    for j, t in enumerate(texts):
        assert td.tokens(enc, j, tok) == tok.tokenize(t)
    assert td.encode(texts, tok, 4).ids.shape == (10, 4)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        td.encode(["a completely different sentence"], tok, 128, enc.vocab[:3])


def test_a_missing_or_empty_tokenizer_folder_is_a_one_line_error(tmp_path):
    with pytest.raises(ParameterError, match="does not exist; pass 'embedded'"):
        td.tokenizer_path(str(tmp_path / "gpt2"))
    with pytest.raises(ParameterError, match="holds no tokenizer"):
        td.tokenizer_path(str(tmp_path))
    with pytest.raises(ParameterError, match="does not exist"):
        tiny(tokenizer=str(tmp_path / "gpt2")).preflight()
    with pytest.raises(ParameterError, match="data_dir"):
        tiny(mnist_data_dir=str(tmp_path / "mnist")).preflight()


def test_bad_parameters_name_the_problem():
    with pytest.raises(ParameterError, match="unknown value 'mean' for parameter 'domain_embedding'.*allowed: random, average"):
        tiny(domain_embedding="mean")
    with pytest.raises(ParameterError, match="'code_d_model' \\(30\\) must be a multiple of 'code_heads' \\(4\\)"):
        tiny(code_d_model=30, code_heads=4)
    with pytest.raises(ParameterError, match="'eval_samples' must be >= 1"):
        tiny(eval_samples=0)


def test_token_moe_routes_each_token_and_a_causal_expert_never_looks_ahead():
    torch.manual_seed(0)
    ids = torch.randint(1, 50, (3, 9))
    for causal in (True, False):
        moe = TokenMoE(LMShape(50, 16, 1, 2, 32, dropout=0.0, causal=causal), 4).eval()
        logits, alpha = moe(ids)
        assert logits.shape == (3, 9, 50) and alpha.shape == (3, 9, 4)
        assert torch.allclose(alpha.sum(-1), torch.ones(3, 9))
        later = ids.clone()
        later[:, 5:] = torch.randint(1, 50, (3, 4))
        same = torch.allclose(moe(later)[0][:, :5], logits[:, :5], atol=1e-5)
        assert same == causal


def test_the_loss_ignores_padding_and_the_entropy_term_rewards_spread_routing():
    torch.manual_seed(0)
    moe = TokenMoE(LMShape(50, 16, 1, 2, 32, dropout=0.0), 4).eval()
    ids = torch.randint(1, 50, (4, 7))
    ids[2, 4:] = PAD
    padded = torch.cat([ids, torch.zeros(4, 5, dtype=torch.long)], 1)
    assert torch.allclose(lm_loss(moe, ids), lm_loss(moe, padded), atol=1e-6)
    # the entropy term is minus the entropy of the mean routing, at most log(4) in size
    gap = (lm_loss(moe, ids, 1.0) - lm_loss(moe, ids)).detach()
    assert -np.log(4) - 1e-5 <= gap.item() < 0


def test_the_digit_expert_body_is_copied_and_its_output_layer_left_fresh():
    torch.manual_seed(0)
    pre, fresh = MLPClassifier(hidden=8, classes=2), MLPClassifier(hidden=8)
    out_before = fresh[6].weight.clone()
    fresh.load_body(pre)
    assert torch.equal(fresh[0].weight, pre[0].weight) and torch.equal(fresh[3].weight, pre[3].weight)
    assert torch.equal(fresh[6].weight, out_before)
    logits, g = GatedMoE([fresh, MLPClassifier(hidden=8)]).eval()(torch.randn(5, 784))
    assert logits.shape == (5, 10) and torch.allclose(g.sum(-1), torch.ones(5))


def test_text_experiments_train_once_and_reload_the_same_weights(tok, tmp_path):
    cfg = tiny()
    moe, corpus, ep = ra.code_experiment(cfg, 0, tok, Store(tmp_path))
    again = Store(tmp_path)
    moe2, _, ep2 = ra.code_experiment(cfg, 0, tok, again)
    assert [p.name for p in tmp_path.iterdir()] == [cfg.KEY] == ["ra"]  # its stages, under the page's key
    assert again.misses == 0 and again.hits == 2 and state_equal(moe, moe2) and ep2["cached"].all()
    # expert 0 of the MoE started from the pretrained code expert: phase 1's stage key is part of phase 2's
    routes = ra.text_routing(moe, corpus)
    assert set(routes["domain"]) == set(td.EXPERIMENT_DOMAINS["code"]) and len(routes) == 4 * 6 * 4
    table = rr.by_domain(routes)
    assert np.allclose(table.groupby("domain")["token share"].sum(), 1) and np.allclose(table.groupby("domain")["weight"].sum(), 1)
    view = ra.token_view(moe, corpus, 0)
    assert list(view.columns) == ["token", "top expert", "weight"] and view["top expert"].between(0, 3).all()
    moes, corpus3, ep3 = ra.domain_experiment(cfg, 0, tok, Store(tmp_path))
    assert set(moes) == {0.0, cfg.entropy_weight} and len(ep3) == 6
    # both settings start from the same four pretrained experts: the experts were trained once
    assert ep3["stage"].str.endswith("expert").sum() == 4


def test_the_converged_extension_stops_by_patience_and_leaves_the_papers_epochs_alone(tok, tmp_path):
    """The protocol trains every epoch (patience = epochs: its cache keys unchanged); the extension, on the first
    seed, stops after 3 epochs without a better validation loss, and each claim carries it beside the paper's."""
    cfg = tiny(n_seeds=2, code_epochs=2, converge_cap=5, max_len=32)
    assert cfg.adam("text", 0, 2, "x").patience == 2 and cfg.stop_patience is None
    long = cfg.converged()
    assert long.seeds == [cfg.seed] and long.adam("text", 0, long.code_epochs, "x").patience == PAPER_PATIENCE
    assert long.code_epochs == long.domain_moe_epochs == long.digit_epochs == 5
    digits = {part: (x[:300], y[:300]) for part, (x, y) in ra.digit_data(cfg).items()}
    ext = ra.converged_run(cfg, tok, digits, Store(tmp_path))
    ep = ext["epochs"]
    assert set(ep["experiment"]) == {"1", "2", "3"} and (ep["max epochs"] == 5).all() and (ep["patience"] == 3).all()
    assert ((ep["epochs run"] == 5) | (ep["epochs run"] == ep["best epoch"] + 4)).all()  # the cap, or patience
    assert rr.epochs_words(ep).startswith("exp 1: code expert ") and "still improving at the cap: " in rr.epochs_words(ep)
    got = rr.with_converged(rr.claims(cfg, ext["code"], ext["contrast"], ext["match"], ext["code_first5"]), cfg, ext)
    label = rr.converged_label(cfg)
    assert all(label in e["extensions"] and len(e["extensions"][label]["per_seed"]) == 1 for e in got.values())
    assert rr.with_converged({"ra.mnist07": {}}, cfg, None) == {"ra.mnist07": {}}
    first = rr.converged_first_seed(cfg, got)  # the same seed under both trainings, read by its own ordering
    assert all(f"{cid} " in first for cid in got) and first.count("(paper's epochs: ") == 3
    with pytest.raises(ParameterError, match="converge_cap"):
        tiny(converge_cap=-1)


def test_a_trained_digit_moe_beats_chance(tmp_path):
    cfg = tiny(digit_hidden=32)
    data = ra.digit_data(cfg)
    moe, ep = ra.digit_experiment(cfg, 0, data, Store(tmp_path))
    rows, acc = ra.digit_routing(moe, data)
    assert acc > 0.5 and len(rows) == len(data["test"][1]) and rows["top"].between(0, 3).all()
    contrast = rr.digit_contrast(rows.assign(seed=0), {0: acc})
    assert 0 <= contrast.loc[0, "top share 0 and 7"] <= 1
    assert np.allclose(rr.digit_table(rows.assign(seed=0)).groupby("digit")["top share"].sum(), 1)


def _domain_table(own_share: float) -> pd.DataFrame:
    names = td.EXPERIMENT_DOMAINS["domains"]
    rows = []
    for setting in (rr.setting_name(0.0), rr.setting_name(0.01)):
        for seed in (0, 1):
            for i, d in enumerate(names):
                for e in range(4):
                    share = own_share if e == i else (1 - own_share) / 3
                    rows.append({"setting": setting, "seed": seed, "domain": d, "expert": e, "weight": share,
                                 "token share": share})
    return pd.DataFrame(rows)


def _code_table(code_e0: float) -> pd.DataFrame:
    return pd.DataFrame([{"seed": s, "domain": d, "expert": e, "weight": (code_e0 if d == "code" else 0.3) if e == 0 else 0.2,
                          "token share": 0.25, "sample": 0} for s in (0, 1) for d in td.EXPERIMENT_DOMAINS["code"] for e in range(4)])


@pytest.mark.parametrize("strong", [True, False])
def test_claims_follow_the_routing(strong):
    cfg = tiny(n_seeds=2)
    match = rr.matching(_domain_table(0.7 if strong else 0.4), td.EXPERIMENT_DOMAINS["domains"])
    code = _code_table(0.6 if strong else 0.2)
    contrast = pd.DataFrame({"seed": [0, 1], "top share 0 and 7": [0.5, 0.6] if strong else [0.1, 0.1],
                             "top share other digits": [0.2, 0.2], "ratio": [2.5, 3.0], "difference": [0.3, 0.4]})
    got = rr.claims(cfg, code, contrast, match, code)
    for cid in ("ra.code_expert", "ra.mnist07", "ra.domain_match"):
        assert got[cid]["per_seed"] == [strong, strong] and got[cid]["mean_holds"] == strong
    assert got["ra.domain_match"]["value"]["history"] == pytest.approx(0.7 if strong else 0.4)
    assert list(got["ra.domain_match"]["extensions"]) == ["with entropy regularisation (weight 0.01)"]


def test_a_local_gpt2_style_tokenizer_folder_works(tmp_path):
    """A byte-level BPE tokenizer saved as GPT-2's files (no pad token), as a reader's local `gpt2` folder would be."""
    import json

    from tokenizers import ByteLevelBPETokenizer

    texts = [t for d in td.TEMPLATES for t in td.generate(d, 50, 0)]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=400, special_tokens=["<|endoftext|>"])
    folder = tmp_path / "gpt2"
    folder.mkdir()
    bpe.save_model(str(folder))  # vocab.json and merges.txt, as in the hub's gpt2
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "GPT2Tokenizer"}))
    cfg = tiny(tokenizer=str(folder))
    cfg.preflight()
    tok = td.load_tokenizer(cfg.tokenizer)
    assert tok.pad_token is None and type(tok).__name__.startswith("GPT2")
    moe, corpus, _ = ra.code_experiment(cfg, 0, tok, Store(tmp_path / "cache"))
    assert td.tokens(corpus.parts["eval"], 0, tok) == tok.tokenize(td.generate("code", cfg.eval_samples, 0, "eval")[0])
    assert len(ra.text_routing(moe, corpus)) == 4 * cfg.eval_samples * 4
