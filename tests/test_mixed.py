import pytest

from redlib.tasks.mixed import Task2Spec, evaluate, parse_mix, phrase, program_text, step_text
from redlib.tasks.mixed_data import make_task2, step_pairs


def test_every_record_is_consistent_with_its_program():
    data = make_task2(Task2Spec(step_mix="1:0.2,2:0.3,3:0.3,4:0.2", n_train=2000, n_val=200, n_test=200, seed=4))
    for df in data.values():
        for r in df.itertuples():
            values = evaluate(r.operands, r.ops)
            assert r.answer == values[-1] and r.steps == len(r.ops) == len(r.operands) - 1
            assert all(2 <= v <= 100 for v in values) and all(2 <= o <= 50 for o in r.operands)
            assert r.label == r.answer - 2 and sorted(r.slots) == list(range(r.steps + 1))
            assert r.program.count("Step") == r.steps and r.program.endswith(f"= x{r.steps}")
    assert set(data["train"]["phrasing"]) == {"what", "bare", "compute", "if"}


def test_the_if_phrasing_names_step_ones_operands_in_the_other_order():
    text, slots = phrase([12, 5, 9], "-+", "if")
    assert text == "If you subtract 5 from 12 and add 9, what do you get?" and slots == [1, 0, 2]
    assert program_text([12, 5, 9], "-+") == "Step 1: 12 - 5 = x1\nStep 2: x1 + 9 = x2"
    assert phrase([45, 17], "-", "what") == ("What is 45 minus 17?", [0, 1])
    assert phrase([12, 5, 9], "-+", "compute")[0] == "Compute 12 minus 5, then add 9."


def test_step_mix_is_followed_and_checked():
    df = make_task2(Task2Spec(step_mix="2:0.5,4:0.5", n_train=4000, n_val=10, n_test=10, seed=0))["train"]
    assert set(df["steps"]) == {2, 4} and abs((df["steps"] == 2).mean() - 0.5) < 0.05
    assert parse_mix("1:0.5,2:0.5") == {1: 0.5, 2: 0.5}
    for bad in ("1:0.5", "5:1", "two:1", ""):
        with pytest.raises(ValueError, match="step mix"):
            parse_mix(bad)
    with pytest.raises(ValueError, match="unknown split 'pairs'; allowed: iid, isolated"):
        Task2Spec(split="pairs")


def test_isolated_split_keeps_symbolic_forms_apart_and_iid_is_reproducible():
    spec = dict(n_train=3000, n_val=300, n_test=300, seed=2)
    iso = make_task2(Task2Spec(**spec, split="isolated"))
    forms = {k: set(df["form"]) for k, df in iso.items()}
    assert not forms["train"] & forms["test"] and not forms["train"] & forms["val"] and not forms["val"] & forms["test"]
    assert abs(len(iso["test"]) - 300) < 30
    a, b = make_task2(Task2Spec(**spec)), make_task2(Task2Spec(**spec))
    assert all(a[k].equals(b[k]) for k in a)
    assert a["test"]["form"].isin(set(a["train"]["form"])).any()  # iid: single-step forms recur


def test_digit_format_and_step_data():
    df = make_task2(Task2Spec(n_train=50, n_val=5, n_test=5, number_format="digits", seed=1))["train"]
    assert not any(len(tok) > 1 and tok.isdigit() for t in df["text"] for tok in t.replace("?", " ").split())
    steps = step_pairs()
    assert steps["result"].between(2, 100).all() and steps["right"].between(2, 50).all()
    assert set(steps["op"]) == {"+", "-"} and steps.groupby("op")["left"].max().to_dict() == {"+": 98, "-": 100}
    assert step_text(47, "-", 12) == "47 - 12" and step_text(47, "-", 12, "digits") == "4 7 - 1 2"
