"""The smoke run's trained numbers against the reference's, within `numbers.TOLERANCE` (run by `make notebooks`,
after the smoke book has written results/smoke/): nbval compares the text with decimals masked, this the numbers."""

import pytest

from redlib.book.numbers import TOLERANCE, compare_page
from redlib.book.registry import NOTEBOOKS
from redlib.core.paths import project_root

REFERENCE = project_root() / "tests" / "nbval" / "results"
RUN = project_root() / "results" / "smoke"


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_the_smoke_runs_numbers_agree_with_the_reference(name):
    diffs = compare_page(REFERENCE / name, RUN / name)
    assert not diffs, (f"{name}: {len(diffs)} number(s) beyond the tolerance of {TOLERANCE} (or labels that differ) "
                       "against tests/nbval/results/; after a change meant to move numbers run `make nbval-reference`:\n"
                       + "\n".join(diffs[:20]))
