"""Every stage kind's learning rate, stage 1's included, chosen on validation loss from one grid (`selection.py`)."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from redlib.core.config import ParameterError
from redlib.core.store import Store
from redlib.core.train import evaluate_loss
from redlib.red import selection
from redlib.red.pipeline import run_red
from redlib.red.stages import Base, Stages, ce
from test_pipeline import synthetic, tiny_config


@pytest.fixture(autouse=True)
def serial(monkeypatch):
    monkeypatch.setenv("REDLIB_WORKERS", "1")


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    cfg = replace(tiny_config(epochs=6), head_lr_grid="0.0003,0.02", head_lr_extend=1)
    store = Store(tmp_path_factory.mktemp("cache"))
    data, enc = synthetic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REDLIB_WORKERS", "1")
        return cfg, data, enc, store, selection.select(cfg, data, enc, store, seed=0)


def test_every_kind_is_tried_at_every_rate_and_keeps_its_lowest_validation_loss(chosen):
    cfg, _, _, _, choice = chosen
    t = choice.table
    kinds = [k for r in selection.kinds(cfg) for k in r]
    grid = cfg.lr_grid()
    assert set(choice.lrs) == set(kinds)
    for kind, rows in t.groupby("stage kind"):
        assert set(grid) <= set(rows["lr"])
        assert rows["chosen"].sum() == 1
        assert rows.loc[rows["chosen"], "val loss"].item() == rows["val loss"].min()
        # a kind goes one rate past the grid exactly when the grid's largest rate was its best
        on_grid = rows[rows["lr"].isin(grid)]
        at_edge = on_grid.loc[on_grid["val loss"].idxmin(), "lr"] == max(grid)
        assert sorted(rows["lr"]) == sorted(grid + ([selection.next_rate(max(grid))] if at_edge else []))
    # on this task a rate of 0.0003 for 6 epochs barely moves a head: a larger rate must win somewhere
    assert max(choice.lrs.values()) >= 0.02
    assert selection.summary(t).shape[0] == len(kinds)


def test_the_run_at_the_chosen_rates_trains_nothing_new_and_records_them(chosen):
    cfg, data, enc, store, choice = chosen
    seen = len(store.events)
    run = run_red(cfg, data, enc, store, seed=0, lrs=choice.lrs)
    assert all(e["event"] == "loaded" for e in store.events[seen:])
    assert run.lrs == choice.lrs
    by_stage = {e["stage"]: e["lr"] for e in run.epochs}
    assert by_stage["router"] == choice.lrs["router"] and by_stage["moe gate"] == choice.lrs["gate"]
    assert by_stage["stage 1"] == choice.lrs["stage1"]  # stage 1 is chosen like every other kind


def test_stage_1_is_chosen_first_and_its_validation_loss_is_recorded_trained_or_loaded(chosen, tmp_path):
    cfg, data, enc, store, choice = chosen
    t = choice.table
    first = t[t["stage kind"] == selection.KIND_NAMES["stage1"]]
    assert t["stage kind"].iloc[0] == selection.KIND_NAMES["stage1"] and set(cfg.lr_grid()) <= set(first["lr"])
    assert first["val loss"].notna().all() and len(set(first["val loss"])) == len(first)  # each rate its own stage 1
    trained = run_red(cfg, data, enc, Store(tmp_path), seed=0, lrs=choice.lrs).epochs[0]
    loaded = run_red(cfg, data, enc, store, seed=0, lrs=choice.lrs).epochs[0]
    assert trained["stage"] == "stage 1" and trained["val loss"] == loaded["val loss"] == \
        first.loc[first["chosen"], "val loss"].item()
    # the loss an entry records is the one its kept state gives (what an older entry, which records none, computes)
    st = Stages(cfg, data, enc, store, 0, lrs=choice.lrs)
    st.base()
    ids, at = np.unique(data.ids["val"].numpy(), return_index=True)
    with torch.no_grad():
        again = evaluate_loss(Base(enc, st.head), ce, (torch.as_tensor(ids), data.labels["val"][at]))
    assert again == trained["val loss"]


def test_the_page_words_name_the_kinds_left_at_the_edge_or_say_there_are_none(chosen):
    cfg, _, _, _, choice = chosen
    t = choice.table
    words = selection.found("x", cfg, t)
    assert words["x_lr_grid"] == "0.0003, 0.02; a kind whose best is the largest tried, then at 0.03"
    at_edge = t[t["chosen"] & (t["lr"] == 0.03)]["stage kind"].tolist()
    assert at_edge and words["x_lr_edge"] == ", ".join(at_edge)  # this task's kinds end at the largest rate
    inside = t.assign(chosen=t["lr"] == 0.0003)  # every kind choosing its smallest rate: none left at the edge
    assert selection.found("x", cfg, inside)["x_lr_edge"].startswith("no kind")


def test_the_next_rate_follows_the_1_3_10_series():
    assert [selection.next_rate(x) for x in (1e-4, 3e-4, 1e-3, 3e-3, 0.02, 0.005, 0.3)] == \
        [3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-2, 1.0]


def test_a_gate_or_stage_4_over_inputs_trained_at_another_rate_is_trained_again_not_loaded(tmp_path):
    """The cache key of a stage that trains on other stages carries their rates: a gate at 1e-3 over experts at
    3e-4 is not the gate at 1e-3 over experts at 1e-2 (the paper-lr extension and the selection both make such pairs)."""
    cfg, store = tiny_config(epochs=2), Store(tmp_path)
    data, enc = synthetic()
    run_red(cfg, data, enc, store, seed=0, lrs={"expert": 3e-4, "gate": 1e-3, "residual": 3e-4, "joint": 1e-3})
    seen = len(store.events)
    run_red(cfg, data, enc, store, seed=0, lrs={"expert": 1e-2, "gate": 1e-3, "residual": 1e-2, "joint": 1e-3})
    events = {e["kind"].split("/")[-1]: e["event"] for e in store.events[seen:]}
    assert events["gate"] != "loaded" and events["joint"] != "loaded" and events["router"] == "loaded"
    seen = len(store.events)
    run_red(cfg, data, enc, store, seed=0, lrs={"expert": 3e-4, "gate": 1e-3, "residual": 3e-4, "joint": 1e-3})
    assert all(e["event"] == "loaded" for e in store.events[seen:])


def test_grid_none_keeps_the_paper_rate_and_a_bad_grid_is_refused():
    cfg = replace(tiny_config(), head_lr_grid="none")
    assert cfg.lr_grid() == []
    assert selection.select(cfg, *synthetic(), Store(), seed=0).lrs == {}
    for bad in ("", "0.1,0.1", "1e-3,x", "0", "2", "nan", ",".join(["0.1"] * 9)):
        with pytest.raises(ParameterError, match="head_lr_grid"):
            replace(tiny_config(), head_lr_grid=bad).check()
    for bad in (-1, 5):
        with pytest.raises(ParameterError, match="head_lr_extend"):
            replace(tiny_config(), head_lr_extend=bad).check()


def test_stage_1_is_chosen_on_the_mean_over_every_seed_and_the_later_kinds_on_the_first(tmp_path):
    """A rate chosen on one seed can be unstable on another: stage 1's loss per rate is the mean over the seeds."""
    cfg = replace(tiny_config(epochs=4), head_lr_grid="0.0003,0.02", head_lr_extend=0)
    store = Store(tmp_path)
    (data0, enc0), (data1, enc1) = synthetic(0), synthetic(1)
    choice = selection.select(cfg, data0, enc0, store, 0, others=((data1, enc1, 1),))
    is_stage1 = choice.table["stage kind"] == selection.KIND_NAMES["stage1"]
    stage1 = choice.table[is_stage1].set_index("lr")
    assert (stage1["seeds"] == 2).all() and (choice.table.loc[~is_stage1, "seeds"] == 1).all()
    for lr in cfg.lr_grid():  # the mean of the two seeds' own stage-1 runs, loaded from the cache
        losses = []
        for data, enc, seed in ((data0, enc0, 0), (data1, enc1, 1)):
            st = Stages(cfg, data, enc, store, seed, lrs={"stage1": lr})
            st.base()
            losses.append(st.epochs[-1]["val loss"])
        assert stage1.loc[lr, "val loss"] == pytest.approx(np.mean(losses), rel=1e-12)
        assert stage1.loc[lr, "highest val loss of its stages"] == max(losses)
    assert choice.lrs["stage1"] == stage1["val loss"].idxmin()


def test_every_try_records_its_validation_loss_per_epoch(chosen):
    _, _, _, _, choice = chosen
    curves = choice.curves
    assert set(curves["stage kind"]) == set(choice.table["stage kind"])
    for (kind, lr), c in curves.groupby(["stage kind", "lr"]):
        row = choice.table[(choice.table["stage kind"] == kind) & (choice.table["lr"] == lr)].iloc[0]
        for _, one in c.groupby("stage"):  # one stage: a value per epoch run, in order; the kept state the best epoch's
            assert list(one["epoch"]) == list(range(len(one))) and len(one) <= row["epochs run"]
            assert one["val loss"].idxmin() - one.index[0] <= row["best epoch"]
        best = c.groupby("stage")["val loss"].min()
        assert best.mean() == pytest.approx(row["val loss"], rel=1e-5)  # the table's loss is the kept states' mean


def test_the_rung_rule_keeps_the_better_half_and_counts_the_epochs_it_saves():
    import pandas as pd
    # three rates on two seeds: 0.1 is best early but worst at the end; 0.3 stops by patience before the rung
    curves = [(0.1, s, e, v) for s in (0, 1) for e, v in enumerate([1.0, 0.5, 0.45, 0.44, 0.43, 0.42])]
    curves += [(0.2, s, e, v) for s in (0, 1) for e, v in enumerate([2.0, 1.5, 0.9, 0.3, 0.2, 0.1])]
    curves += [(0.3, s, e, v) for s in (0, 1) for e, v in enumerate([3.0, 2.9])]
    df = pd.DataFrame(curves, columns=["lr", "seed", "epoch", "val loss"])
    early = selection.rung_rule(df, 2)  # at epoch 2: 0.1 (0.5) and 0.2 (1.5) go on, 0.3 (2.9) is dropped
    assert early["survivors"] == "0.1, 0.2" and early["the rule's choice"] == "0.2" and early["same"]
    # every try's rung, then the survivors' full tries from scratch
    assert early["epochs, full grid"] == 2 * (6 + 6 + 2) and early["epochs, the rule"] == 2 * (2 + 2 + 2) + 2 * (6 + 6)
    # 0.3 now ends at 0.6 after four epochs: at the rung it beats 0.2, the full grid's choice, which is dropped
    slow = df[df["lr"] != 0.3]
    slow = pd.concat([slow, pd.DataFrame([(0.3, s, e, v) for s in (0, 1) for e, v in enumerate([3.0, 0.6, 0.7, 0.8])],
                                         columns=df.columns)])
    late = selection.rung_rule(slow, 2)
    assert late["survivors"] == "0.1, 0.3" and late["full grid's choice"] == "0.2" and late["the rule's choice"] == "0.1"
    assert not late["same"] and late["epochs, the rule"] == 2 * (2 + 2 + 2) + 2 * (6 + 4) and late["saved"] == 0


def test_the_rung_rule_keeps_as_many_rates_as_asked_and_goes_above_the_grid_only_from_its_edge():
    import pandas as pd
    vals = {0.1: [1.0, 0.9, 0.8], 0.2: [0.95, 0.5, 0.4], 0.4: [0.9, 0.6, 0.3], 0.8: [2.0, 0.2, 0.1]}
    df = pd.DataFrame([(lr, 0, e, v) for lr, vs in vals.items() for e, v in enumerate(vs)],
                      columns=["lr", "seed", "epoch", "val loss"])
    one = selection.rung_rule(df, 1, keep=1, grid=[0.1, 0.2, 0.4])  # 0.8 lies above the grid
    assert one["survivors"] == "0.4" and one["the rule's choice"] == "0.8" and one["same"]  # from the edge, it goes on
    assert one["epochs, the rule"] == 3 * 1 + 3 + 3  # the rungs, the survivor's full try, the rate above
    inner = selection.rung_rule(df, 1, keep=1, grid=[0.1, 0.2, 0.4, 1.6])  # 1.6 never tried: 0.4 is no edge
    assert inner["the rule's choice"] == "0.4" and not inner["same"] and inner["epochs, the rule"] == 3 * 1 + 3


def test_successive_halving_trains_the_survivors_to_the_end_and_chooses_what_its_replay_on_the_full_grid_chooses(
        chosen):
    cfg, data, enc, store, full = chosen
    rung, keep = 2, 1
    halved = selection.select(replace(cfg, lr_rung=rung, lr_keep=keep), data, enc, store, seed=0)
    t = halved.table
    for kind, rows in t.groupby("stage kind", sort=False):
        on_grid = rows[rows["lr"].isin(cfg.lr_grid())]
        assert on_grid["val loss"].notna().sum() == keep and on_grid[selection.RUNG_LOSS].notna().all()
        # a rung try is the full try's first epochs: its loss is the best of the full curve's first `rung` epochs
        curves = full.curves[full.curves["stage kind"] == kind]
        early = curves[curves["epoch"] < rung].groupby(["lr", "stage"])["val loss"].min().groupby("lr").mean()
        for lr, loss in zip(on_grid["lr"], on_grid[selection.RUNG_LOSS]):
            assert loss == pytest.approx(early[lr], rel=1e-6)
        # and the rule chooses what replaying it on the full grid's curves predicts
        replay = selection.rung_rule(curves, rung, keep, cfg.lr_grid())
        assert f"{halved.lrs[next(k for k, v in selection.KIND_NAMES.items() if v == kind)]:g}" == \
            replay["the rule's choice"]
    assert "dropped after the rung" in selection.summary(t)
