from redlib.book import runner


def test_smoke_stage_copies_pages_and_drops_stale_ones(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "book").mkdir(parents=True)
    for name in runner.BOOK_FILES:
        (root / name).write_text(f"# {name}\n")
    (root / "book" / "page.md").write_text("# page\n")
    (root / "_static").mkdir()
    (root / "_static" / "custom.css").write_text("table {}\n")
    monkeypatch.setenv("REDLIB_ROOT", str(root))
    stage = runner.stage_book("smoke")
    assert stage == root / "_build" / "smoke" and (stage / "book" / "page.md").exists()
    assert (stage / "_static" / "custom.css").read_text() == "table {}\n"  # the book's CSS goes with it
    (stage / "book" / "gone.md").write_text("# a page removed from book/\n")
    (stage / "book" / "kept.ipynb").write_text("{}")  # executed notebooks are the runner's, not copies
    runner.stage_book("smoke")
    assert not (stage / "book" / "gone.md").exists() and (stage / "book" / "kept.ipynb").exists()
    assert (stage / "_config.yml").read_text() == "# _config.yml\n"


def fake_repo(tmp_path, monkeypatch, body: str):
    """A repository whose `reproduce` notebook is the parameters cell plus `body`; REDLIB_ROOT points at it."""
    from redlib.core.paths import project_root

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "results" / "smoke").mkdir(parents=True)  # the reading page's results, as the experiment pages leave them
    header = (project_root() / "notebooks" / "reproduce.py").read_text().split("# %%")[0]  # jupytext + kernelspec
    (root / "notebooks" / "reproduce.py").write_text(
        header + '# %% tags=["parameters"]\nprofile = "full"\nseed = 0\ndevice = "cpu"\nresults_dir = "results"\n\n'
        "# %%\n" + body)
    monkeypatch.setenv("REDLIB_ROOT", str(root))
    return root


def test_a_failed_run_is_kept_where_no_book_or_nbval_glob_finds_it(tmp_path, monkeypatch):
    """A notebook that raises: its executed copy goes to _build/failed/, the message names it, the book is untouched."""
    import pytest

    root = fake_repo(tmp_path, monkeypatch, 'raise ValueError("deliberate failure")\n')
    with pytest.raises(RuntimeError, match="deliberate failure") as err:
        runner.execute("reproduce", {"profile": "smoke"}, progress=False)
    failed = root / "_build" / "failed" / "smoke" / "reproduce.ipynb"
    assert failed.exists() and str(failed) in str(err.value)
    assert not list((root / "_build" / "smoke").rglob("*.ipynb")) and not (root / "book").exists()


def test_without_a_repository_url_the_book_has_no_launch_buttons_or_repository_link():
    import yaml

    from redlib.core.paths import project_root

    config = yaml.safe_load((project_root() / "_config.yml").read_text())
    unset = {**config, "repository": {**config["repository"], "url": ""}}
    built, warning = runner.effective_config(unset)
    assert "repository" not in built and "launch_buttons" not in built
    assert built["html"]["use_repository_button"] is False and "repository.url is unset" in warning
    assert built["exclude_patterns"] == config["exclude_patterns"]  # everything else as configured
    owned = {**config, "repository": {**config["repository"], "url": "https://github.com/o/n"}}
    assert runner.effective_config(owned) == (owned, None)
    assert "red-companion/red-companion" not in (project_root() / "_config.yml").read_text()  # no placeholder


def test_a_run_prints_no_kernel_noise_and_its_pages_carry_no_warnings(tmp_path, monkeypatch, capfd):
    import nbformat

    fake_repo(tmp_path, monkeypatch, 'import redlib.book.pages\nimport tqdm.auto\nprint("ok")\n')
    out = runner.execute("reproduce", {"profile": "smoke"}, progress=False)
    outputs = [o for c in nbformat.read(out, 4).cells if c.cell_type == "code" for o in c.outputs]
    assert [o.get("name") for o in outputs] == ["stdout"] and outputs[0]["text"] == "ok\n"
    assert "without encryption" not in capfd.readouterr().err


def test_a_corrupt_cache_entry_is_reported_on_the_terminal_and_in_the_provenance_box(tmp_path, monkeypatch, capfd):
    import nbformat

    fake_repo(tmp_path, monkeypatch,
              "import torch\nfrom IPython.display import Markdown, display\nfrom redlib.book import pages\n"
              "from redlib.core.store import Store\nstore = Store()\n"
              'cfg, results = pages.start("reproduce", globals(), store)\n'
              'store.module("toy/x", {"seed": 0}, torch.nn.Linear(8, 8), lambda m: {})\n'
              "results.finish()\ndisplay(Markdown(results.provenance_markdown()))\n")
    monkeypatch.setenv("REDLIB_CACHE", str(tmp_path / "cache"))
    runner.execute("reproduce", {"profile": "smoke"}, progress=False)
    assert "0 stages loaded from the cache, 1 computed" in capfd.readouterr().err
    entry = next((tmp_path / "cache").rglob("*.safetensors"))
    raw = bytearray(entry.read_bytes())
    raw[-32:] = b"\xff" * 32  # the header is intact: the file still loads, with NaN weights
    entry.write_bytes(bytes(raw))
    out = runner.execute("reproduce", {"profile": "smoke"}, progress=False)
    err = capfd.readouterr().err
    assert "rebuilt toy/x" in err and "do not match their checksum" in err
    box = [o for c in nbformat.read(out, 4).cells for o in c.get("outputs", []) if "Provenance" in str(o)]
    assert box and "**Rebuilt:** toy/x" in str(box[0])
