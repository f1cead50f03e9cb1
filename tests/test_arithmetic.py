import json

import pytest

from redlib.tasks.arithmetic import N_CLASSES, Task1Spec, format_numbers, label_of, range_of
from redlib.tasks.arithmetic_data import make_task1, to_jsonl


def test_ranges_and_labels():
    assert range_of([2, 20, 21, 40, 41, 60, 61, 80, 81, 100]).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert label_of([2, 100]).tolist() == [0, N_CLASSES - 1] and N_CLASSES == 99


def test_pairs_split_keeps_pairs_apart():
    data = make_task1(Task1Spec(n_train=5000, n_val=600, n_test=600, split="pairs", seed=1))
    pairs = {k: set(zip(df["a"], df["b"])) for k, df in data.items()}
    assert not pairs["train"] & pairs["test"] and not pairs["train"] & pairs["val"] and not pairs["val"] & pairs["test"]
    assert len(pairs["test"]) <= 500 and len(pairs["train"]) <= 1750  # 20% / 70% of the 2,500 pairs
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
    with pytest.raises(ValueError, match="unknown number_format 'roman'; allowed: whole, digits"):
        Task1Spec(number_format="roman")
    with pytest.raises(ValueError, match="unknown data_source 'web'; allowed: text, released"):
        Task1Spec(data_source="web")
    with pytest.raises(ValueError, match="test_share"):
        Task1Spec(test_share=0.9)


def test_digit_format_spaces_every_number_and_keeps_the_answers():
    assert format_numbers("What is 18 plus 7 minus 30?", "digits") == "What is 1 8 plus 7 minus 3 0?"
    spec = dict(n_train=300, n_val=10, n_test=10, split="iid", seed=3)
    whole, digits = make_task1(Task1Spec(**spec)), make_task1(Task1Spec(**spec, number_format="digits"))
    assert (whole["train"]["sum"] == digits["train"]["sum"]).all()
    assert (whole["train"]["text"].map(lambda t: format_numbers(t, "digits")) == digits["train"]["text"]).all()


def test_released_source_balances_answers_and_starts_operands_at_zero():
    df = make_task1(Task1Spec(n_train=20_000, n_val=10, n_test=10, split="iid", data_source="released", seed=0))["train"]
    counts = df["sum"].value_counts()
    assert df["sum"].between(2, 99).all() and len(counts) == 98
    assert counts.max() < 2 * counts.min()  # about 204 per answer; the text source has 1 to 50 pairs per sum
    assert df["a"].min() == 0 and df["a"].max() > 90 and (df["a"] + df["b"] == df["sum"]).all()
    pairs = make_task1(Task1Spec(n_train=2000, n_val=200, n_test=200, split="pairs", data_source="released", seed=0))
    seen = {k: set(zip(d["a"], d["b"])) for k, d in pairs.items()}
    assert not seen["train"] & seen["test"]


def test_jsonl_export(tmp_path):
    df = make_task1(Task1Spec(n_train=100, n_val=10, n_test=10, n_templates=5, seed=0))["test"]
    lines = to_jsonl(df, tmp_path / "t.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert len(lines) == 10 and first["answer"] == first["a"] + first["b"] and first["range"].startswith("R")
