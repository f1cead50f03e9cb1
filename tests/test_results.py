import json

import pandas as pd
import pytest

from redlib.book.results import Results, read
from redlib.core import measure
from redlib.configs.toy_experiments import ToyConfig
from redlib.core.settings import ended_at_cap


def make(results_root, **kw):
    return Results(ToyConfig.from_params(profile="smoke", results_dir=str(results_root), **kw))


def test_writer_writes_tables_claims_and_provenance(results_root):
    res = make(results_root, seed=2, n_seeds=3)
    res.table("acc", pd.DataFrame({"model": ["a", "b"], "accuracy": [0.5, 1.0]}))
    res.record({"toy.linear.param_average": measure.value([0.5, 1.0, 0.75])})
    out = res.finish()
    assert out == results_root / "smoke" / "toy_experiments"
    back = read("toy_experiments", "smoke", results_root)
    assert back.table("acc").equals(pd.DataFrame({"model": ["a", "b"], "accuracy": [0.5, 1.0]}))
    assert back.claims["toy.linear.param_average"] == {"value": 0.75, "per_seed": [0.5, 1.0, 0.75]}
    prov = back.provenance
    for key in ("profile", "seeds", "parameters", "git_commit", "libraries", "started_at", "wall_seconds", "machine"):
        assert key in prov
    assert prov["profile"] == "smoke" and prov["seeds"] == [2, 3, 4]
    assert prov["parameters"]["n_seeds"] == 3 and prov["libraries"]["torch"]
    assert "Provenance" in res.provenance_markdown() and "smoke" in res.provenance_markdown()


def test_unknown_claim_id_is_an_error(results_root):
    with pytest.raises(KeyError, match="toy.not.a.claim"):
        make(results_root).record({"toy.not.a.claim": measure.value([1.0])})


def test_unfinished_run_keeps_previous_results(results_root):
    first = make(results_root)
    first.record({"toy.residual.base_only": measure.value([1.0])})
    out = first.finish()
    second = make(results_root)
    second.record({"toy.residual.base_only": measure.value([0.0])})
    second.table("new", pd.DataFrame({"x": [1]}))
    # the second run never reaches finish(): nothing of the first is lost or mixed
    assert read("toy_experiments", "smoke", results_root).claims["toy.residual.base_only"]["value"] == 1.0
    assert sorted(p.name for p in out.iterdir()) == ["claims.json"]
    second.finish()
    assert read("toy_experiments", "smoke", results_root).claims["toy.residual.base_only"]["value"] == 0.0
    assert sorted(p.name for p in results_root.joinpath("smoke").iterdir()) == ["toy_experiments"]


def test_profiles_write_to_separate_folders(results_root):
    smoke = make(results_root).finish()
    assert smoke.parent.name == "smoke" and not (results_root / "full").exists()


def test_non_finite_values_become_null(results_root):
    res = make(results_root)
    res.record({"toy.linear.weights": {"value": float("nan"), "per_seed": [float("inf"), 0.1]}})
    doc = json.loads((res.finish() / "claims.json").read_text())
    assert doc["claims"]["toy.linear.weights"] == {"value": None, "per_seed": [None, 0.1]}


def test_commit_is_dirty_for_changed_code_but_not_for_changed_outputs(tmp_path, monkeypatch):
    import subprocess

    from redlib.book.results import git_commit

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    for name in ("code.py", "book/page.ipynb", "results/full/x.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("0")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "first")
    monkeypatch.setenv("REDLIB_ROOT", str(tmp_path))
    assert not git_commit().endswith("+dirty")
    (tmp_path / "book/page.ipynb").write_text("1")
    (tmp_path / "results/full/x.csv").write_text("1")
    assert not git_commit().endswith("+dirty")
    (tmp_path / "code.py").write_text("1")
    assert git_commit().endswith("+dirty")


def test_a_commit_that_never_landed_is_named_as_such(tmp_path, monkeypatch):
    import subprocess

    from redlib.book.results import in_history

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "a.py").write_text("0")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a", "--allow-empty"],
                   cwd=tmp_path, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("REDLIB_ROOT", str(tmp_path))
    assert in_history(head) == "yes"
    assert in_history(head + "+dirty") == "yes (+dirty)"
    assert in_history("1" * 40) == "no: not in this repository's history"
    assert in_history(None) == in_history("unknown") == "unknown"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--amend", "-m", "a, amended", "--allow-empty"], cwd=tmp_path, check=True)
    assert in_history(head) == "no: not in this repository's history"  # still an object here, but not in HEAD's past


def test_every_commit_the_published_results_name_is_in_history():
    """A page published at a commit that was then amended or rebased names a commit no clone has: never publish so."""
    from redlib.book.results import in_history, named_commits

    from redlib.book.registry import PAGES

    named = named_commits("full")
    assert named, "no published results"
    assert set(named) <= {p.name for p in PAGES if p.trains}  # reading pages are rebuilt with the book, not published
    missing = {page: c for page, c in named.items() if in_history(c) not in ("yes", "unknown")}
    assert not missing, f"published results name commits outside HEAD's history: {missing}"


def test_non_default_parameters_are_in_provenance_the_box_and_the_ledger(results_root):
    from redlib.book import ledger

    res = Results(ToyConfig.from_params(profile="full", seed=3, results_dir=str(results_root)))
    res.record({"toy.linear.param_average": measure.value([1.0])})
    res.finish()
    assert read("toy_experiments", "full", results_root).provenance["non_default"] == {"seed": 3}
    assert "**Non-default parameters:** seed=3" in res.provenance_markdown()
    row = ledger.table(ledger.collect(results_root, "full")).set_index("id").loc["toy.linear.param_average"]
    assert "non-default: seed=3" in row["measured on"]
    assert make(results_root).cfg.non_default() == {}  # smoke defaults: nothing to say


def test_a_result_file_changed_by_hand_is_caught_naming_the_file(results_root):
    """Each run records the SHA-256 of its tables and claims; readers (ledger, reading pages, --no-execute) check them."""
    from redlib.core.paths import ResultFileError
    from redlib.book.runner import verify_results

    res = make(results_root)
    res.table("overall", pd.DataFrame({"method": ["RED", "MoE"], "accuracy": [1.0, 0.9]}))
    res.record({"toy.residual.base_only": measure.value([1.0])})
    out = res.finish()
    verify_results("smoke", str(results_root))  # as written: fine
    csv = out / "overall.csv"
    csv.write_text(csv.read_text().replace("1.0", "0.25"))  # a plausible wrong value
    with pytest.raises(ResultFileError, match="overall.csv was changed after the toy_experiments run"):
        read("toy_experiments", "smoke", results_root).table("overall")
    with pytest.raises(ResultFileError, match="overall.csv"):
        verify_results("smoke", str(results_root))
    res.finish()  # a new run writes the files and their digests again
    doc = json.loads((out / "claims.json").read_text())
    doc["claims"]["toy.residual.base_only"]["value"] = 0.5  # a claim edited by hand
    (out / "claims.json").write_text(json.dumps(doc))
    with pytest.raises(ResultFileError, match="claims.json was changed"):
        read("toy_experiments", "smoke", results_root).claims
    (out / "claims.json").write_text("{not json")
    with pytest.raises(ResultFileError, match="claims.json is not valid JSON"):
        read("toy_experiments", "smoke", results_root).claims


@pytest.mark.parametrize("strip", ["all", "claims", "table"])
def test_result_files_without_their_checksums_are_refused(results_root, strip):
    """Deleting a digest (or all of them) does not switch the check off: an edited table is refused all the same."""
    from redlib.core.paths import ResultFileError

    res = make(results_root)
    res.table("overall", pd.DataFrame({"method": ["RED", "MoE"], "accuracy": [1.0, 0.9]}))
    res.record({"toy.residual.base_only": measure.value([1.0])})
    out = res.finish()
    doc = json.loads((out / "claims.json").read_text())
    if strip == "all":
        del doc["sha256"]
    else:
        del doc["sha256"]["claims" if strip == "claims" else "overall.csv"]
    (out / "claims.json").write_text(json.dumps(doc))
    csv = out / "overall.csv"
    csv.write_text(csv.read_text().replace("1.0", "0.25"))
    what = "overall.csv" if strip == "table" else "its claims"
    with pytest.raises(ResultFileError, match=f"claims.json has no SHA-256 for {what}"):
        read("toy_experiments", "smoke", results_root).table("overall")


def test_the_published_results_carry_digests_that_match():
    """Every committed page of the full book records its tables' digests, and they match the files."""
    from redlib.book.registry import PAGES
    from redlib.book.runner import verify_results

    verify_results("full")
    assert all("sha256" in read(p.name, "full").doc for p in PAGES if read(p.name, "full").exists)


@pytest.mark.parametrize("page,rate", [("task1_addition", 1e-4), ("task2_mixed", 1e-4), ("step_decomposition", 1e-4),
                                       ("mnist_label5", 1e-3)])
def test_every_published_stage_trained_at_the_protocols_rate_and_stopped_by_patience(page, rate):
    """On the published results: every stage of the page at its rate with patience 10, and stopped by patience, not
    by its cap (a cap never decides)."""
    res = read(page, "full")
    if not res.exists:
        pytest.skip(f"{page} is not published")
    params = res.provenance.get("parameters", {})
    assert params.get("double_cap") and params.get("expert_hidden") == 0, f"{page}: published without the protocol"
    epochs = res.table("epochs")
    assert len(epochs) and (epochs["lr"] == rate).all() and (epochs["patience"] == 10).all()
    capped = epochs[ended_at_cap(epochs)]
    assert capped.empty, f"{page}: stages that ended at their cap:\n{capped[['stage', 'epochs run', 'max epochs']]}"


def test_the_stages_robustness_trains_itself_follow_their_source_pages_protocol():
    """Robustness's own stages (replacement experts, the late expert's routers, residuals of other ranks): each at
    its source page's rate (Task 1 and Task 2 1e-4, MNIST 1e-3), patience 10, stopped by patience."""
    res = read("robustness_and_cost", "full")
    if not res.exists or not (res.dir / "epochs.csv").exists():
        pytest.skip("robustness_and_cost was published before it recorded its own stages' epochs")
    epochs = res.table("epochs")
    rate = epochs["task"].map({"Task 1": 1e-4, "Task 2": 1e-4, "MNIST": 1e-3})
    assert len(epochs) and (epochs["lr"] == rate).all() and (epochs["patience"] == 10).all()
    capped = epochs[ended_at_cap(epochs)]
    assert capped.empty, f"stages that ended at their cap:\n{capped[['task', 'study', 'stage', 'epochs run']]}"


def _published(page: str) -> dict | None:
    from redlib.core.paths import project_root

    path = project_root() / "results" / "full" / page / "claims.json"
    return json.loads(path.read_text()) if path.exists() else None


def test_every_published_page_names_one_commit_one_cpu_and_one_kernel_path():
    from redlib.book.registry import PAGES

    where = {}
    for page in (p.name for p in PAGES if p.trains):
        prov = (_published(page) or {}).get("provenance", {})
        where[page] = (prov.get("git_commit"), prov.get("machine", {}).get("cpu_model"),
                       prov.get("matmul", {}).get("path"))
    assert len(set(where.values())) == 1, f"the published pages come from more than one pass: {where}"


def test_robustness_clean_accuracies_are_its_source_pages_per_seed_numbers():
    """Robustness loads the runs Task 1, Task 2 and MNIST trained: with no perturbation, each method's accuracy on
    each seed is exactly the source page's (one pass, one set of stages)."""
    from redlib.core.paths import project_root

    full = project_root() / "results" / "full"
    sweep = pd.read_csv(full / "robustness_and_cost" / "sweep.csv")
    clean = sweep[sweep["perturbation"] == "none"].set_index(["task", "seed", "method"])["accuracy"]
    iid = lambda page: pd.read_csv(full / page / "overall.csv").query("run == 'iid'")  # noqa: E731
    src = {"Task 1": iid("task1_addition"), "Task 2": iid("task2_mixed"),
           "MNIST": pd.read_csv(full / "mnist_label5" / "overall.csv")}
    src = {task: df.set_index(["seed", "method"])["accuracy"] for task, df in src.items()}
    assert set(clean.index.get_level_values("task")) == set(src)
    differ = [(task, s, m, a, src[task][(s, m)]) for (task, s, m), a in clean.items() if src[task][(s, m)] != a]
    assert not differ, f"{len(differ)} clean accuracies differ from their source page's: {differ[:5]}"
