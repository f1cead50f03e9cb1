"""MNIST benchmark: the IDX loader, clear errors on a bad data_dir, and a tiny trained run on the embedded digits."""

import gzip

import numpy as np
import pandas as pd
import pytest

from redlib.configs.mnist_label5 import MnistConfig
from redlib.core.config import ParameterError
from redlib.core.store import Store
from redlib.experiments import mnist_label5, range_tables
from redlib.red import methods
from redlib.red.stages import Stages
from redlib.red.types import base_rows
from redlib.tasks import mnist as data
from redlib.tasks.idx import IDX_FILES


def write_idx(path, array: np.ndarray, gz: bool) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    (gzip.open(f"{path}.gz", "wb") if gz else open(path, "wb")).write(raw)


@pytest.fixture
def idx_dir(tmp_path):
    rng = np.random.default_rng(0)
    for part, n in (("train", 100), ("test", 20)):
        images, labels = IDX_FILES[part]
        write_idx(tmp_path / images, rng.integers(0, 256, (n, 28, 28)), gz=part == "train")
        write_idx(tmp_path / labels, np.arange(n) % 10, gz=False)
    return tmp_path


def test_the_idx_loader_reads_gzipped_and_plain_files(idx_dir):
    full = data.load_idx_dir(str(idx_dir))
    assert full["train"][0].shape == (100, 28, 28) and full["test"][0].shape == (20, 28, 28)
    assert list(full["test"][1][:12]) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    parts = data.splits(str(idx_dir), split_seed=0)
    assert [len(parts[k][1]) for k in ("train", "val", "test")] == [90, 10, 20]
    assert (np.bincount(parts["val"][1], minlength=10) == 1).all()  # stratified: one of each digit


def test_a_missing_or_malformed_data_dir_is_a_one_line_error(tmp_path, idx_dir):
    with pytest.raises(ParameterError, match="does not exist"):
        MnistConfig.from_params(profile="smoke", data_dir=str(tmp_path / "nope")).preflight()
    (idx_dir / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(ParameterError, match="missing: t10k-labels-idx1-ubyte"):
        data.check_idx_dir(str(idx_dir))
    (idx_dir / "t10k-labels-idx1-ubyte").write_bytes(b"not an idx file")
    with pytest.raises(ParameterError, match="not an MNIST IDX file"):
        data.load_idx_dir(str(idx_dir))
    with pytest.raises(ParameterError, match="allowed: paper, code"):
        MnistConfig.from_params(judged_forms="released")


def test_the_embedded_split_is_stratified_8_1_1_and_fixed():
    parts = data.splits(None, split_seed=0)
    assert [len(parts[k][1]) for k in ("train", "val", "test")] == [4000, 500, 500]
    assert (np.bincount(parts["test"][1]) == 50).all()
    assert np.array_equal(parts["test"][1], data.splits(None, split_seed=0)["test"][1])
    assert data.to_tensor(parts["test"][0]).shape == (500, 1, 28, 28)


def test_a_tiny_run_beats_chance_and_has_both_moe_forms(tmp_path):
    cfg = MnistConfig.from_params(profile="smoke", max_epochs=2, backbone_epochs=2)
    parts = data.splits(None, split_seed=0)
    parts = {k: (x[: len(x) // 4], y[: len(y) // 4]) for k, (x, y) in parts.items()}  # 1,000 / 125 / 125 digits
    run = mnist_label5.run_seed(cfg, 0, parts, Store(tmp_path))
    assert [p.name for p in tmp_path.iterdir()] == [cfg.KEY] == ["mn"]  # its stages, under the page's key
    base = base_rows(cfg, run.data.labels["train"], 0)
    assert (np.bincount(run.data.labels["train"][base].numpy()) == 10).all()  # 10% of 1,000, balanced by label
    t = mnist_label5.evaluate(run)
    acc = t["overall"].set_index("method")["accuracy"]
    assert {"softmax MoE", "softmax MoE (code experts)", mnist_label5.CODE_UNIFORM} <= set(acc.index)
    assert acc["oracle experts"] > 0.3 and acc["RED"] > 0.2  # chance is 0.1
    assert set(t["routing"].columns) >= set(data.DOMAIN_NAMES) and len(t["routing"]) == 10
    np.testing.assert_allclose(t["routing"][data.DOMAIN_NAMES].sum(axis=1), 1.0, rtol=1e-5)
    claims = mnist_label5.claims(cfg, {k: v for k, v in t.items()})
    assert set(claims) == {"mn.base.acc", "mn.uniform.acc", "mn.moe.acc", "mn.red.acc", "mn.red.per_domain",
                           "mn.moe.per_domain"}
    assert claims["mn.red.acc"]["extensions"]  # the code's forms beside the paper's
    assert len(claims["mn.red.per_domain"]["value"]) == 5 and "extensions" not in claims["mn.base.acc"]
    assert list(methods.methods(run)) == list(methods.METHODS)  # the code MoE's gate is one of this run's stages


def test_each_seed_tests_on_its_own_split_unless_one_is_fixed():
    """By default the spread over seeds includes which digits are tested; `split_seed` fixes one split for all."""
    cfg = MnistConfig.from_params(profile="smoke")
    assert cfg.split_seed is None and cfg.split_for(3) == 3
    a, b = mnist_label5.load(cfg, 0)["test"][1], mnist_label5.load(cfg, 1)["test"][1]
    x0, x1 = mnist_label5.load(cfg, 0)["test"][0], mnist_label5.load(cfg, 1)["test"][0]
    assert len(a) == len(b) == 500 and not np.array_equal(x0, x1)
    fixed = MnistConfig.from_params(profile="smoke", split_seed=0)
    assert np.array_equal(mnist_label5.load(fixed, 0)["test"][0], mnist_label5.load(fixed, 4)["test"][0])


def test_stage1_per_split_loads_the_protocols_own_runs_and_trains_the_crossed_ones(tmp_path):
    """The diagonal (each seed on its own split) is the protocol's stage 1, loaded bit for bit; the rest is trained."""
    cfg = MnistConfig.from_params(profile="smoke", n_seeds=2, backbone_epochs=1, lr=3e-3)
    store = Store(tmp_path)
    own = {}
    for s in cfg.seeds:
        st = Stages(cfg, *mnist_label5.task(cfg, mnist_label5.load(cfg, s), s), store, s)
        st.base()
        own[s] = st.epochs[-1]["val loss"]
    table = mnist_label5.stage1_by_split(cfg, Store(tmp_path))
    assert len(table) == 4 and set(table["split"]) == set(table["training seed"]) == set(cfg.seeds)
    wide = range_tables.split_matrix(table)
    assert all(wide.loc[s, s] == own[s] for s in cfg.seeds) and wide.notna().all().all()
    fixed = MnistConfig.from_params(profile="smoke", n_seeds=2, backbone_epochs=1, split_seed=0, lr=3e-3)
    assert set(mnist_label5.stage1_by_split(fixed, Store(tmp_path))["split"]) == {0}  # one split


def test_a_far_seed_is_told_apart_from_a_harder_split():
    """The same rule per split: a column high for every seed is the split; a diagonal cell alone high is training."""
    def table(cells):
        return pd.DataFrame([{"training seed": s, "split": p, "val loss": v} for (s, p), v in cells.items()])

    harder_split = {(s, p): (0.44 if p == 2 else 0.30) + 0.01 * s for s in range(3) for p in range(3)}
    words = range_tables.far_cause_words(table(harder_split))
    assert words.startswith("seed 2 (0.46): its split is harder: the other seeds end at 0.44-0.45") and "no run" in words
    under_trained = {(s, p): 0.30 + 0.01 * p + (0.15 if s == 2 else 0) for s in range(3) for p in range(3)}
    words = range_tables.far_cause_words(table(under_trained))
    assert words.startswith("seed 2 (0.47): far from the other seeds on its split too") and "3 of 9 runs far" in words
    assert "seed 2 on split 0, 0.45" in words
    agree = {(s, p): 0.30 + 0.01 * (s + p) for s in range(3) for p in range(3)}
    assert range_tables.far_cause_words(table(agree)).startswith("no seed is far on its own split")
    assert range_tables.far_cause_words(table({(0, 0): 0.3})) == "one seed: nothing to compare"


def test_an_unreadable_data_dir_is_a_one_line_error(tmp_path, monkeypatch):
    """A folder the user may not read (as a non-root user after chmod 000) fails in one line, not a traceback."""
    from pathlib import Path

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "is_file", denied)
    with pytest.raises(ParameterError, match="cannot be read .*Permission denied"):
        data.check_idx_dir(str(tmp_path))


def test_the_crossed_splits_diagnostic_runs_only_when_asked():
    """No claim reads every seed's stage 1 on every other seed's split: off in both profiles, an extension to ask for
    it."""
    for profile in ("smoke", "full"):
        assert MnistConfig.from_params(profile=profile).crossed_splits is False
    assert MnistConfig.from_params(profile="smoke", extensions=["crossed_splits"]).crossed_splits is True
    with pytest.raises(ParameterError, match="unknown extension 'pairs' .* allowed: crossed_splits"):
        MnistConfig.from_params(profile="smoke", extensions=["pairs"])
