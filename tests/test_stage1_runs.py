"""A range page's stage-1 runs trained side by side in worker processes: a serial run's bits, each counted once."""

from dataclasses import replace

import pandas as pd
import pytest
import torch

from redlib.configs.ranges import STAGE1_PAPER, Setting
from redlib.configs.step_decomposition import DecompositionConfig
from redlib.configs.task1_addition import Task1Config
from redlib.core.store import Store
from redlib.experiments import ranges, stage1_runs
from redlib.red import selection
from redlib.red.clock import timed


GRID = "0.0001,0.0003,0.001,0.003"  # the learning-rate grid, an extension the pages no longer run by default


def _state(st) -> dict[str, torch.Tensor]:
    """Stage 1's trained weights: the encoder's top blocks and the global head."""
    top = {k: v.clone() for k, v in st.encoder.trainable().state_dict().items()}
    return top | {f"head.{k}": v.clone() for k, v in st.head.state_dict().items()}


def test_stage1_runs_trained_side_by_side_are_a_serial_runs_bit_for_bit(tiny_qwen, tmp_path, monkeypatch):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=2, head_lr_grid=GRID)
    bb = ranges.backbone(cfg)
    runs = stage1_runs.grid_runs(cfg)[:2] + [(Setting("pairs"), cfg.seed + 1, cfg.lr)]
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    side = Store(tmp_path / "side")
    stage1_runs.train_side_by_side(cfg, runs, bb, side)
    trained = [e for e in side.events if e["kind"].endswith("/stage1")]
    assert [e["event"] for e in trained] == ["computed"] * 3 and all(e["train_seconds"] > 0 for e in trained)
    # each run counts its share of the time the runs overlapped: stage 1's seconds are the store's, entry by entry
    kind = trained[0]["kind"]
    assert abs(side.seconds[kind] - sum(e["train_seconds"] for e in trained)) < 1e-6
    serial = Store(tmp_path / "serial")
    for run in runs:
        seen, borrowed = len(side.events), side.borrowed
        loaded = stage1_runs._stages(cfg, run, bb, side)
        timed(loaded.seconds, loaded.store, "stage 1", loaded.base)
        # loaded where the page needs it: no second event for it, and its seconds are the worker's
        assert [e["kind"].rpartition("/")[2] for e in side.events[seen:]] == [] and side.borrowed > borrowed
        assert loaded.seconds["stage 1"] >= side.borrowed - borrowed
        entry = next(e for e in trained if e["entry"] == side.path(kind, loaded.stage1_key()).name)
        assert abs(side.borrowed - borrowed - entry["train_seconds"]) < 1e-3  # the restated share, from the header
        mine = _state(loaded)
        alone = stage1_runs._stages(cfg, run, bb, serial)
        alone.base()
        assert mine.keys() == _state(alone).keys()
        assert all(torch.equal(v, _state(alone)[k]) for k, v in mine.items()), run
        assert loaded.epochs == alone.epochs
    # nothing left to train: no worker starts, nothing is recorded
    seen = len(side.events)
    stage1_runs.train_side_by_side(cfg, runs, bb, side)
    assert len(side.events) == seen


def test_the_page_runs_are_every_setting_and_seed_at_its_rate():
    cfg = Task1Config.from_params(profile="full", head_lr_grid=GRID, stage1_paper_beside=True)
    choice = ranges.LrChoice({"stage1": 3e-4, "expert": 1e-3})
    runs = stage1_runs.page_runs(cfg, choice)
    assert len(runs) == sum(len(cfg.seeds_for(st)) for st in cfg.settings)
    assert all(lr == (cfg.lr if st.stage1 == STAGE1_PAPER else 3e-4) for st, _, lr in runs)
    assert [run[2] for run in stage1_runs.grid_runs(cfg)] == [lr for lr in cfg.lr_grid() for _ in cfg.seeds]  # every seed


def test_overlap_shares_divide_each_moment_among_the_runs_then():
    shares = stage1_runs.overlap_shares([(0.0, 10.0), (0.0, 4.0), (4.0, 10.0), (12.0, 13.0)])
    assert shares == [5.0, 2.0, 3.0, 1.0]  # 0-4: two runs; 4-10: two runs; 12-13: one alone
    assert sum(shares) == 11.0  # the wall time some run was training


def test_without_the_memory_for_two_workers_the_runs_train_in_the_page(tiny_qwen, tmp_path, monkeypatch):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=2, head_lr_grid=GRID)
    bb = ranges.backbone(cfg)
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    monkeypatch.setattr(stage1_runs.psutil, "virtual_memory", lambda: type("Memory", (), {"available": 2**30})())
    store = Store(tmp_path)
    with pytest.warns(UserWarning, match="stage-1 runs train one after another"):
        stage1_runs.train_side_by_side(cfg, stage1_runs.grid_runs(cfg)[:2], bb, store)
    assert not [e for e in store.events if e["kind"].endswith("/stage1")]  # nothing trained: the page will


def test_the_prefix_size_is_known_before_it_is_computed(tiny_qwen, tmp_path):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen))
    data, texts = ranges.task_data(cfg.NAMESPACE, *ranges.frames(cfg, cfg.seed, cfg.settings[0]))
    enc = stage1_runs.TextEncoder(ranges.backbone(cfg), texts, Store(tmp_path), cfg.NAMESPACE)
    size = enc.prefix_bytes
    assert size == enc.prefix.numel() * enc.prefix.element_size()


def test_with_a_rung_the_workers_train_every_rung_then_only_the_survivors_and_the_page_chooses_as_a_serial_run(
        tiny_qwen, tmp_path, monkeypatch):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=3, n_seeds=2,
                                        head_lr_grid="0.0001,0.01", lr_rung=1, lr_keep=1, splits_reported="iid",
                                        stage1_paper_beside=False)
    bb = ranges.backbone(cfg)
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    side = Store(tmp_path / "side")
    choice = stage1_runs.choose(cfg, bb, side)
    # every rate's rung on both seeds, then the one survivor's full tries, all in the workers: the page trains none
    made = [e for e in side.events if e["kind"].endswith("/stage1") and e["event"] == "computed"]
    assert len(made) == 2 * 2 + 1 * 2
    first = choice.table[choice.table["stage kind"] == selection.KIND_NAMES["stage1"]]
    assert first["val loss"].notna().sum() == 1 and first[selection.RUNG_LOSS].notna().all()
    monkeypatch.setenv("REDLIB_WORKERS", "1")
    serial = ranges.choose(cfg, bb, Store(tmp_path / "serial"))
    assert serial.lrs == choice.lrs
    pd.testing.assert_frame_equal(serial.table.drop(columns="seconds"), choice.table.drop(columns="seconds"))


def test_the_step_decomposition_trains_its_op_experts_stage_1_tries_side_by_side_and_the_page_loads_them(
        tiny_qwen, tmp_path, monkeypatch):
    from redlib.experiments import step_decomposition

    cfg = DecompositionConfig.from_params(profile="smoke", backbone=str(tiny_qwen), backbone_epochs=2,
                                                        n_seeds=2, head_lr_grid="0.0001,0.01")
    bb, store = ranges.backbone(cfg), Store(tmp_path)
    monkeypatch.setenv("REDLIB_WORKERS", "2")
    stage1_runs.train_grid(cfg, bb, store)
    made = [e for e in store.events if e["kind"] == f"{step_decomposition.NAMESPACE}/stage1"]
    assert [e["event"] for e in made] == ["computed"] * 2 * 2  # every rate on every seed, on the single steps
    seen = len(store.events)
    monkeypatch.setenv("REDLIB_WORKERS", "1")
    step_decomposition.choose(cfg, bb, store)
    assert not [e for e in store.events[seen:] if e["kind"].endswith("/stage1") and e["event"] != "loaded"]


def test_without_its_rungs_cached_no_rate_is_trained_to_the_end_beforehand(tiny_qwen, tmp_path):
    cfg = Task1Config.from_params(profile="smoke", backbone=str(tiny_qwen), lr_rung=1, head_lr_grid=GRID)
    bb = ranges.backbone(cfg)
    assert stage1_runs.rung_survivors(cfg, bb, Store(tmp_path)) == []  # the page's selection runs the rungs first
    assert stage1_runs.rung_survivors(replace(cfg, lr_rung=0), bb, Store(tmp_path)) == cfg.lr_grid()
