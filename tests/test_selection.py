"""The small stages' learning rates, chosen on validation loss from one grid (`red/selection.py`)."""

from dataclasses import replace

import pytest

from redlib.core.config import ParameterError
from redlib.core.store import Store
from redlib.red import selection
from redlib.red.pipeline import run_red
from test_pipeline import synthetic, tiny_config


@pytest.fixture(autouse=True)
def serial(monkeypatch):
    monkeypatch.setenv("REDLIB_WORKERS", "1")


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    cfg = replace(tiny_config(epochs=6), head_lr_grid="0.0003,0.02")
    store = Store(tmp_path_factory.mktemp("cache"))
    data, enc = synthetic()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REDLIB_WORKERS", "1")
        return cfg, data, enc, store, selection.select(cfg, data, enc, store, seed=0)


def test_every_kind_is_tried_at_every_rate_and_keeps_its_lowest_validation_loss(chosen):
    cfg, _, _, _, choice = chosen
    t = choice.table
    kinds = [k for r in selection.kinds(cfg) for k in r]
    assert set(choice.lrs) == set(kinds) and len(t) == len(kinds) * len(cfg.lr_grid())
    for kind, rows in t.groupby("stage kind"):
        assert rows["chosen"].sum() == 1
        assert rows.loc[rows["chosen"], "val loss"].item() == rows["val loss"].min()
    # on this task a rate of 0.0003 for 6 epochs barely moves a head: the larger rate must win somewhere
    assert 0.02 in choice.lrs.values()
    assert selection.summary(t).shape[0] == len(kinds)


def test_the_run_at_the_chosen_rates_trains_nothing_new_and_records_them(chosen):
    cfg, data, enc, store, choice = chosen
    seen = len(store.events)
    run = run_red(cfg, data, enc, store, seed=0, lrs=choice.lrs)
    assert all(e["event"] == "loaded" for e in store.events[seen:])
    assert run.lrs == choice.lrs
    by_stage = {e["stage"]: e["lr"] for e in run.epochs}
    assert by_stage["router"] == choice.lrs["router"] and by_stage["moe gate"] == choice.lrs["gate"]
    assert by_stage["stage 1"] == cfg.lr  # stage 1 is not searched


def test_grid_none_keeps_the_paper_rate_and_a_bad_grid_is_refused():
    cfg = replace(tiny_config(), head_lr_grid="none")
    assert cfg.lr_grid() == []
    assert selection.select(cfg, *synthetic(), Store(), seed=0).lrs == {}
    for bad in ("", "0.1,0.1", "1e-3,x", "0", "2", "nan", ",".join(["0.1"] * 9)):
        with pytest.raises(ParameterError, match="head_lr_grid"):
            replace(tiny_config(), head_lr_grid=bad).check()
