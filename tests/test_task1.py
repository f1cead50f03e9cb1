"""Task 1 end to end on a tiny decoder backbone: every stage runs, caches, and scores."""

import numpy as np
import pandas as pd
import pytest

from redlib.configs.ranges import Setting
from redlib.configs.task1_addition import Task1Config
from redlib.core.config import ParameterError
from redlib.core.store import Store
from redlib.experiments import ranges, task1_addition
from redlib.models.backbone import Backbone
from redlib.red import methods


@pytest.fixture(scope="module")
def tiny_run(tiny_qwen, tmp_path_factory):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2, backbone_epochs=1,
                                        head_lr=1e-2)
    store = Store(tmp_path_factory.mktemp("cache"))
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    return cfg, bb, store, ranges.run(cfg, task1_addition.frames, 0, Setting("pairs"), bb, store)


def test_every_method_is_scored(tiny_run):
    _, _, _, run = tiny_run
    t = ranges.evaluate(run)
    names = list(methods.methods(run.red))  # every registered method, the released code's MoE included
    assert list(t["overall"]["method"]) == names and len(names) == len(methods.METHODS)
    assert t["overall"]["accuracy"].between(0, 1).all() and len(t["per_range"]) == 5 * len(names)
    assert t["overall"]["boundary_accuracy"].between(0, 1).all() and (t["overall"]["run"] == "pairs").all()
    assert t["overall"]["errors within ±2"].dropna().between(0, 1).all()
    preds = methods.predict(run.red)
    np.testing.assert_allclose(preds["softmax MoE"][1].sum(1), 1.0, rtol=1e-5)
    assert (preds["oracle experts"][1].argmax(1) == run.frames["test"]["range"].to_numpy()).all()
    assert set(t["router_accuracy"]["split_part"]) == {"train", "val", "test"}
    assert {"stage 1", "moe gate", "global head all train"} <= set(t["epochs"]["stage"])


def test_its_stages_are_filed_under_the_pages_key(tiny_run):
    """One key names the page: its stage-cache namespace is the prefix of its claim ids and glued values."""
    cfg, _, store, _ = tiny_run
    assert {e["kind"].split("/")[0] for e in store.events} == {cfg.KEY} == {"t1"}
    assert {p.name for p in store.root.iterdir() if p.is_dir()} == {cfg.KEY}


def test_rerun_loads_every_stage_from_the_cache(tiny_run):
    cfg, bb, store, run = tiny_run
    seen = len(store.events)
    computed = sorted(e["entry"] for e in store.events if e["event"] == "computed" and not e["kind"].endswith("/prefix"))
    again = ranges.run(cfg, task1_addition.frames, 0, Setting("pairs"), bb, store)
    rerun = store.events[seen:]
    assert all(e["event"] == "loaded" for e in rerun)  # nothing is trained again
    # every trained stage of the first run is loaded; the frozen prefix is not even read (stage 1 and the features are)
    assert sorted(e["entry"] for e in rerun) == computed
    a, b = ranges.evaluate(run)["overall"], ranges.evaluate(again)["overall"]
    assert a["accuracy"].tolist() == b["accuracy"].tolist()


def test_case_study_routes_each_query(tiny_run):
    _, bb, _, run = tiny_run
    df = task1_addition.case_study(run, bb, ["What is 7 plus 9?", "What is 45 plus 48?"])
    alphas = df[[c for c in df.columns if c.startswith("alpha")]].to_numpy()
    np.testing.assert_allclose(alphas.sum(1), 1.0, rtol=1e-5)
    assert df["RED answer"].between(2, 100).all()
    full = task1_addition.case_study(run, bb)  # the paper's four queries, with the paper's weights beside ours
    assert list(full["query"]) == list(task1_addition.PAPER_CASES) and full["paper answer"].tolist() == [85, 51, 22, 41]


def test_settings_put_the_claims_setting_first_and_add_digits_on_pairs():
    cfg = Task1Config.from_params(profile="smoke")
    assert [st.label for st in cfg.settings] == ["iid", "pairs", "pairs, digits"]
    assert cfg.settings[2].description.endswith("digit-spaced numbers")
    full = Task1Config.from_params(profile="full")  # the pairs split on the protocol's seeds, it can rank
    assert [full.seeds_for(st) for st in full.settings] == [[0, 1, 2], [0, 1, 2], [0]]
    none = Task1Config.from_params(profile="smoke", extensions=[])
    assert [st.label for st in none.settings] == ["iid"]
    # papermill's -p gives strings: a comma-separated list, "none" the empty one
    assert Task1Config.from_params(profile="smoke", extensions="none").settings == none.settings
    alone = Task1Config.from_params(profile="smoke", extensions="digits:pairs,iid,digits:pairs")
    assert [st.label for st in alone.settings] == ["iid", "pairs, digits"]  # the claims' split, and twice: once
    with pytest.raises(ParameterError, match="unknown extension 'train' in parameter 'extensions' of task1_addition; "
                                             "allowed: iid, pairs, digits:iid, digits:pairs"):
        Task1Config.from_params(profile="smoke", extensions=["pairs", "train"])
    digits = Task1Config.from_params(profile="smoke", number_format="digits")  # no variant of a variant
    assert [st.label for st in digits.settings] == ["iid, digits", "pairs, digits"]


def test_tokenization_table_counts_digit_tokens(tiny_qwen):
    df = task1_addition.tokenization(Backbone(str(tiny_qwen), 1))
    whole, digits = df.set_index("number format")["text"]
    assert "47" in whole and "4 7" in digits


def test_a_backbone_in_another_folder_reuses_every_cached_stage(tiny_run, tmp_path):
    """Cache keys name the backbone by what it holds: a copy elsewhere (another clone, another venv) loads, not trains."""
    import shutil

    cfg, bb, store, run = tiny_run
    moved = shutil.copytree(cfg.backbone, tmp_path / "elsewhere" / "model")
    bb2 = Backbone(str(moved), cfg.k_trainable)
    assert bb2.identity == bb.identity and str(moved) != cfg.backbone
    seen = len(store.events)
    again = ranges.run(Task1Config.from_params(**{**cfg.asdict(), "backbone": str(moved)}), task1_addition.frames, 0,
                      Setting("pairs"), bb2, store)
    assert store.events[seen:] and all(e["event"] == "loaded" for e in store.events[seen:])
    assert ranges.evaluate(again)["overall"]["accuracy"].tolist() == ranges.evaluate(run)["overall"]["accuracy"].tolist()
    # and a folder with other weights is another backbone
    (moved / "model.safetensors").write_bytes((moved / "model.safetensors").read_bytes()[:-8] + b"\0" * 8)
    from redlib.models.backbone import fingerprint
    assert fingerprint(moved.resolve()) != bb.identity


def test_one_missing_stage_trained_in_process_keeps_the_runs_stage_record(tiny_qwen, tmp_path, monkeypatch):
    """A single missing small stage trains in the page's own process (no pool for one job): the run still records
    every stage once, loaded or computed, as a run that trains nothing or everything does."""
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=1, backbone_epochs=1)
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    ranges.run(cfg, task1_addition.frames, 0, Setting("iid"), bb, Store(tmp_path))
    entries = sorted(tmp_path.rglob("*.safetensors"))
    next(p for p in entries if p.parent.name == "gate").unlink()
    store = Store(tmp_path)
    ranges.run(cfg, task1_addition.frames, 0, Setting("iid"), bb, store)
    events = [e["event"] for e in store.events]
    cached = Store(tmp_path)
    ranges.run(cfg, task1_addition.frames, 0, Setting("iid"), bb, cached)
    assert events.count("computed") == 1 and len(events) == len(cached.events) == cached.hits > 20, events


def test_a_seed_whose_stage_1_stopped_far_from_the_others_is_flagged():
    from redlib.experiments import range_tables

    rows = [{"stage": "stage 1", "run": "iid", "seed": s, "lr": 3e-4, "val loss": v, "epochs run": 20, "best epoch": 16,
             "max epochs": 150} for s, v in enumerate([1.57, 2.28, 1.48])]
    rows += [{**rows[0], "run": "pairs", "val loss": 9.0}, {**rows[0], "stage": "router", "val loss": 9.0}]
    table = range_tables.stage1_seeds(pd.DataFrame(rows), "iid")
    assert table["seed"].tolist() == [0, 1, 2] and table["far from the other seeds"].tolist() == [False, True, False]
    assert range_tables.far_seeds_words(table) == "seed 1 (2.28 against the seeds' median 1.57)"
    assert range_tables.far_seeds_words(table.assign(**{"far from the other seeds": False})) == "no seed"


def test_the_range_figure_shows_the_first_setting_with_room_to_rank():
    import pandas as pd

    from redlib.experiments import range_tables

    rows = lambda run, red, moe: [{"run": run, "method": "RED", "accuracy": red},  # noqa: E731
                                  {"run": run, "method": "softmax MoE", "accuracy": moe}]
    ov = pd.DataFrame(rows("iid", 1.0, 0.999) + rows("pairs", 0.7, 0.8))
    assert range_tables.room_to_rank(ov, ["iid", "pairs"]) == "pairs"
    assert range_tables.room_to_rank(ov[ov["run"] == "iid"], ["iid"]) == "iid"  # none has room: the claims' setting


def test_the_paper_budget_table_sets_each_budget_beside_the_protocol_and_the_paper():
    """The extension under the paper's epoch budgets: a method per row, our protocol's first seed, each budget and the
    paper's number as columns; its words name both baselines; without the extension, how to run it."""
    from redlib.core.claims import load_claims
    from redlib.experiments import range_tables

    overall = pd.DataFrame({"run": ["iid"] * 4 + ["iid"] * 2, "seed": [0] * 4 + [1] * 2,
                            "method": ["RED", "softmax MoE", "uniform averaging", "oracle experts", "RED", "softmax MoE"],
                            "accuracy": [0.99, 0.98, 0.9, 0.97, 0.5, 0.5]})
    budget = pd.DataFrame([{"method": m, "accuracy": a, "budget": b} for b, k in (("b60", 0.1), ("b8", 0.2))
                           for m, a in (("RED", 0.9 - k), ("softmax MoE", 0.8 - k), ("uniform averaging", 0.3 - k))])
    t = {"overall": overall, "paper_budget": budget}
    table = range_tables.budget_table(t, "iid", 0, "t1")
    assert list(table.index) == ["RED", "softmax MoE", "uniform averaging"]
    assert list(table.columns[1:3]) == ["b60", "b8"] and table.iloc[0, 0] == 0.99
    assert table.loc["uniform averaging", "the paper"] == load_claims()["t1.uniform.acc"]["paper"]
    words = range_tables.budget_words(t, "iid", 0, "t1")
    assert words.startswith("uniform averaging 0.900 under our protocol, 0.200 under b60, 0.100 under b8")
    assert "softmax MoE 0.980" in words
    assert range_tables.budget_words({"overall": overall}, "iid", 0, "t1").startswith("not run")


def test_confusion_matrices_survive_their_table():
    """A page keeps its confusion matrices as one long table of the cells that count something (and the diagonal);
    read back, they are the same matrices, every label on both axes."""
    from redlib.core.metrics import confusion, confusion_matrices, confusion_table

    m = {"a (0.5)": confusion([0, 1, 2, 2], [0, 2, 2, 1], labels=[0, 1, 2]),
         "b": confusion([0, 1], [1, 1], labels=[0, 1, 2])}
    table = confusion_table(m)
    assert len(table) < 18 and list(table.columns) == ["title", "true", "predicted", "count"]
    back = confusion_matrices(table)
    assert list(back) == list(m) and all(back[k].equals(m[k]) for k in m)


def test_only_the_arithmetic_pages_offer_the_paper_budget_extension():
    from redlib.configs.step_decomposition import DecompositionConfig
    from redlib.configs.task2_mixed import Task2Config
    from redlib.core.config import ParameterError

    assert Task1Config.from_params(profile="full").paper_budget
    assert not Task2Config.from_params(profile="full", extensions=["isolated"]).paper_budget
    with pytest.raises(ParameterError, match="unknown extension 'paper_budget'.*allowed: .*attribution"):
        DecompositionConfig.from_params(profile="smoke", extensions=["paper_budget"])
