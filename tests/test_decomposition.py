"""The step decomposer's reading of numbers and programs, and the executor, on a tiny backbone."""

from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
import torch

from redlib.configs.step_decomposition import DecompositionConfig
from redlib.core.store import Store
from redlib.experiments import step_decomposition as dec
from redlib.configs.ranges import Setting
from redlib.models.backbone import Backbone
from redlib.models.tagger import TAGS
from redlib.red.pipeline import retrain_residuals
from redlib.tasks.mixed import Task2Spec
from redlib.tasks.mixed_data import make_task2


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
    cfg = DecompositionConfig.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2, backbone_epochs=1,
                                              op_samples=300, tagger_epochs=2, head_lr=1e-2, extensions=[])
    store = Store(tmp_path_factory.mktemp("cache"))
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    return cfg, bb, store, dec.run_seed(cfg, 0, Setting("iid"), bb, store)


def test_its_stages_are_filed_under_the_pages_key(tiny_run):
    """The op experts' stages and the decomposer are filed under the page's key (its claims' and glues' prefix)."""
    cfg, _, store, _ = tiny_run
    assert {e["kind"] for e in store.events} >= {f"{cfg.KEY}/stage1", f"{cfg.KEY}/decomposer"}
    assert {e["kind"].split("/")[0] for e in store.events} == {cfg.KEY} == {"sd"}


def test_run_scores_every_routing_on_both_program_sources(tiny_run):
    cfg, _, _, t = tiny_run
    ex = t["execution"]
    assert set(ex["routing"]) == set(dec.ROUTINGS)
    assert set(ex["programs"]) == {"true programs", "decomposer's programs"}
    assert ex["accuracy"].between(0, 1).all() and set(ex["steps"]) == {"all", "2", "3", "4"}
    assert t["decomposer"]["exact"].dtype == bool and len(t["decomposer"]) == cfg.sizes[2]
    claims = dec.claims(cfg, {k: v for k, v in t.items()})
    assert set(claims) == {"sd.red.acc", "sd.moe.acc", "sd.allfix.acc", "sd.order", "sd.decomposer.exact"}
    assert set(claims["sd.red.acc"]["value"]) == {"all", "2", "3", "4"}
    decoded = [k for k in claims["sd.order"]["extensions"] if "decomposer's programs" in k]
    assert len(decoded) == 1 and set(claims["sd.red.acc"]["extensions"][decoded[0]]["value"]) == {"all", "2", "3", "4"}


def test_the_attribution_crosses_stage_1s_rate_with_the_small_stages_rate(tiny_run):
    """The 2x2: stage 1 at each rate x every small stage at each rate, on the first seed; cells that share a stage-1
    rate share its stage 1 (one run loaded from the cache), and the cell at the config's own rates is the claims'
    run; the small stages' rate reaches every small stage."""
    cfg, bb, store, t = tiny_run
    cfg = replace(cfg, lr=1e-4, head_lr=1e-4)  # the protocol's rates, one cell of the 2x2
    att = dec.attribution(cfg, bb, store)
    assert len(att) == 4 and set(zip(att["stage 1 lr"], att["small stages lr"])) == {
        (a, b) for a in dec.ATTRIBUTION_RATES for b in dec.ATTRIBUTION_RATES}
    assert att.groupby("stage 1 lr")["stage 1 val loss"].nunique().eq(1).all()
    assert att[["RED", "softmax MoE", "AllFix (equal weights)"]].stack().between(0, 1).all()
    own = dec.train_ops(cfg, 0, Setting("iid"), bb, store)
    lrs = {k: 1e-3 for k in dec.STAGE_KINDS_SMALL} | {"stage1": 1e-4}
    other = dec.train_ops(cfg, 0, Setting("iid"), bb, store, cfg.stage_settings(lrs))  # from the cache now
    assert torch.equal(own.red.head.weight, other.red.head.weight)
    assert {e["lr"] for e in other.red.epochs if e["stage"] != "stage 1"} == {1e-3}
    assert not torch.equal(own.red.residuals[0].V.weight, other.red.residuals[0].V.weight)
    with pytest.raises(ValueError, match="changes stage 1"):
        retrain_residuals(replace(cfg, lr=0.05), own.red, own.encoder, store)


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


def test_the_decomposer_table_is_one_row_per_phrasing_with_exact_and_no_program_shares():
    from redlib.experiments.step_decomposition import decomposer_table

    rows = [{"phrasing": p, "steps": k, "exact": e, "no_program": n, "seed": s, "run": r}
            for r in ("iid", "isolated") for s in (0, 1) for k in (2, 3) for p in ("bare", "if")
            for e, n in [((p == "if") or s == 0, p == "bare" and s == 1)]]
    table = decomposer_table(pd.DataFrame(rows))
    assert table.shape == (2, 4) and list(table.columns.names) == ["run", "steps"]
    assert table.loc["if", ("iid", 2)] == "1.000"  # every expression exact: no "no program" share
    assert table.loc["bare", ("isolated", 3)] == "0.500 / 0.500"  # half exact, half without a program


def test_worked_examples_name_each_expression_once_above_its_steps():
    from redlib.experiments.step_decomposition_report import examples_table

    ex = pd.DataFrame({"step": [1, 2, 1], "text": ["4 + 5", "9 - 2", "3 + 3"], "answer": [9, 7, 6],
                       "expression": ["4 plus 5 minus 2", "4 plus 5 minus 2", "3 plus 3"], "final answer": [7, 7, 6],
                       "decoded": ["ok", "ok", "no program"], "seed": 0, "run": "iid"})
    table = examples_table(pd.concat([ex, ex.assign(seed=1)]), 0, "iid")
    assert len(table) == 3 and list(table.columns) == ["text", "RED's answer"]
    blocks = table.index.get_level_values(0)
    assert blocks[0] == blocks[1] == "4 plus 5 minus 2 → 7 (its decoded program)"
    assert blocks[2] == "3 plus 3 → 6 (no program decoded: the true one)"


def test_the_attribution_sentence_names_the_rate_that_moves_each_method_more():
    from redlib.experiments.step_decomposition_report import attribution_words, rates_words

    att = pd.DataFrame({"stage 1 lr": [1e-3, 1e-3, 1e-4, 1e-4], "small stages lr": [1e-3, 1e-4, 1e-3, 1e-4],
                        "RED": [0.5, 0.48, 0.92, 0.9], "softmax MoE": [0.4, 0.39, 0.9, 0.89]})
    words = attribution_words(att)
    assert words.startswith("stage 1's rate, more than the small stages' rate (from 1e\u20113 to 1e\u20114")
    assert "stage 1's rate moves RED by +0.420 and the softmax MoE by +0.500" in words
    assert "the small stages' rate moves RED by -0.020 and the softmax MoE by -0.010" in words
    split = attribution_words(att.assign(RED=[0.5, 0.9, 0.52, 0.92]))
    assert split.startswith("for RED, the small stages' rate; for the softmax MoE, stage 1's rate (")
    assert attribution_words(None).startswith("not run")
    assert rates_words(pd.Series({"residual D1": 1e-4, "residual D2": 1e-4})) == "1e\u20114"
    assert rates_words(pd.Series({"residual D1": 1e-4, "residual D2": 1e-3})) == "residual D1 1e\u20114, residual D2 1e\u20113"


def test_the_decomposers_gap_to_the_true_programs_reads_in_words():
    import pandas as pd

    from redlib.experiments.step_decomposition_report import decomposer_gap_words

    a = pd.DataFrame({"RED": [0.9, 0.8]})
    assert decomposer_gap_words(a, a) == "every cell equal to the table above"
    assert decomposer_gap_words(a, a - 0.01234) == "no cell differs from the table above by more than 0.0123"
