"""The smoke book's pages, as this run executed them, show the ledger's verdict wherever their prose names one
(`book/agreement.py`; run by `make notebooks` after the smoke book is built)."""

from redlib.book.agreement import page_disagreements
from redlib.core.paths import project_root


def test_the_smoke_books_pages_show_their_ledgers_verdicts():
    found = page_disagreements(project_root() / "_build" / "smoke" / "book", project_root() / "results" / "smoke")
    assert not found, "\n".join(found)
