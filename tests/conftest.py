import os

import pytest

os.environ.setdefault("REDLIB_PROGRESS", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    """A throwaway results root; returns the path to pass as results_dir."""
    return tmp_path / "results"
