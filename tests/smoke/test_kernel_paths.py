"""Both fp32 kernel paths pass the tolerance check: `make notebooks` ran the smoke book on this CPU's default path;
here the smoke MNIST and robustness pages are trained again, from an empty stage cache, on the other path (oneDNN
where the default is MKL, MKL where it is oneDNN), and both runs agree with the reference within the tolerance."""

import json
import os
import subprocess
import sys

import pytest

from redlib.book.numbers import compare_page
from redlib.speed import kernels
from redlib.core.paths import project_root

REFERENCE = project_root() / "tests" / "nbval" / "results"
DEFAULT_RUN = project_root() / "results" / "smoke"
PAGES = ("mnist_label5", "robustness_and_cost")  # the pages whose numbers moved between CPUs (issue 47)
OTHER = "fast" if kernels.configure()["path"] == "stock" else "stock"  # REDLIB_MATMUL for the path not taken


@pytest.fixture(scope="module")
def other_run(tmp_path_factory):
    """The pages trained from an empty cache on the other kernel path; their results folder."""
    out = tmp_path_factory.mktemp("other_path")
    env = {**os.environ, "REDLIB_MATMUL": OTHER, "REDLIB_CACHE": str(out / "cache"), "REDLIB_PROGRESS": "0"}
    for page in PAGES:
        proc = subprocess.run([sys.executable, "-m", "redlib", "run", page, "-p", "profile", "smoke", "--output",
                               str(out / f"{page}.ipynb")], env=env, cwd=project_root(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "results" / "smoke"


def _matmul(run, page):
    return json.loads((run / page / "claims.json").read_text())["provenance"]["matmul"]


@pytest.mark.parametrize("page", PAGES)
def test_the_default_kernels_run_agrees_with_the_reference(page):
    assert _matmul(DEFAULT_RUN, page)["path"] == kernels.configure()["path"]
    assert compare_page(REFERENCE / page, DEFAULT_RUN / page) == []


@pytest.mark.parametrize("page", PAGES)
def test_the_other_kernels_run_agrees_with_the_reference(page, other_run):
    took = _matmul(other_run, page)
    if took["path"] == kernels.configure()["path"]:
        pytest.skip(f"this CPU has one fp32 kernel path only: {took['why']}")
    assert compare_page(REFERENCE / page, other_run / page) == []
