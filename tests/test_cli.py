import subprocess
import sys
from pathlib import Path

import pytest
import torch

from redlib.core.runtime import project_root


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "redlib", *args], capture_output=True, text=True, cwd=project_root(),
                          timeout=120)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "toy_experiments", "-p", "sed", "3"], "unknown parameter 'sed'"),
        (["run", "toy_experiments", "-p", "seed", "abc"], "must be int"),
        (["run", "toy_experiments", "-p", "profile", "fulll"], "unknown profile 'fulll'"),
        (["run", "toy_experimentz"], "unknown notebook 'toy_experimentz'"),
        (["book", "--profile", "huge"], "unknown profile 'huge'"),
        (["bench", "--notebooks", "task9"], "unknown notebook 'task9'"),
        (["bench", "--cache", "/tmp"], "--cache and --warm-from need --notebooks"),
        (["bench", "--warm-from", "/tmp"], "--cache and --warm-from need --notebooks"),
        (["bench", "--notebooks", "robustness_and_cost", "--warm-from", "/nonexistent"], "--warm-from /nonexistent is not a folder"),
        (["bench", "--notebooks", "toy_experiments", "--cache", str(Path(__file__).parent)], "is not empty"),
        (["run", "task1_addition", "-p", "number_format", "roman"], "allowed: whole, digits"),
        (["run", "task1_addition", "-p", "data_source", "web"], "allowed: text, released"),
        (["run", "task1_addition", "-p", "profile", "smoke", "-p", "pairs_test_share", "0.95"], "'pairs_test_share' must be"),
        (["run", "task1_addition", "-p", "backbone", "/no/such/Qwen3-0.6B"], "does not exist"),
        (["run", "task1_addition", "-p", "split", "random"], "allowed: iid, pairs"),
        # constraints the configs know, checked before any kernel starts (on the smoke profile: a case that
        # slipped through would cost seconds, not a full run)
        (["run", "task1_addition", "-p", "profile", "smoke", "-p", "router_hidden", "-5"], "'router_hidden' >= 1"),
        (["run", "task1_addition", "-p", "profile", "smoke", "-p", "k_trainable", "99"], "'k_trainable' must be in [0, 6]"),
        (["run", "task1_addition", "-p", "profile", "smoke", "-p", "operand_min", "60", "-p", "operand_max", "50"],
         "operand_min <= operand_max"),
        (["run", "task1_addition", "-p", "profile", "smoke", "-p", "operand_max", "100"], "operand_max <= 50"),
        (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "lr", "nan"], "'lr' must be a finite number > 0"),
        (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "weight_decay", "-1"], "'weight_decay' must be a finite"),
        (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "seed", "99999999999999999999999"],
         "'seed' must be in [0, 1000000000]"),
        pytest.param(["run", "task1_addition", "-p", "profile", "smoke", "-p", "device", "cuda"], "CUDA is not available",
                     marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")),
    ],
)
def test_bad_input_fails_fast_with_one_line(args, needle, tmp_path):
    out = tmp_path / "out.ipynb"
    proc = run_cli(*args, *(["--output", str(out)] if args[0] == "run" else []))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and needle in lines[0]
    assert not out.exists()


def test_params_lists_every_notebook():
    proc = run_cli("params")
    assert proc.returncode == 0
    assert proc.stdout.startswith("toy_experiments: profile='full'")


def test_export_writes_jsonl(tmp_path):
    out = tmp_path / "test.jsonl"
    proc = run_cli("export", "test", "--out", str(out), "-p", "profile", "smoke", "-p", "split", "iid")
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 250 and '"question": "What is' in lines[0]


def test_export_rejects_bad_parameters():
    proc = run_cli("export", "test", "--out", "/tmp/x.jsonl", "-p", "split", "random")
    assert proc.returncode == 2 and "allowed: iid, pairs" in proc.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "toy_experiments", "-p", "profile", "smoke", "--output", "/tmp"], "must be a .ipynb file path"),
        (["run", "toy_experiments", "-p", "profile", "smoke", "--output", "/nonexistent/dir/x.ipynb"], "does not exist"),
        (["export", "test", "--out", "/tmp"], "must be a .jsonl file path"),
        (["export", "test", "--out", "/nonexistent/dir/x.jsonl"], "does not exist"),
        (["run", "toy_experiments", "-p", "profile", "full", "-p", "n_seeds", "1", "-p", "max_epochs", "5"],
         "differ from the full profile's defaults"),
        (["run", "toy_experiments", "-p", "seed", "3"], "pass --output FILE.ipynb to write elsewhere"),
    ],
)
def test_output_paths_and_the_published_book_are_checked_before_any_work(args, needle):
    published = [project_root() / "book" / "toy_experiments.ipynb",
                 project_root() / "results" / "full" / "toy_experiments" / "claims.json"]
    before = [p.read_bytes() if p.exists() else None for p in published]
    proc = run_cli(*args)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert needle in proc.stderr
    assert [p.read_bytes() if p.exists() else None for p in published] == before
    assert not Path("/nonexistent").exists()


def test_results_go_beside_the_output_notebook_and_publish_is_explicit(tmp_path):
    from redlib.book.runner import placement
    from redlib.core.config import ParameterError

    params = placement("toy_experiments", {"profile": "smoke"}, str(tmp_path / "toy.ipynb"), publish=False)
    assert params["results_dir"] == str(tmp_path / "results")
    assert placement("toy_experiments", {"profile": "smoke", "results_dir": "/elsewhere"}, str(tmp_path / "t.ipynb"),
                     publish=False)["results_dir"] == "/elsewhere"
    with pytest.raises(ParameterError, match="--publish"):
        placement("toy_experiments", {"profile": "full", "seed": 3}, None, publish=False)
    assert placement("toy_experiments", {"profile": "full", "seed": 3}, None, publish=True) == {"profile": "full", "seed": 3}
    assert placement("toy_experiments", {"profile": "full"}, None, publish=False) == {"profile": "full"}
