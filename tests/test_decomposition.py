"""The step decomposer's reading of numbers and programs, and the executor, on a tiny backbone."""

from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
import torch

from redlib.core.store import Store
from redlib.experiments import decomposition as dec
from redlib.experiments.ranges import Setting
from redlib.models.backbone import Backbone
from redlib.models.tagger import TAGS
from redlib.red.pipeline import retrain_residuals
from redlib.tasks.mixed import Task2Spec, make_task2


def test_numbers_are_found_and_read_in_both_formats():
    text = "If you subtract 5 from 12 and add 9, what do you get?"
    starts = dec.number_starts(text)
    assert [dec.read_number(text, s) for s in starts] == [5, 12, 9]
    digits = "Compute 4 5 minus 1 7, then add 9."
    assert [dec.read_number(digits, s) for s in dec.number_starts(digits)] == [45, 17, 9]
    assert dec.read_number("add x", 0) is None


def test_tags_assemble_into_a_program_or_into_no_program():
    text = "If you subtract 5 from 12 and add 9, what do you get?"
    s5, s12, s9 = dec.number_starts(text)
    offsets = [(0, 2), (s5, s5 + 1), (s12, s12 + 2), (s9, s9 + 1)]
    tag = TAGS.index
    assert dec.assemble(text, [0, tag("-1"), tag("first"), tag("+2")], offsets) == ([12, 5, 9], "-+")
    assert dec.assemble(text, [0, tag("-1"), tag("first"), tag("+3")], offsets) is None  # a step is missing
    assert dec.assemble(text, [0, tag("-1"), tag("-1"), tag("+2")], offsets) is None  # a slot twice
    assert dec.assemble(text, [0, 0, 0, 0], offsets) is None


def test_gold_tags_rebuild_every_program(tiny_qwen):
    bb = Backbone(str(tiny_qwen), 1)
    df = make_task2(Task2Spec(step_mix="1:0.3,2:0.3,4:0.4", n_train=200, n_val=5, n_test=5, seed=0))["train"]
    enc = dec.encode(bb, df)
    for n, text in enumerate(df["text"]):
        got = dec.assemble(text, enc["tags"][n].tolist(), [tuple(o) for o in enc["offsets"][n].tolist()])
        assert got == (list(df["operands"][n]), df["ops"][n]), text


@pytest.fixture(scope="module")
def tiny_run(tiny_qwen, tmp_path_factory):
    cfg = dec.DecompositionConfig.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2, backbone_epochs=1,
                                              op_samples=300, tagger_epochs=2, head_lr=1e-2, splits_reported="iid")
    store = Store(tmp_path_factory.mktemp("cache"))
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    return cfg, bb, store, dec.run(cfg, 0, Setting("iid"), bb, store)


def test_run_scores_every_routing_on_both_program_sources(tiny_run):
    cfg, _, _, t = tiny_run
    ex = t["execution"]
    assert set(ex["routing"]) == set(dec.ROUTINGS) | {name + dec.PAPER_LR for name in dec.PAPER_KEYS}
    assert set(ex["programs"]) == {"true programs", "decomposer's programs"}
    assert ex["accuracy"].between(0, 1).all() and set(ex["steps"]) == {"all", "2", "3", "4"}
    assert t["decomposer"]["exact"].dtype == bool and len(t["decomposer"]) == cfg.sizes[2]
    claims = dec.claims(cfg, {k: v for k, v in t.items()})
    assert set(claims) == {"sd.red.acc", "sd.moe.acc", "sd.allfix.acc", "sd.order", "sd.decomposer.exact"}
    assert set(claims["sd.red.acc"]["value"]) == {"all", "2", "3", "4"}
    paper = [k for k in claims["sd.order"]["extensions"] if "the paper's lr" in k]
    assert len(paper) == 1 and set(claims["sd.red.acc"]["extensions"][paper[0]]["value"]) == {"all", "2", "3", "4"}


def test_the_paper_rate_runs_beside_the_chosen_rates_for_every_method(tiny_run):
    cfg, bb, store, t = tiny_run
    assert {m + dec.PAPER_LR for m in ("RED", "softmax MoE", "RED (true range)")} <= set(t["op_experts"]["method"])
    paper = t["epochs"][t["epochs"]["stage"].str.endswith(dec.PAPER_LR) & ~t["epochs"]["stage"].str.startswith("stage 1")]
    assert (paper["lr"] == cfg.head_lr).all() and paper["stage"].str.startswith("expert").sum() == 2
    chosen = dec.train_ops(cfg, 0, Setting("iid"), bb, store, lrs={"residual": 0.003})
    again = dec.paper_lr_run(cfg, 0, Setting("iid"), bb, store)  # from the cache now
    assert again.red.lrs == {} and chosen.red.lrs == {"residual": 0.003}
    assert again.red.head is not None and torch.equal(again.red.head.weight, chosen.red.head.weight)
    assert not torch.equal(again.red.residuals[0].V.weight, chosen.red.residuals[0].V.weight)
    assert torch.equal(next(again.red.experts[0].parameters()), next(chosen.red.experts[0].parameters()))
    assert dec.paper_lr_run(replace(cfg, paper_lrs_beside=False), 0, Setting("iid"), bb, store) is None
    assert dec.paper_lr_run(replace(cfg, head_lr_grid="none"), 0, Setting("iid"), bb, store) is None
    with pytest.raises(ValueError, match="changes stage 1"):
        retrain_residuals(replace(cfg, lr=0.05), chosen.red, chosen.encoder, store)


def test_executor_follows_the_chain_and_flags_no_program(tiny_run):
    cfg, bb, store, _ = tiny_run
    ops = dec.train_ops(cfg, 0, Setting("iid"), bb, store)
    out = dec.execute(ops, [([30, 5, 7], "+-"), None], "whole")
    assert all(len(v) == 2 and v[1] == -1 for v in out.values())
    assert out["oracle experts"][0] >= 2
    trace = dec.trace(ops, ([30, 5, 7], "+-"), "whole")
    assert list(trace["step"]) == [1, 2] and trace["text"][0] == "30 + 5"
    np.testing.assert_allclose(trace["alpha add"] + trace["alpha subtract"], 1.0, rtol=1e-5)


def test_text_without_a_chain_decodes_to_no_program(tiny_run):
    cfg, bb, store, _ = tiny_run
    spec = dec.spec_for(cfg, 0, Setting("iid"))
    tagger = dec.train_decomposer(cfg, 0, make_task2(spec), {"spec": asdict(spec)}, bb, store)  # loads from the cache
    texts = pd.DataFrame({"text": ["What is the answer?", "What is 7?", ""]})
    assert dec.decompose(tagger, bb, texts) == [None, None, None]


def test_the_decomposer_is_the_same_whatever_ran_before_it(tiny_run, tmp_path):
    cfg, bb, _, _ = tiny_run
    spec = dec.spec_for(cfg, 0, Setting("iid"))
    frames = make_task2(spec)
    models = []
    for i, draws in enumerate((0, 5)):
        torch.rand(draws)  # another history of torch's global generator (stages trained or loaded before it)
        models.append(dec.train_decomposer(cfg, 0, frames, {"spec": asdict(spec)}, bb, Store(tmp_path / str(i))))
    first, second = (m.state_dict() for m in models)
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_worked_examples_keep_each_steps_result_beside_the_final_answer(tiny_run):
    """Each traced step shows its own x_s under `answer`; the expression's answer has a column of its own."""
    _, _, _, t = tiny_run
    ex = t["examples"]
    assert {"answer", "final answer", "true step result"} <= set(ex.columns)
    assert (ex.groupby("expression")["final answer"].nunique() == 1).all()  # one final answer per expression
    multi = ex[ex.groupby("expression")["expression"].transform("size") > 1]
    assert len(multi) and (multi["answer"] != multi["final answer"]).any()  # the steps' x_s were not overwritten
