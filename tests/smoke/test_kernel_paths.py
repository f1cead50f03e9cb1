"""Both fp32 kernel paths pass the tolerance check: the smoke MNIST and robustness pages, trained again here on the
stock kernels (REDLIB_MATMUL=stock, an empty stage cache), agree with the reference as the default path's run does."""

import json
import os
import subprocess
import sys

import pytest

from redlib.book.numbers import compare_page
from redlib.core import kernels
from redlib.core.runtime import project_root

REFERENCE = project_root() / "tests" / "nbval" / "results"
DEFAULT_RUN = project_root() / "results" / "smoke"
PAGES = ("mnist_label5", "robustness_and_cost")  # the pages whose numbers moved between CPUs (issue 47)


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory):
    """The pages trained from an empty cache on the stock kernels; their results folder."""
    out = tmp_path_factory.mktemp("stock")
    env = {**os.environ, "REDLIB_MATMUL": "stock", "REDLIB_CACHE": str(out / "cache"), "REDLIB_PROGRESS": "0"}
    for page in PAGES:
        proc = subprocess.run([sys.executable, "-m", "redlib", "run", page, "-p", "profile", "smoke", "--output",
                               str(out / f"{page}.ipynb")], env=env, cwd=project_root(), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "results" / "smoke"


def _path(run, page):
    return json.loads((run / page / "claims.json").read_text())["provenance"]["matmul"]["path"]


@pytest.mark.parametrize("page", PAGES)
def test_the_default_kernels_run_agrees_with_the_reference(page):
    assert _path(DEFAULT_RUN, page) == kernels.configure()["path"]
    assert compare_page(REFERENCE / page, DEFAULT_RUN / page) == []


@pytest.mark.parametrize("page", PAGES)
def test_the_stock_kernels_run_agrees_with_the_reference(page, stock_run):
    assert _path(stock_run, page) == "stock"
    assert compare_page(REFERENCE / page, stock_run / page) == []
