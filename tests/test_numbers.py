"""The tolerance check of trained numbers (redlib/book/numbers.py) on the committed smoke reference: a copy agrees,
a number moved within the tolerance agrees, a number moved by 0.05 fails naming it, and so do changed labels."""

import json
import shutil

import pandas as pd
import pytest

from redlib.book.numbers import TOLERANCE, compare_page
from redlib.core.paths import project_root

REFERENCE = project_root() / "tests" / "nbval" / "results"


@pytest.fixture
def copy(tmp_path):
    dest = tmp_path / "mnist_label5"
    shutil.copytree(REFERENCE / "mnist_label5", dest)
    return dest


def _move_table(folder, shift):
    df = pd.read_csv(folder / "overall.csv")
    df.loc[0, "accuracy"] += shift
    df.to_csv(folder / "overall.csv", index=False)


def _move_claim(folder, shift):
    doc = json.loads((folder / "claims.json").read_text())
    doc["claims"]["mn.red.acc"]["value"] += shift
    (folder / "claims.json").write_text(json.dumps(doc))


def test_every_page_has_a_reference_with_claims():
    from redlib.book.registry import NOTEBOOKS

    assert all((REFERENCE / name / "claims.json").exists() for name in NOTEBOOKS)


def test_a_copy_agrees(copy):
    assert compare_page(REFERENCE / "mnist_label5", copy) == []


@pytest.mark.parametrize("move", [_move_table, _move_claim])
def test_a_number_moved_within_the_tolerance_agrees(copy, move):
    move(copy, TOLERANCE * 0.9)
    assert compare_page(REFERENCE / "mnist_label5", copy) == []


@pytest.mark.parametrize("move, where", [(_move_table, "overall.csv"), (_move_claim, "mn.red.acc.value")])
def test_a_number_moved_by_five_hundredths_fails_naming_it(copy, move, where):
    move(copy, 0.05)
    diffs = compare_page(REFERENCE / "mnist_label5", copy)
    assert len(diffs) == 1 and diffs[0].startswith(where), diffs


def test_changed_labels_and_missing_tables_fail(copy):
    df = pd.read_csv(copy / "overall.csv")
    df.loc[0, "method"] = "another method"
    df.to_csv(copy / "overall.csv", index=False)
    (copy / "per_domain.csv").unlink()
    diffs = compare_page(REFERENCE / "mnist_label5", copy)
    assert any("overall.csv: rows" in d for d in diffs) and any("per_domain.csv is missing" in d for d in diffs)


def test_a_metric_on_a_few_boundary_inputs_gets_the_subset_tolerance_and_no_more():
    """Task 1's boundary sums are ~19 test questions in smoke: one flipped answer (0.053) agrees, two (0.105) fail."""
    from redlib.book.numbers import SUBSET_TOLERANCE, compare_table

    ref = pd.DataFrame({"method": ["RED"], "accuracy": [0.5], "boundary_accuracy": [4 / 19], "seed": [0]})
    one = ref.assign(boundary_accuracy=5 / 19)
    assert compare_table(ref, one, "boundary.csv") == []
    two = ref.assign(boundary_accuracy=6 / 19)
    assert compare_table(ref, two, "boundary.csv")[0].endswith(f"(more than {SUBSET_TOLERANCE} apart)")
    assert compare_table(ref, ref.assign(accuracy=0.5 + 0.05), "boundary.csv")  # the whole test set: 0.03


def test_a_ratio_beyond_one_is_compared_with_the_tolerance_as_a_share_of_its_size():
    """A ratio near 2.8 may move by 3% of itself (about 0.084), not by 0.05 more than that; shares stay absolute."""
    from redlib.book.numbers import compare_claims

    ref = {"ra.ratio": {"value": {"ratio": 2.8}}, "ra.share": {"value": 0.5}}

    def moved(ratio: float, share: float) -> dict:
        return {"ra.ratio": {"value": {"ratio": ratio}}, "ra.share": {"value": share}}

    assert compare_claims(ref, moved(2.8 * (1 - 0.9 * TOLERANCE), 0.5)) == []
    diffs = compare_claims(ref, moved(2.8 * (1 - 0.9 * TOLERANCE) - 0.05, 0.5 + 0.9 * TOLERANCE + 0.01))
    assert len(diffs) == 2 and diffs[0].startswith("ra.ratio.value.ratio") and diffs[1].startswith("ra.share"), diffs
