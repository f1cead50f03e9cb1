"""The benchmark runs end to end in its smoke mode (it reports numbers; nothing here judges them)."""

import json
import re

from redlib.bench import levers
from redlib.bench import report as bench_report
from redlib.bench.run import SMOKE_TEST_COMMANDS, append_history, run_bench, update_pages
from redlib.core.paths import project_root


def test_bench_smoke_mode_writes_a_complete_report(tmp_path):
    report = run_bench(tmp_path, smoke=True, notebooks=["reproduce"])
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["smoke"] is True and set(report) <= set(saved) and saved["errors"] == {}
    pc = saved["prefix_cache"]
    assert {r["batch"] for r in pc["embedded"]} == {pc["pipeline_batch"], pc["paper_batch"]}
    assert all(r["blocks"] == 6 and r["bound"] == (6 + 4) / 6 for r in pc["embedded"])
    assert pc["qwen_shaped"][0]["cached_epoch"]["median"] > 0
    assert saved["features_cache"]["speedup"] > 0
    assert set(saved["throughput"]["methods"]) == {"global head", "softmax MoE", "RED"}
    assert saved["notebooks"]["smoke"]["passes"] == 1
    nb = saved["notebooks"]["smoke"]["per_notebook"]["reproduce"]
    assert nb["wall"]["reps"] == 1 and nb["wall"]["median"] == nb["wall_seconds"]
    assert nb["wall_seconds"] > 0 and nb["peak_rss_mb"] > 0 and nb["stage_seconds"] == {}
    assert "run_red" in saved["profile"]["cprofile"]
    st = saved["stage_threads"]
    assert [r["threads"] for r in st["per_thread_count"]] == [2, 1] and st["workers"] == 2
    assert all(r["median"] > 0 for r in st["per_thread_count"]) and st["speedup_1_over_2"] > 0
    pad = saved["text_padding"]
    assert pad["cut"]["validation tokens per row"] <= pad["padded"]["validation tokens per row"] == pad["padded to"]
    assert pad["train_speedup"] > 0 and pad["validate_speedup"] > 0
    s1 = saved["stage1_processes"]
    assert [(r["processes"], r["threads each"]) for r in s1["per_layout"]] == [(1, 2), (2, 1), (2, 2)]
    assert all(r["median"] > 0 for r in s1["per_layout"]) and s1["speedup_side_by_side"] > 0
    assert s1["speedup_side_by_side_page_threads"] > 0
    prof = saved["stage1_profile"]
    assert set(prof["phases_ms"]) == {"forward", "backward", "optimiser step"} and min(prof["phases_ms"].values()) > 0
    groups = levers.profile_table(prof).set_index("group")
    assert groups.loc["large matrix products", "forward"] > 0 and groups.loc["large matrix products", "backward"] > 0
    assert groups.loc["optimiser (AdamW's element-wise updates)", "optimiser step"] > 0
    opt = saved["optimizer"]
    assert set(opt["kinds"]) == {"fused", "foreach"} and opt["stage1_speedup"] > 0 and opt["small_speedup"] > 0
    assert 0 <= opt["relative_difference_after_10_steps"] < 1e-5  # both compute the fp32 update, rounded apart
    assert not (tmp_path / "history.jsonl").exists()  # smoke runs stay out of the history of runs
    append_history(report, tmp_path)
    append_history(report, tmp_path)
    runs = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert len(runs) == 2 and runs[0][f"speed-up embedded batch {pc['pipeline_batch']}"] > 0
    assert runs[0]["peak memory GiB"] > 0 and "full book min" not in runs[0]


def test_bench_times_exactly_the_makefile_test_recipes():
    makefile = (project_root() / "Makefile").read_text()
    recipes = []
    for target in ("unit", "notebooks", "browser"):
        block = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
        recipes += [line.strip().replace("$(PY)", "{python}") for line in block.splitlines()]
    assert re.search(r"^test:.*\bunit notebooks browser$", makefile, re.M)
    assert recipes == SMOKE_TEST_COMMANDS


def test_retiming_one_page_updates_only_its_entry_and_fills_the_given_cache(tmp_path):
    run_bench(tmp_path, smoke=True, notebooks=["reproduce"])
    before = json.loads((tmp_path / "bench.json").read_text())
    cache = tmp_path / "cold-cache"
    update_pages(tmp_path, "smoke", ["toy_experiments"], cache)
    after = json.loads((tmp_path / "bench.json").read_text())
    block = after["notebooks"]["smoke"]
    assert block["per_notebook"]["reproduce"] == before["notebooks"]["smoke"]["per_notebook"]["reproduce"]
    toy = block["per_notebook"]["toy_experiments"]
    assert toy["wall_seconds"] > 0 and toy["stage_seconds"] and toy["git_commit"] and toy["measured_at"]
    assert block["total_from_parts"] and block["total_seconds"] >= toy["wall_seconds"]
    assert after["page_updates"][-1]["notebooks"] == ["toy_experiments"] and after["prefix_cache"] == before["prefix_cache"]
    assert after["page_updates"][-1]["completed"] == ["toy_experiments"] and toy["cache_at_start"] == "empty stage cache"
    assert isinstance(toy["other_cpu_seconds"], float) and toy["other_cpu_seconds"] >= 0  # what else ran meanwhile
    assert any(cache.rglob("*.safetensors"))  # the timed run's stages stay in the folder given
    table = bench_report.notebooks(after).set_index(["profile", "notebook"])
    assert table.loc[("smoke", "toy_experiments"), bench_report.CURRENT] == "yes"


def test_the_publishing_pass_times_the_published_runs_and_resumes_as_one_pass(tmp_path, monkeypatch):
    """`--publish` is the book's one cold pass: each page's timed run is the one results/ now holds, the pass is
    recorded (commit, machine, segments, pages done, the build) in the cache folder and in bench.json, and the same
    call again resumes it (a second segment, nothing run twice). A one-page book and a stand-in build keep it short."""
    from redlib.bench import cold_pass
    from redlib.bench import run as bench_run

    run_bench(tmp_path, smoke=True, notebooks=["reproduce"])
    monkeypatch.setattr(bench_run, "NOTEBOOKS", ["toy_experiments"])
    monkeypatch.setattr(bench_run, "build_seconds", lambda profile: 1.5)
    cache = tmp_path / "cold-cache"
    update_pages(tmp_path, "smoke", [], cache, publish=True)
    after = json.loads((tmp_path / "bench.json").read_text())
    toy = after["notebooks"]["smoke"]["per_notebook"]["toy_experiments"]
    published = json.loads((project_root() / "results" / "smoke" / "toy_experiments" / "claims.json").read_text())
    assert toy["claims_sha256"] == published["sha256"]["claims"]  # the timed run is the one results/ now holds
    one = after["cold_pass"]["smoke"]
    assert one["done"] == ["toy_experiments"] and one["build_seconds"] == 1.5 and len(one["segments"]) == 1
    assert one["pages"]["toy_experiments"] == toy["wall_seconds"] and one["cpu"] and one["matmul"]
    assert json.loads((cache / cold_pass.RECORD).read_text())["done"] == ["toy_experiments"]
    update_pages(tmp_path, "smoke", [], cache, publish=True)  # resumed: nothing left but the record's new segment
    again = json.loads((tmp_path / "bench.json").read_text())["cold_pass"]["smoke"]
    assert len(again["segments"]) == 2 and again["pages"] == one["pages"]


def test_publishing_bench_needs_an_empty_cache_folder(capsys):
    from redlib.__main__ import main

    assert main(["bench", "--publish", "--notebooks", "toy_experiments"]) == 2
    assert "--publish" in capsys.readouterr().err


def test_a_timing_folder_starts_with_the_results_of_the_pages_it_does_not_run(tmp_path, monkeypatch):
    from redlib.bench.run import seed_results

    checkout = tmp_path / "repo"
    for page in ("task1_addition", "toy_experiments"):
        (checkout / "results" / "smoke" / page).mkdir(parents=True)
        (checkout / "results" / "smoke" / page / "claims.json").write_text(page)
    monkeypatch.setenv("REDLIB_ROOT", str(checkout))
    out = tmp_path / "pass0" / "results"
    seed_results("smoke", out, ["toy_experiments", "claims_ledger"])
    assert (out / "smoke" / "task1_addition" / "claims.json").read_text() == "task1_addition"  # read by the ledger
    assert not (out / "smoke" / "toy_experiments").exists()  # this run writes it itself
    empty = tmp_path / "fresh" / "results"
    seed_results("full", empty, ["reproduce"])  # no full results in the checkout: the profile's folder, empty
    assert (empty / "full").is_dir() and not any((empty / "full").iterdir())
