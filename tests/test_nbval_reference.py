"""nbval's committed reference (tests/nbval/): one smoke-executed notebook per page, current, with compared cells."""

import json

import jupytext
import pytest

from redlib.book.registry import NOTEBOOKS
from redlib.core.paths import project_root

REFERENCE = project_root() / "tests" / "nbval"
MARK = "# NBVAL_CHECK_OUTPUT"


def code_cells(nb: dict) -> list[str]:
    """Sources of the code cells, without papermill's injected parameters."""
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]
            if c["cell_type"] == "code" and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_every_page_has_a_smoke_reference_with_compared_outputs(name):
    nb = json.loads((REFERENCE / f"{name}.ipynb").read_text())
    assert nb["metadata"]["papermill"]["parameters"].get("profile") == "smoke"
    marked = [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).startswith(MARK)]
    assert marked and all(c["outputs"] for c in marked), f"{name}: no compared cell with an output"
    assert not any(o.get("output_type") == "stream" for c in marked for o in c["outputs"]), \
        f"{name}: a compared cell writes to stdout/stderr (progress, warnings), which differ between runs"


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_the_reference_runs_with_the_smoke_profile_alone(name):
    """nbval re-executes the reference with its injected parameters as they are: a path from the machine that made
    it (a results_dir in /tmp) would send the page to results that a fresh clone does not have."""
    nb = json.loads((REFERENCE / f"{name}.ipynb").read_text())
    assert nb["metadata"]["papermill"]["parameters"] == {"profile": "smoke"}, \
        f"tests/nbval/{name}.ipynb was executed with other parameters: run `make nbval-reference`"


@pytest.mark.parametrize("name", list(NOTEBOOKS))
def test_the_reference_runs_the_notebooks_code_of_today(name):
    ours = code_cells(json.loads(jupytext.writes(jupytext.read(project_root() / "notebooks" / f"{name}.py"), "ipynb")))
    ref = code_cells(json.loads((REFERENCE / f"{name}.ipynb").read_text()))
    assert ref == ours, f"tests/nbval/{name}.ipynb is older than notebooks/{name}.py: run `make nbval-reference`"


def test_no_module_but_the_bench_and_the_cost_pages_reader_reads_the_bench_file():
    """One way: pages write results, readers read them; only `redlib/bench` (a developer tool) reads results/bench/,
    and `book/costs.py` the peak memory the cost claim reads (masked in nbval's comparison), so no other claim and no
    compared output moves when the bench is re-run."""
    readers = [p.relative_to(project_root()).as_posix() for p in (project_root() / "redlib").rglob("*.py")
               if any(w in p.read_text() for w in ('"bench" / "bench.json"', '"results" / "bench"', "report.load("))]
    assert readers and all(r.startswith("redlib/bench/") or r == "redlib/book/costs.py" for r in readers), readers
    assert not (REFERENCE / "bench.sha256").exists()
