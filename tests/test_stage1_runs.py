"""A range page's stage-1 runs trained side by side in worker processes: a serial run's bits, each counted once."""

import pytest
import torch

from redlib.configs.ranges import Setting
from redlib.configs.task1_addition import Task1Config
from redlib.core.store import Store
from redlib.experiments import ranges, stage1_runs, task1_addition
from redlib.red.clock import timed


def _state(st) -> dict[str, torch.Tensor]:
    """Stage 1's trained weights: the encoder's top blocks and the global head."""
    top = {k: v.clone() for k, v in st.encoder.trainable().state_dict().items()}
    return top | {f"head.{k}": v.clone() for k, v in st.head.state_dict().items()}


def test_stage1_runs_trained_side_by_side_are_a_serial_runs_bit_for_bit(tiny_qwen, tmp_path, monkeypatch):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=2)
    bb = ranges.backbone(cfg)
    main = cfg.settings[0]  # two rates on one data set (the attribution's kind of run), another split and seed
    runs = [(main, cfg.seed, cfg.lr), (main, cfg.seed, 1e-3), (Setting("pairs"), cfg.seed + 1, cfg.lr)]
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    side = Store(tmp_path / "side")
    stage1_runs.train_side_by_side(cfg, task1_addition.frames, runs, bb, side)
    trained = [e for e in side.events if e["kind"].endswith("/stage1")]
    assert [e["event"] for e in trained] == ["computed"] * 3 and all(e["train_seconds"] > 0 for e in trained)
    # each run counts its share of the time the runs overlapped: stage 1's seconds are the store's, entry by entry
    kind = trained[0]["kind"]
    assert abs(side.seconds[kind] - sum(e["train_seconds"] for e in trained)) < 1e-6
    serial = Store(tmp_path / "serial")
    for run in runs:
        seen, borrowed = len(side.events), side.borrowed
        loaded = stage1_runs._stages(cfg, task1_addition.frames, run, bb, side)
        timed(loaded.seconds, loaded.store, "stage 1", loaded.base)
        # loaded where the page needs it: no second event for it, and its seconds are the worker's
        assert [e["kind"].rpartition("/")[2] for e in side.events[seen:]] == [] and side.borrowed > borrowed
        assert loaded.seconds["stage 1"] >= side.borrowed - borrowed
        entry = next(e for e in trained if e["entry"] == side.path(kind, loaded.stage1_key()).name)
        assert abs(side.borrowed - borrowed - entry["train_seconds"]) < 1e-3  # the restated share, from the header
        mine = _state(loaded)
        alone = stage1_runs._stages(cfg, task1_addition.frames, run, bb, serial)
        alone.base()
        assert mine.keys() == _state(alone).keys()
        assert all(torch.equal(v, _state(alone)[k]) for k, v in mine.items()), run
        assert loaded.epochs == alone.epochs
    # nothing left to train: no worker starts, nothing is recorded
    seen = len(side.events)
    stage1_runs.train_side_by_side(cfg, task1_addition.frames, runs, bb, side)
    assert len(side.events) == seen


def test_the_page_runs_are_every_setting_and_seed_at_the_configs_rate():
    cfg = Task1Config.from_params(profile="full", lr=3e-4)
    runs = stage1_runs.page_runs(cfg)
    assert len(runs) == len(set(runs)) == sum(len(cfg.seeds_for(st)) for st in cfg.settings)
    assert {st for st, _, _ in runs} == set(cfg.settings) and {lr for _, _, lr in runs} == {3e-4}


def test_overlap_shares_divide_each_moment_among_the_runs_then():
    shares = stage1_runs.overlap_shares([(0.0, 10.0), (0.0, 4.0), (4.0, 10.0), (12.0, 13.0)])
    assert shares == [5.0, 2.0, 3.0, 1.0]  # 0-4: two runs; 4-10: two runs; 12-13: one alone
    assert sum(shares) == 11.0  # the wall time some run was training


def test_without_the_memory_for_two_workers_the_runs_train_in_the_page(tiny_qwen, tmp_path, monkeypatch):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=2)
    bb = ranges.backbone(cfg)
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    monkeypatch.setattr(stage1_runs.psutil, "virtual_memory", lambda: type("Memory", (), {"available": 2**30})())
    store = Store(tmp_path)
    with pytest.warns(UserWarning, match="stage-1 runs train one after another"):
        stage1_runs.train_side_by_side(cfg, task1_addition.frames, stage1_runs.page_runs(cfg)[:2], bb,
                                       store)
    assert not [e for e in store.events if e["kind"].endswith("/stage1")]  # nothing trained: the page will


def test_the_prefix_size_is_known_before_it_is_computed(tiny_qwen, tmp_path):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen))
    data, texts = ranges.task_data(cfg.KEY, *task1_addition.frames(cfg, cfg.seed, cfg.settings[0]))
    enc = stage1_runs.TextEncoder(ranges.backbone(cfg), texts, Store(tmp_path), cfg.KEY)
    size = enc.prefix_bytes
    assert size == enc.prefix.numel() * enc.prefix.element_size()
