import subprocess
import sys

import pytest

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
        (["run", "task1_addition", "-p", "backbone", "/no/such/Qwen3-0.6B"], "does not exist"),
        (["run", "task1_addition", "-p", "split", "random"], "allowed: pairs, iid"),
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
    assert proc.returncode == 2 and "allowed: pairs, iid" in proc.stderr
