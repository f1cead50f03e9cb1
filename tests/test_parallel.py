"""Worker processes: pieces start only after the pieces they depend on, and results keep the pieces' order."""

import time
from pathlib import Path

import pytest

from redlib.speed.parallel import map_pieces
from redlib.core.store import Store


def mark(folder: str, piece: tuple[str, float], store: Store) -> str:
    """Sleep, then leave a marker file; report which markers existed when this piece started."""
    name, seconds = piece
    seen = sorted(p.name for p in Path(folder).iterdir())
    time.sleep(seconds)
    (Path(folder) / name).touch()
    return f"{name} saw {seen}"


def test_a_piece_starts_after_its_inputs_and_results_keep_the_order(tmp_path):
    folder = tmp_path / "marks"
    folder.mkdir()
    slow, quick, joint, other = ("slow", 1.0), ("quick", 0.1), ("joint", 0.0), ("other", 0.0)
    out = map_pieces(mark, str(folder), [slow, quick, joint, other], Store(tmp_path / "cache"), workers=2,
                     after={joint: [slow, quick]})
    assert [o.split()[0] for o in out] == ["slow", "quick", "joint", "other"]
    assert out[2] == "joint saw ['other', 'quick', 'slow']" or out[2] == "joint saw ['quick', 'slow']"
    assert out[3] in ("other saw ['quick']", "other saw []")  # it did not wait for the slow piece


def test_pieces_that_wait_on_each_other_are_an_error(tmp_path):
    a, b = ("a", 0.0), ("b", 0.0)
    with pytest.raises(ValueError, match="wait on each other"):
        map_pieces(mark, str(tmp_path), [a, b], Store(tmp_path / "cache"), workers=2, after={a: [b], b: [a]})


def hold_memory(_cfg, megabytes: int, store: Store) -> int:
    """Hold `megabytes` of touched memory for a moment (a worker's share of a page's work)."""
    import numpy as np

    block = np.ones(megabytes * 2**20 // 8)
    time.sleep(1.5)
    return int(block[0])


def test_a_runs_recorded_peak_memory_counts_its_workers(tmp_path):
    """Two workers each holding 300 MB: the run's recorded peak with workers exceeds its own process's peak by more
    than one worker's share (the kernel's ru_maxrss alone would miss them), and their CPU seconds are counted."""
    from redlib.book.results import Results
    from redlib.configs.toy_experiments import ToyConfig

    res = Results(ToyConfig.from_params(profile="smoke", results_dir=str(tmp_path / "results")))
    out = map_pieces(hold_memory, None, [300, 300], Store(tmp_path / "cache"), workers=2)
    assert out == [1, 1]
    prov = res.provenance()
    assert prov["peak_rss_mb_with_workers"] > prov["peak_rss_mb"] + 300
    assert prov["cpu_seconds"] > 0
    res.finish()
