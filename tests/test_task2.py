"""Task 2 end to end on a tiny decoder backbone: the range pipeline on expressions, scored per operations and phrasing."""

import pandas as pd
import pytest

from redlib.core.claims import load_claims
from redlib.core.config import ParameterError
from redlib.core.store import Store
from redlib.experiments import ranges, task2
from redlib.models.backbone import Backbone
from redlib.tasks.mixed import PHRASINGS


@pytest.fixture(scope="module")
def tiny_tables(tiny_qwen, tmp_path_factory):
    cfg = task2.Task2Config.from_params(profile="smoke", backbone=str(tiny_qwen), max_epochs=2, backbone_epochs=1,
                                        head_lr=1e-2)
    store = Store(tmp_path_factory.mktemp("cache"))
    bb = Backbone(cfg.backbone, cfg.k_trainable)
    tables = [task2.evaluate(ranges.run(cfg, 0, st, bb, store)) for st in cfg.settings]
    return cfg, {name: pd.concat([tb[name] for tb in tables]) for name in tables[0]}


def test_scores_by_operations_and_phrasing(tiny_tables):
    cfg, t = tiny_tables
    ov = t["overall"]
    assert set(ov["run"]) == {"iid", "isolated"}
    ops = task2.by_operations(ov)
    assert list(ops.columns) == [1, 2] and ops.stack().between(0, 1).all()  # the default mix: one or two operations
    phr = task2.by_phrasing(ov, "iid")
    assert set(phr.columns) <= {f"'{p}' phrasing" for p in PHRASINGS} and len(phr.columns) >= 2


def test_claims_cover_every_task2_id_with_isolated_as_extension(tiny_tables):
    cfg, t = tiny_tables
    measured = task2.claims(cfg, t)
    assert set(measured) == {c for c in load_claims() if c.startswith("t2.")}
    assert measured["t2.red.acc"]["run"] == "iid"
    assert ranges.SPLIT_LABELS["isolated"] in measured["t2.red.acc"]["extensions"]
    assert len(measured["t2.red.per_range"]["value"]) == 5


def test_data_table_measures_the_train_test_overlap():
    cfg = task2.Task2Config.from_params(profile="smoke")
    table = task2.data_table(cfg).set_index(["run", "part"])
    iid, isolated = table.loc[("iid", "test")], table.loc[("isolated", "test")]
    assert isolated["test forms in train"] == "0.0%" and iid["test forms in train"] != "0.0%"
    assert set(task2.examples(cfg)["phrasing"]) == set(PHRASINGS)


def test_bad_step_mix_is_a_one_line_error():
    with pytest.raises(ParameterError, match="step_mix"):
        task2.Task2Config.from_params(profile="smoke", step_mix="5:1")
    with pytest.raises(ParameterError, match="split"):
        task2.Task2Config.from_params(profile="smoke", split="pairs")


def test_a_stage_still_improving_at_its_cap_is_counted_and_named():
    """Best epoch (0-based) within `patience` of the cap: still improving; stopped earlier by patience: not."""
    epochs = pd.DataFrame([
        {"run": "iid", "stage": "residual R1", "epochs run": 60, "best epoch": 58, "max epochs": 60, "patience": 3},
        {"run": "iid", "stage": "residual R1", "epochs run": 40, "best epoch": 36, "max epochs": 60, "patience": 3},
        {"run": "iid", "stage": "router", "epochs run": 60, "best epoch": 56, "max epochs": 60, "patience": 3}])
    table = ranges.epochs_table(epochs)
    assert table["still improving at the cap"].tolist() == [1, 0] and table["runs"].tolist() == [2, 1]
    assert ranges.capped_stages(epochs) == "iid: residual R1 1/2"
    assert ranges.capped_stages(epochs.iloc[1:]) == "no stage"


def test_found_gives_every_value_the_prose_pastes(tiny_tables):
    """Each glue key the page's "What we found" names is produced by `found()` (the strict build checks the rest)."""
    import re

    from redlib.book.glue import plain
    from redlib.core.runtime import project_root

    cfg, t = tiny_tables
    values = task2.found(cfg, t, {cid: "holds" for cid in task2.claims(cfg, t)})
    prose = (project_root() / "notebooks" / "task2_mixed.py").read_text()
    named = set(re.findall(r"\{glue:text\}`(\w+)", prose))
    assert named <= set(values), named - set(values)
    assert all(isinstance(plain(v), (int, float, str)) for v in values.values())
