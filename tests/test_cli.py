import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from redlib.core.paths import project_root


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
        (["sources", "task1_addition"], "'task1_addition' reuses no other page's runs; only robustness_and_cost"),
        (["sources", "robustness_and_cost", "-p", "n_seeds", "9"], "'n_seeds' must be at most 3"),
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
        (["run", "toy_experiments", "-p", "results_dir", str(project_root() / "results"), "--output", "/tmp/t.ipynb"],
         "is the published results/"),
        (["run", "toy_experiments", "-p", "results_dir", "results", "--output", "/tmp/t.ipynb"],
         "is the published results/"),
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


def _file(tmp_path: Path) -> str:
    f = tmp_path / "a_file"
    f.write_text("x")
    return str(f)


def _empty_idx(tmp_path: Path) -> str:
    from redlib.tasks.idx import IDX_FILES

    for stem in (s for pair in IDX_FILES.values() for s in pair):
        (tmp_path / stem).write_bytes(b"")
    return str(tmp_path)


def _out(tmp_path: Path) -> str:
    return str(tmp_path / "x.ipynb")


def _nowhere(tmp_path: Path) -> str:
    return str(tmp_path / "nowhere")


def _results_link(tmp_path: Path) -> str:
    """A link to the published results/: resolved, it is results/ itself."""
    link = tmp_path / "results_link"
    link.symlink_to(project_root() / "results")
    return str(link)


def _unreadable_backbone(tmp_path: Path) -> str:
    """A model folder whose files cannot be read: config.json is a folder, the weights a dangling link."""
    folder = tmp_path / "model"
    (folder / "config.json").mkdir(parents=True)
    (folder / "model.safetensors").symlink_to(tmp_path / "gone.safetensors")
    return str(folder)


def _unreadable_tokenizer(tmp_path: Path) -> str:
    folder = tmp_path / "tok"
    (folder / "tokenizer.json").mkdir(parents=True)
    return str(folder)


def _truncated_idx(tmp_path: Path) -> str:
    """The four MNIST IDX files with valid headers, one of them cut short after its header."""
    import numpy as np

    from redlib.tasks.idx import IDX_FILES

    for part, (images, labels) in IDX_FILES.items():
        n = 20
        (tmp_path / images).write_bytes(bytes([0, 0, 8, 3]) + b"".join(d.to_bytes(4, "big") for d in (n, 28, 28))
                                        + np.zeros(n * 28 * 28 // (2 if part == "test" else 1), np.uint8).tobytes())
        (tmp_path / labels).write_bytes(bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + bytes(n))
    return str(tmp_path)


def _non_utf8(tmp_path: Path) -> str:
    return os.fsdecode(os.fsencode(str(tmp_path)) + b"/\xff\xfe.ipynb")


# each case: the arguments (a callable gets tmp_path) and the words of its one-line error; every one exits 2 before
# any kernel starts, writing nothing
NEWCOMER_CASES = [
    # no route writes into the published book (paths resolved through .. and links)
    (["run", "intro", "-p", "profile", "smoke", "--output", "book/intro.ipynb"], "lies in the published book/"),
    (["run", "intro", "-p", "seed", "3"], "unknown parameter 'seed' for notebook intro; allowed: profile, results_dir"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "--output", "book/toy_experiments.ipynb"],
     "lies in the published book/"),
    (["run", "intro", "--output", _out, "-p", "results_dir", "results/../results"], "is the published results/"),
    (["run", "intro", "--output", _out, "-p", "results_dir", _results_link], "is the published results/"),
    (["run", "intro", "--output", _out, "-p", "results_dir", "book"], "lies in the published book/"),
    (["run", "intro", "--output", _out, "-p", "results_dir", "results/full"], "lies in the published results/"),
    (["export", "test", "--out", "book/test.jsonl"], "lies in the published book/"),
    # the machine's answer first, in one line
    (["run", "task1_addition", "-p", "profile", "smoke", "-p", "backbone", _unreadable_backbone], "cannot be read"),
    (["run", "routing_heatmaps", "-p", "profile", "smoke", "-p", "tokenizer", _unreadable_tokenizer], "cannot be read"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "--output", _non_utf8], "is not valid UTF-8"),
    (["bench", "--notebooks", "toy_experiments", "--cache", _file], "is a file"),
    (["run", "mnist_label5", "-p", "profile", "smoke", "-p", "data_dir", _truncated_idx], "is truncated"),
    (["run", "task1_addition", "-p", "k_trainable", "99"], "'k_trainable' must be in [0, 6]"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "lr", "-inf"], "'lr' must be a finite number"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "seed"], "-p needs a NAME and a VALUE"),
    (["run", "toy_experiments", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["run", "intro", "-p", "results_dir", "/tmp/elsewhere"], "is not the published results/"),
    (["run", "task1_addition", "-p", "results_dir", "/tmp/elsewhere"], "is not the published results/"),
    (["run", "intro", "-p", "results_dir", ""], "results_dir is empty"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "results_dir", _file], "is a file, not a folder"),
    # a reading page with no results for its profile (a path from another machine, or no page run yet)
    (["run", "claims_ledger", "-p", "profile", "smoke", "-p", "results_dir", _nowhere, "--output", _out],
     "does not exist; this page reads the 'smoke' results the experiment pages wrote there"),
    (["run", "mnist_label5", "-p", "profile", "smoke", "-p", "data_dir", _empty_idx], "it is empty"),
    (["run", "mnist_label5", "-p", "profile", "smoke", "-p", "data_dir", _file], "it is a file, not a folder"),
    (["run", "task1_addition", "-p", "profile", "smoke", "-p", "backbone", _file], "is a file, not a folder"),
    (["run", "routing_heatmaps", "-p", "profile", "smoke", "-p", "tokenizer", _file], "is a file, not a folder"),
    (["run", "task1_addition", "-p", "profile", "smoke", "-p", "expert_hidden", "1000000000"], "'expert_hidden' must be <="),
    (["run", "routing_heatmaps", "-p", "profile", "smoke", "-p", "max_len", "1000000000"], "'max_len' must be <="),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "n_seeds", "1000000"], "'n_seeds' must be <="),
    (["run", "task1_addition", "-p", "profile", "smoke", "-p", "extension_seeds", "0"], "'extension_seeds' must be >= 1"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "--workers", "1000"], "--workers must be in [1, 16]"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "workers", "1000"], "--workers must be in [1, 16]"),
    (["run", "toy_experiments", "-p", "profile", "smoke", "-p", "workers", "two"], "workers must be a positive integer"),
    (["book", "--profile", "smoke", "--workers", "0"], "--workers must be in [1, 16]"),
]
if not torch.cuda.is_available():
    NEWCOMER_CASES.append((["run", "task1_addition", "-p", "device", "cuda"], "CUDA is not available"))


@pytest.mark.parametrize("args, needle", NEWCOMER_CASES)
def test_a_newcomers_bad_input_is_one_line_exit_2_and_changes_nothing(args, needle, tmp_path):
    args = [a(tmp_path) if callable(a) else a for a in args]
    published = sorted((project_root() / "book").rglob("*")) + sorted((project_root() / "results").rglob("*"))
    before = {p: p.read_bytes() for p in published if p.is_file() and "smoke" not in p.parts}
    proc = run_cli(*args)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert needle in proc.stderr
    after = sorted((project_root() / "book").rglob("*")) + sorted((project_root() / "results").rglob("*"))
    assert {p: p.read_bytes() for p in after if p.is_file() and "smoke" not in p.parts} == before
    assert not (project_root() / "smoke").exists()
    assert not list(tmp_path.glob("*.ipynb")) and not (tmp_path / "results").exists()


def test_a_stage_cache_that_is_a_file_is_refused_before_any_run(tmp_path):
    env = {**os.environ, "REDLIB_CACHE": _file(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "redlib", "run", "toy_experiments", "-p", "profile", "smoke", "--output",
                           str(tmp_path / "t.ipynb")], capture_output=True, text=True, cwd=project_root(), timeout=120,
                          env=env)
    assert proc.returncode == 2 and "REDLIB_CACHE" in proc.stderr and "is a file" in proc.stderr
    assert not (tmp_path / "t.ipynb").exists()


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for k in map(int, kids):
            out |= {k} | _descendants(k)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc")
def test_sigterm_stops_the_kernel_and_its_workers_and_leaves_nothing_behind(tmp_path):
    """`kill`, `timeout` or a cancelled CI job: the run shuts its kernel and worker processes down, removes its
    socket files, says in one line what was kept, and exits 143; no child process survives it."""
    import signal
    import time

    env = {**os.environ, "REDLIB_CACHE": str(tmp_path / "cache"), "REDLIB_WORKERS": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "redlib", "run", "toy_experiments", "-p", "profile", "smoke",
                             "--output", str(tmp_path / "toy.ipynb")], cwd=project_root(), env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    seen: set[int] = set()
    deadline = time.time() + 90
    while time.time() < deadline and len(seen) < 4:  # the kernel, its resource tracker and two workers
        seen |= _descendants(proc.pid)
        time.sleep(0.2)
    assert len(seen) >= 4 and proc.poll() is None, "the run never started its workers"
    time.sleep(1.0)
    ipc_before = set(project_root().glob("kernel-ipc-*"))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("Executing")]
    assert len(lines) == 1 and lines[0].startswith("stopped (SIGTERM)"), err
    time.sleep(1.0)
    assert not [p for p in seen if _alive(p)], "a child of the stopped run is still running"
    assert set(project_root().glob("kernel-ipc-*")) <= ipc_before
    assert not list((tmp_path / "cache").rglob("*.tmp*")) and not (tmp_path / "toy.ipynb").exists()


def _wrong_values() -> list[tuple[str, str, str]]:
    """(page, parameter, a value it must refuse) for every typed parameter of every page: a word for a number or a
    flag, an unknown choice, a folder that does not exist for a path (free-text parameters have no wrong type)."""
    from redlib.book.registry import PAGES, config_for

    cases = []
    for page in PAGES:
        cls = config_for(page.name)
        for name, types_ in cls.field_types().items():
            if name in getattr(cls, "CHOICES", {}) or name == "profile":
                cases.append((page.name, name, "no-such-choice"))
            elif bool in types_:
                cases.append((page.name, name, "maybe"))
            elif int in types_ or float in types_:
                cases.append((page.name, name, "twelve"))
            elif name in ("backbone", "data_dir", "mnist_data_dir", "tokenizer"):
                cases.append((page.name, name, "/no/such/folder"))
            elif name == "device":
                cases.append((page.name, name, "tpu"))
    return cases


@pytest.mark.parametrize("page, name, bad", _wrong_values())
def test_every_parameter_of_every_page_refuses_a_wrong_value_in_one_line(page, name, bad, tmp_path, capsys):
    """The generated newcomer table: each page's each typed parameter, given a wrong value, exits 2 with one line
    that names the parameter (or the value), and writes nothing (the CLI in-process: no kernel ever starts)."""
    import signal

    from redlib.__main__ import main

    out = tmp_path / "out.ipynb"
    handler = signal.getsignal(signal.SIGTERM)
    try:
        code = main(["run", page, "-p", name, bad, "--output", str(out)])
    finally:
        signal.signal(signal.SIGTERM, handler)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and (name in lines[0] or bad in lines[0]), lines[0]
    assert not out.exists() and not any(tmp_path.iterdir())
