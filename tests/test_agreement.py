"""Every verdict a page's prose shows is the ledger's verdict of the claim it names (`book/agreement.py`): on the smoke
reference and on the published book, and a page that breaks the rule in each way it can is caught, by name."""

import json

import pytest

from redlib.book.agreement import disagreements, ledger_verdicts, page_disagreements
from redlib.core.paths import project_root

ROOT = project_root()


def test_the_smoke_reference_pages_show_their_ledgers_verdicts():
    found = page_disagreements(ROOT / "tests" / "nbval", ROOT / "tests" / "nbval" / "results")
    assert not found, "\n".join(found)


def test_the_published_pages_show_their_ledgers_verdicts():
    found = page_disagreements(ROOT / "book", ROOT / "results" / "full")
    assert not found, "\n".join(found)


def notebook(tmp_path, glued: dict[str, str], found: str, before: str = "# Page\n\nIntro.") -> str:
    """An executed page as papermill writes it: its glued values as records, its prose in Markdown cells."""
    outputs = [{"output_type": "display_data", "metadata": {"scrapbook": {"name": k}},
                "data": {"application/papermill.record/text/plain": repr(v)}} for k, v in glued.items()]
    nb = {"cells": [{"cell_type": "markdown", "source": before},
                    {"cell_type": "code", "source": "glue_values(...)", "outputs": outputs},
                    {"cell_type": "markdown", "source": "## What we found\n\n" + found}]}
    path = tmp_path / "page.ipynb"
    path.write_text(json.dumps(nb))
    return path


LEDGER = {"t1.order": "partly", "t1.router.acc": "holds", "mn.red.acc": "does not hold"}


def test_a_page_that_agrees_has_nothing_to_report(tmp_path):
    path = notebook(tmp_path, {"t1_v_t1_order": "partly", "mn_words": "mn.red.acc does not hold",
                               "t1_tally": "verdicts: partly 1, holds 1"},
                    "Order **{glue:text}`t1_v_t1_order`**; {glue:text}`mn_words`; {glue:text}`t1_tally`.")
    assert disagreements(path, LEDGER, page_claims={"t1.order", "t1.router.acc"}) == []


@pytest.mark.parametrize("glued, prose, expected", [
    ({"t1_v_t1_order": "holds"}, "{glue:text}`t1_v_t1_order`",
     "`t1_v_t1_order` shows t1.order 'holds', the ledger 'partly'"),
    ({"w": "`mn.red.acc` holds, t1.order partly"}, "{glue:text}`w`", "`w` shows mn.red.acc 'holds'"),
    ({"t": "verdicts: holds 2"}, "{glue:text}`t`", "`t` tallies 'holds 2', the ledger holds 1, partly 1"),
    ({"plug": "holds"}, "The claim **{glue:text}`plug`**.",
     "`plug` shows the verdict 'holds' without naming its claim"),
    ({}, "The order claim **does not hold** here.", "\"What we found\" types the verdict 'does not hold'"),
])
def test_each_way_a_page_can_disagree_is_caught_by_name(tmp_path, glued, prose, expected):
    found = disagreements(notebook(tmp_path, glued, prose), LEDGER, page_claims={"t1.order", "t1.router.acc"})
    assert len(found) == 1 and expected in found[0] and found[0].startswith("page: ")


def test_a_declared_verdict_is_checked_against_its_claim_and_an_extensions_is_not(tmp_path):
    path = notebook(tmp_path, {"a": "holds", "b": "does not hold"}, "{glue:text}`a` and {glue:text}`b` (extension).")
    assert disagreements(path, LEDGER, declared={"a": "t1.router.acc", "b": None}) == []
    assert "`a` shows t1.order 'holds', the ledger 'partly'" in disagreements(path, LEDGER, declared={"a": "t1.order",
                                                                                                     "b": None})[0]


def test_verdict_rules_outside_the_findings_are_prose_not_verdicts(tmp_path):
    path = notebook(tmp_path, {}, "Nothing typed.", before="A value claim holds when every seed lies within 0.01.")
    assert disagreements(path, LEDGER) == []


def test_the_ledgers_verdicts_are_read_from_each_pages_result_file():
    verdicts, pages = ledger_verdicts(ROOT / "tests" / "nbval" / "results")
    assert pages["t1.order"] == "task1_addition" and pages["mod.plug_in"] == "robustness_and_cost"
    assert set(verdicts.values()) <= {"holds", "partly", "does not hold", "untestable here", "not comparable"}
