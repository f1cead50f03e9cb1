from redlib.book import runner


def test_smoke_stage_copies_pages_and_drops_stale_ones(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    for name in runner.BOOK_FILES:
        (root / name).write_text(f"# {name}\n")
    (root / "book" / "page.md").write_text("# page\n")
    monkeypatch.setenv("REDLIB_ROOT", str(root))
    stage = runner.stage_book("smoke")
    assert stage == root / "_build" / "smoke" and (stage / "book" / "page.md").exists()
    (stage / "book" / "gone.md").write_text("# a page removed from book/\n")
    (stage / "book" / "kept.ipynb").write_text("{}")  # executed notebooks are the runner's, not copies
    runner.stage_book("smoke")
    assert not (stage / "book" / "gone.md").exists() and (stage / "book" / "kept.ipynb").exists()
    assert (stage / "_config.yml").read_text() == "# _config.yml\n"
