import json

import pytest

from redlib.tasks.arithmetic import N_CLASSES, Task1Spec, label_of, make_task1, range_of, to_jsonl


def test_ranges_and_labels():
    assert range_of([2, 20, 21, 40, 41, 60, 61, 80, 81, 100]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert label_of([2, 100]).tolist() == [0, N_CLASSES - 1] and N_CLASSES == 99


def test_pairs_split_keeps_pairs_apart():
    data = make_task1(Task1Spec(n_train=5000, n_val=600, n_test=600, split="pairs", seed=1))
    pairs = {k: set(zip(df["a"], df["b"])) for k, df in data.items()}
    assert not pairs["train"] & pairs["test"] and not pairs["train"] & pairs["val"] and not pairs["val"] & pairs["test"]
    assert len(pairs["test"]) <= 250 and len(pairs["train"]) <= 2000
    df = data["train"]
    assert (df["sum"] == df["a"] + df["b"]).all() and (df["label"] == df["sum"] - 2).all()
    assert df["a"].between(1, 50).all() and df["text"].iloc[0].startswith("What is ")


def test_iid_split_repeats_questions_and_is_reproducible():
    spec = Task1Spec(n_train=5000, n_val=600, n_test=600, split="iid", seed=2)
    a, b = make_task1(spec), make_task1(spec)
    assert all(a[k].equals(b[k]) for k in a)
    assert a["test"]["text"].isin(set(a["train"]["text"])).mean() > 0.5


def test_bad_spec_is_rejected():
    with pytest.raises(ValueError, match="unknown split 'random'; allowed: pairs, iid"):
        Task1Spec(split="random")
    with pytest.raises(ValueError, match="n_templates"):
        Task1Spec(n_templates=9)


def test_jsonl_export(tmp_path):
    df = make_task1(Task1Spec(n_train=100, n_val=10, n_test=10, n_templates=5, seed=0))["test"]
    lines = to_jsonl(df, tmp_path / "t.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(lines) == 10 and first["answer"] == first["a"] + first["b"] and first["range"].startswith("R")
