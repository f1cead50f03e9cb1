"""The page registry is the one place a page is declared: everything else derives from it."""

import jupytext

from redlib.book import registry
from redlib.core.claims import load_claims
from redlib.core.paths import project_root


def test_toc_is_the_registry():
    assert (project_root() / "_toc.yml").read_text() == registry.render_toc()


def test_every_page_has_a_notebook_with_its_title_and_anchor():
    for p in registry.PAGES:
        nb = jupytext.read(project_root() / "notebooks" / f"{p.name}.py")
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert f"# {p.title}" in text, p.name
        if p.anchor:
            assert f"({p.anchor})=" in text, p.name


def test_experiments_run_before_the_pages_that_read_them():
    order = list(registry.NOTEBOOKS)
    trains = [registry.page(n).trains for n in order]
    assert trains == sorted(trains, reverse=True) and set(order) == {p.name for p in registry.PAGES}


def test_every_claim_group_has_a_page():
    groups = {c["group"] for c in load_claims().values()}
    covered = {g for p in registry.PAGES for g in p.claim_groups}
    assert groups <= covered


def test_the_common_parameters_say_what_each_notebook_takes():
    """A parameter that means or allows other things on some notebooks gets a row of its own for them: Task 2's
    split values are not Task 1's, and the toy page's device is described as its own."""
    from redlib.book import parameters

    common = parameters.common_table(parameters.parameter_table())
    split = common[common["parameter"] == "split"].set_index("notebooks")["allowed"]
    assert split["task1_addition"] == "iid, pairs" and split["task2_mixed, step_decomposition"] == "iid, isolated"
    for _, row in common.iterrows():
        for nb in row["notebooks"].split(", ") if row["notebooks"] != "all" else []:
            assert registry.config_for(nb).describe(row["parameter"]) == row["what it does"]


def test_every_answer_box_takes_its_numbers_from_the_pages_glued_values():
    """An answer box types no measured number: every number in it is a glued value of its page (names such as
    "Task 1", "stage 1", "2x2" and the paper's "60k digits" are words, not measurements)."""
    import re

    words = r"Task [12]|stage [14]|2x2|'0 or 7'|60k"
    for path in sorted((project_root() / "notebooks").glob("*.py")):
        text = path.read_text()
        for box in re.findall(r"# :::\{admonition\} The answer\n(.*?)\n# :::\n", text, re.S):
            bare = re.sub(r"\{glue:text\}`[^`]*`|`[^`]*`|" + words, "", box)
            assert not re.search(r"\d", bare.replace("# :class: tip", "")), (path.name, bare)


def test_no_reading_page_is_tracked_in_git():
    """Reading pages are executed from the results and the bench when the book is built; only the experiment pages'
    executed notebooks and results are the data of record."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "book", "results/full"], cwd=project_root(), capture_output=True,
                             text=True, check=True).stdout.split()
    reading = {p.name for p in registry.PAGES if not p.trains}
    assert not [f for f in tracked if any(f"/{name}." in f or f"/{name}/" in f for name in reading)]
    assert any("book/task1_addition.ipynb" == f for f in tracked)
