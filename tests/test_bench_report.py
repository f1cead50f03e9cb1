"""The bench page's logic, against the committed bench.json (what the page shows is computed here)."""

import re

import pandas as pd
import pytest

from redlib.bench import levers, report
from redlib.bench import page as speed
from redlib.configs.red import upgraded
from redlib.core.paths import project_root

BENCH = project_root() / "results" / "bench"


@pytest.fixture(scope="module")
def bench():
    data = report.load(BENCH / "bench.json")
    if data is None:
        pytest.skip("no committed bench.json")
    return data


def test_speed_up_ranges_contain_the_median(bench):
    cache = levers.prefix_cache(bench)
    assert len(cache) == len(bench["prefix_cache"]["embedded"]) + len(bench["prefix_cache"]["qwen_shaped"])
    assert (cache["speedup_min"] <= cache["speedup"]).all() and (cache["speedup"] <= cache["speedup_max"]).all()


def test_targets_are_judged_only_at_the_pipeline_batch_and_misses_say_by_how_much(bench):
    tt = report.targets(bench)
    pipeline = bench["prefix_cache"]["pipeline_batch"]
    for row in tt.itertuples():
        if "batch" in row.target:
            judged = row.target.endswith(f"batch {pipeline}")
            assert row.met in (("yes", "no") if judged else ("reference: yes", "reference: no")), row.target
        met = row.met.endswith("yes")
        assert (row.gap == "") == met and (met or "missed by" in row.gap)
    assert {"peak memory of any page, full profile (kernel and workers at once)",
            "whole smoke test command (make test)"} <= set(tt["target"])


def test_a_missed_memory_target_names_the_notebook_and_what_its_kernel_holds_alone():
    bench = {"targets": {"peak_rss_gib": 4.0}, "notebooks": {"full": {"book_build_seconds": None, "per_notebook": {
        name: {"wall_seconds": 60.0, "wall": {"reps": 1}, "peak_rss_mb": kernel, "peak_rss_mb_with_workers": tree}
        for name, kernel, tree in (("a", 1024.0, 2048.0), ("b", 4608.0, 7168.0))}}}}
    row = report.targets(bench).set_index("target").loc[
        "peak memory of any page, full profile (kernel and workers at once)"]
    assert row["met"] == "no" and row["measured"] == "7.00 GiB"
    assert row[report.WHERE] == "b (full profile): 7.00 GiB, of which its kernel alone peaks at 4.50 GiB (the rest: " \
                                "its workers, at once)"


def test_peak_memory_has_one_value_the_speed_target_and_the_cost_claim_both_read():
    """A page's peak is its kernel and workers at once in its last cold run; a page timed before workers were
    sampled is left out (not read as its kernel alone), and eff.peak_memory states the Speed target's value."""
    from redlib.book import ledger
    from redlib.experiments.robustness_and_cost_report import cost_claims
    from redlib.red.cost import TIME_COLUMNS

    per = {"a": {"wall_seconds": 60.0, "wall": {"reps": 1}, "peak_rss_mb": 900.0, "peak_rss_mb_with_workers": 2048.0},
           "b": {"wall_seconds": 60.0, "wall": {"reps": 1}, "peak_rss_mb": 3072.0}}  # kernel only: left out
    bench = {"targets": {"peak_rss_gib": 4.0}, "notebooks": {"full": {"book_build_seconds": None, "per_notebook": per}}}
    peaks = report.cold_peaks("full", bench)
    assert dict(peaks) == {"a": 2.0} and report.cold_peaks("smoke", bench).empty
    speed = report.targets(bench).set_index("target").loc["peak memory of any page, full profile (kernel and workers at once)", "measured"]
    c = pd.DataFrame([{"backbone": b, "RED share of backbone": 0.01, "router share of compute": 1e-4,
                       "MoE / RED expert parameters": 20.0} for b in ("embedded", "Qwen3-0.6B shape")])
    claim = cost_claims(c, pd.DataFrame(columns=TIME_COLUMNS), peaks, "embedded")["eff.peak_memory"]
    assert speed == f"{claim['value']:.2f} GiB" and claim["page"] == "a" and "upper_bound" not in claim
    assert ledger._spread(claim).startswith("one measurement")  # not "one seed": no seed moves it
    assert "eff.peak_memory" not in cost_claims(c, pd.DataFrame(columns=TIME_COLUMNS), pd.Series(dtype=float), "embedded")


def test_target_judging():
    assert report.target("x", 1.598, 1.6, True, "x")["met"] == "no"
    assert report.target("x", 1.598, 1.6, True, "x")["measured"] == "1.598 x"  # a near miss shows enough digits
    assert report.target("t", 40, 60, False, "min")["gap"] == ""
    assert report.target("t", 40, 30, False, "min", judged=False)["met"] == "reference: no"


def test_stage_kinds_come_from_the_pipelines_list(bench):
    slowest, wall, by_kind = report.stage_kinds(bench)
    assert slowest in bench["notebooks"]["full"]["per_notebook"] and wall > 0
    assert len(by_kind) and (by_kind["what"] != "").all()
    assert {k.rpartition("/")[2] for k in by_kind["stage kind"]} <= set(report.STAGE_WHAT)
    # the small stages train in `workers` processes beside the page: their seconds overlap, never beyond that
    timed = bench["notebooks"]["full"]["per_notebook"][slowest]
    workers = (timed.get("run_options") or timed.get("parameters") or {}).get("workers", 1)
    assert by_kind["seconds"].sum() <= wall * workers


def test_every_timed_stage_kind_is_described(bench):
    """Whichever page is the slowest, the Speed page can say what each of its stage kinds holds."""
    known = set(report.STAGE_WHAT)
    for profile in bench["notebooks"].values():
        for name, entry in profile["per_notebook"].items():
            assert {k.rpartition("/")[2] for k in entry.get("stage_seconds") or {}} <= known, name


def test_found_values_and_profile_table(bench, tmp_path):
    """The Speed page's conclusions get a value for every key, with or without a bench file."""
    sp = speed.speed_page(BENCH / "bench.json")
    values, tt = speed.found(sp), sp.targets
    judged = tt["met"].isin(["yes", "no"])
    assert (values["sp_met"], values["sp_judged"]) == ((tt["met"] == "yes").sum(), judged.sum())
    missed = values["sp_missed"].data
    assert missed == "no target" or missed.count("missed by") == (tt["met"] == "no").sum()
    assert speed.found(speed.speed_page(tmp_path / "bench.json")).keys() == values.keys()
    prof = speed.cprofile_table(bench["profile"]["cprofile"])
    assert len(prof) and (prof["cumulative s"] >= prof["own s"]).all()


def test_every_lever_of_the_committed_bench_has_a_table_and_a_missing_one_says_how_to_measure_it(bench, tmp_path):
    shown = levers.levers(bench)
    assert list(shown) == list(levers.BUILDERS)
    for lv in shown.values():
        assert lv.measured and len(lv.data) and lv.caption, lv.name
        assert (lv.glue is None) or lv.phrase not in ("", "not measured"), lv.name
    missing = levers.levers({k: v for k, v in bench.items() if k != "stacked"})["stacked"]
    assert not missing.measured and "not measured yet" in missing.caption and levers.KERNELS_COMMAND in missing.caption
    empty = speed.speed_page(tmp_path / "bench.json")
    assert not empty.measured and speed.qwen_depths(empty) is None and speed.cprofile(empty) is None
    assert all(not lv.measured for lv in empty.levers.values()) and "make bench" in speed.machine_line(empty)


def test_the_speed_page_is_prose_and_calls():
    """The Speed notebook keeps prose and calls (issue 64): at most 200 lines, no lookup into the bench's entries."""
    text = (project_root() / "notebooks" / "speed_and_memory.py").read_text()
    assert len(text.splitlines()) <= 200
    assert not re.search(r"bench\[|bench\.get|page\.bench|json\.load", text)


def test_a_timing_says_whether_it_ran_todays_profile():
    now = report.config_for("toy_experiments").from_params(profile="full").asdict()
    assert report.current_profile("toy_experiments", "full", now) == "yes"
    assert report.current_profile("toy_experiments", "full", {**now, "hidden": -1}) == "no: hidden"
    assert report.current_profile("toy_experiments", "full", {**now, "results_dir": "elsewhere"}) == "yes"
    assert report.current_profile("toy_experiments", "full", None) == "not recorded"
    assert report.current_profile("no_such_page", "full", now) == "page no longer exists"
    mn = report.config_for("mnist_label5").from_params(profile="full").asdict()  # a list added since, and empty
    assert report.current_profile("mnist_label5", "full", {k: v for k, v in mn.items() if k != "extensions"}) == "yes"
    # before `extensions`, the same runs were five switches and two strings
    t1 = report.config_for("task1_addition").from_params(profile="full").asdict()
    old = {**{k: v for k, v in t1.items() if k != "extensions"}, "splits_reported": "iid,pairs",
           "digits_variant_on": "pairs"}
    assert upgraded(old)["extensions"] == ["pairs", "digits:pairs"]  # the same runs, read as today's list
    # a run before the paper-budget extension did not run it: not today's profile, which names it
    assert report.current_profile("task1_addition", "full", old) == "no: extensions"
    assert report.current_profile("mnist_label5", "full", {**mn, "extensions": None, "crossed_splits": True}) == \
        "no: extensions"
    sd = report.config_for("step_decomposition").from_params(profile="full").asdict()  # the grid's knobs, removed since
    assert report.current_profile("step_decomposition", "full", {**sd, "head_lr_grid": "none", "lr_rung": 0,
                                                                 "stage1_paper_beside": False}) == "yes"
    assert report.current_profile("step_decomposition", "full", {**sd, "head_lr_grid": "0.0001,0.001"}) == (
        "no: head_lr_grid")
    t2 = report.config_for("task2_mixed").from_params(profile="full").asdict()  # a switch added since, and on
    assert report.current_profile("task2_mixed", "full", {k: v for k, v in t2.items()
                                                           if k != "double_cap"}) == "no: double_cap"


def test_every_experiment_page_has_one_budget_and_the_bench_judges_it(bench):
    from redlib.book.registry import BUDGETS, PAGES

    budgeted = [p for b in BUDGETS for p in b.pages]
    assert sorted(budgeted) == sorted(p.name for p in PAGES if p.trains)
    rows = {r["target"]: r for r in report.page_budgets(bench)}
    per_nb = bench["notebooks"]["full"]["per_notebook"]
    for b in BUDGETS:
        hit = [t for t in rows if t.startswith(f"cold full profile of {' + '.join(b.pages)}")]
        assert len(hit) == all(p in per_nb for p in b.pages)
        if hit:
            minutes = sum(per_nb[p]["wall_seconds"] for p in b.pages) / 60
            assert rows[hit[0]]["met"] == ("yes" if minutes <= b.minutes else "no")


def _mnist_budget() -> int:
    return next(b.minutes for b in report.BUDGETS if b.pages == ("mnist_label5",))


def test_a_budget_timed_before_todays_profile_says_so():
    now = report.config_for("mnist_label5").from_params(profile="full").asdict()
    budget = _mnist_budget()
    timing = {"wall_seconds": 120.0 * budget, "parameters": {**now, "n_seeds": 1}}  # twice the budget
    bench = {"notebooks": {"full": {"per_notebook": {"mnist_label5": timing}}}}
    (row,) = report.page_budgets(bench)
    assert row["target"] == "cold full profile of mnist_label5 (timed before today's profile of mnist_label5)"
    assert row["met"] == "no" and row["gap"].startswith(f"missed by {budget} min")


def test_a_stale_budget_names_what_the_published_run_implies():
    now = report.config_for("mnist_label5").from_params(profile="full").asdict()
    timing = {"wall_seconds": 120.0 * _mnist_budget(), "parameters": {**now, "n_seeds": 1}}  # an older profile
    bench = {"notebooks": {"full": {"per_notebook": {"mnist_label5": timing}}}}
    est = pd.DataFrame([{"page": "mnist_label5", "stage 1 min": 4.0, "low: all busy, min": 2.0,
                         "high: stage 1 apart, min": 5.5, "commit": "abc1234"}])
    (row,) = report.page_budgets(bench, est)
    assert row[report.WHERE].endswith("; mnist_label5 as published (abc1234): 2-6 min, stage 1 4")
    (current,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": {
        **timing, "parameters": now}}}}}, est)  # a timing of today's profile needs no estimate beside it
    assert "as published" not in current[report.WHERE]
    (none,) = report.page_budgets(bench, est[est["page"] != "mnist_label5"])
    assert "as published" not in none[report.WHERE]
    (low,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": {
        **timing, "parameters": now, "resumed": "its own pass, stopped"}}}}}, est)  # a resumed timing reads low
    assert low["target"].endswith("(at least: mnist_label5 resumed a stopped pass of its own)")
    assert low[report.WHERE].endswith("; mnist_label5 as published (abc1234): 2-6 min, stage 1 4")


def test_a_missed_budget_says_where_its_time_goes():
    now = report.config_for("mnist_label5").from_params(profile="full").asdict()
    wall = 120.0 * _mnist_budget()  # twice the budget; stage 1 half of it, so not more than the budget alone
    timing = {"wall_seconds": wall, "parameters": now,
              "stage_seconds": {"mn/stage1": 0.5 * wall, "mn/router": 0.1 * wall, "mn/expert": 0.2 * wall}}
    (row,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": timing}}}})
    runs = now["n_seeds"]
    assert row["met"] == "no" and row[report.WHERE] == (
        f"mnist_label5: {runs} runs of {wall / 60 / runs:.1f} min, largest stages mn/stage1 50%, mn/expert 20%")
    (met,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": {**timing, "wall_seconds": 60.0}}}}})
    assert met["met"] == "yes" and met[report.WHERE] == ""
    (beside,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": {
        **timing, "other_cpu_seconds": 0.5 * wall}}}}})  # timed while other processes took CPU: said, not hidden
    assert beside[report.WHERE].endswith(f"; mnist_label5: other processes took {0.5 * wall:.0f} CPU-s while it ran "
                                         "(its times read high)")


def test_a_budget_that_stage_1_alone_exceeds_says_so_with_its_size():
    now = report.config_for("mnist_label5").from_params(profile="full").asdict()
    budget = next(b.minutes for b in report.BUDGETS if b.pages == ("mnist_label5",))
    timing = {"wall_seconds": 120.0 * budget, "parameters": now,
              "stage_seconds": {"mn/stage1": 90.0 * budget, "mn/expert": 20.0 * budget}}
    (row,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": timing}}}})
    assert row["met"] == "no" and f"stage 1 alone (no worker shortens it) takes {1.5 * budget:.1f} min, over the " \
        "budget" in row[report.WHERE]
    shorter = {**timing, "stage_seconds": {"mn/stage1": 30.0 * budget, "mn/expert": 20.0 * budget}}
    (row,) = report.page_budgets({"notebooks": {"full": {"per_notebook": {"mnist_label5": shorter}}}})
    assert row["met"] == "no" and "stage 1 alone" not in row[report.WHERE]


def test_a_timing_says_whether_it_computed_what_the_published_page_shows():
    import json

    doc = json.loads((project_root() / "results" / "full" / "task2_mixed" / "claims.json").read_text())
    assert report.same_code("task2_mixed", {"claims_sha256": doc["sha256"]["claims"]}) == "yes (same claims)"
    assert report.same_code("task2_mixed", {"claims_sha256": "0" * 64}) == "no (other claims)"
    assert report.same_code("task2_mixed", {}) == "cannot tell"  # neither claims nor a commit recorded
    published = doc["provenance"]["git_commit"]
    assert report.same_code("task2_mixed", {"git_commit": published}) == "yes (same commit)"


def test_the_whole_book_row_is_the_cold_pass_or_none(bench, tmp_path):
    """The book's target is judged on its one cold pass (named by commit, CPU and segments); pages timed apart make
    no whole-book row."""
    import copy

    from redlib.book import registry

    def rows(b):
        return [t for t in report.targets(b)["target"] if t.startswith("whole full-profile book")]

    b = copy.deepcopy(bench)
    b.pop("cold_pass", None)
    assert rows(b) == []
    run, _ = _pass(tmp_path, list(registry.NOTEBOOKS))
    b["cold_pass"] = {"full": run}
    assert rows(b) == ["whole full-profile book (one cold pass at abc1234 on Test CPU, 1 segment)"]


def test_a_missed_book_budget_says_which_pages_and_how_much_stage_1_take():
    pages = {"a": {"wall_seconds": 3600.0, "stage_seconds": {"t1/stage1": 1800.0, "t1/expert": 900.0}},
             "b": {"wall_seconds": 600.0, "stage_seconds": {"mn/stage1": 120.0}}, "c": {"wall_seconds": 60.0}}
    assert report.book_cause(pages, shown=2) == (
        "largest pages a 60 min, b 10 min; stage 1 takes 32 min of it")
    over = report.BOOK_MINUTES + 10
    heavy = {**pages, "a": {**pages["a"], "stage_seconds": {"t1/stage1": 60.0 * over}}, "b": {"wall_seconds": 600.0}}
    assert report.book_cause(heavy).endswith(
        f"takes {over} min of it, more than the budget by itself")


def test_a_timing_says_when_other_processes_shared_the_machine():
    quiet = {"wall_seconds": 1000.0, "other_cpu_seconds": 12.0}
    assert report.disturbed(quiet) == "" and report.disturbed({"wall_seconds": 1000.0}) == ""
    assert report.disturbed({**quiet, "other_cpu_seconds": 300.0}) == "other processes took 300 CPU-s while it ran"
    assert report.disturbed({**quiet, "disturbed": "a job ran beside it"}) == "a job ran beside it"


def _pass(tmp_path, pages, seconds_per_page=60.0):
    """A cold pass run through `cold_pass` with made-up page times (no page runs): one segment, every page done."""
    from redlib.bench import cold_pass

    where = {"cpu": "Test CPU", "vendor": "GenuineIntel", "cores": 2, "matmul": "stock"}
    run = cold_pass.begin(tmp_path, "full", "abc1234def", where)
    with cold_pass.segment(tmp_path, run) as seg:
        for name in pages:
            cold_pass.start_page(seg, name)
            seg["page_started"] -= seconds_per_page  # as if the page had run that long
            cold_pass.end_page(tmp_path, run, seg, name)
        run["build_seconds"] = 30.0
    seg["start_s"] = seg["end_s"] - seconds_per_page * len(pages) - 30.0
    return run, where


def test_the_cold_book_is_one_pass_never_a_sum_of_pages_timed_apart(tmp_path):
    """One number: the book's one cold pass (commit, CPU, kernels, segments); pages timed apart make no cold book;
    a pass not complete is none either."""
    from redlib.bench.cold import cold_answer, cold_book, cold_book_words
    from redlib.book import registry

    NOTEBOOKS = list(registry.NOTEBOOKS)
    run, _ = _pass(tmp_path, NOTEBOOKS)
    per = {n: {"wall_seconds": 999.0, "git_commit": "0000000"} for n in NOTEBOOKS}
    per[NOTEBOOKS[0]]["disturbed"] = "beside a test run"
    parts = {"notebooks": {"full": {"per_notebook": per, "book_build_seconds": 120.0}}}
    assert cold_book(parts) is None and cold_book_words(None).startswith("not measured in one cold pass")
    book = cold_book({**parts, "cold_pass": {"full": run}})
    assert book["min"] == pytest.approx(len(NOTEBOOKS) + 0.5) and book["commit"] == "abc1234"
    words = cold_book_words(book)
    assert words.startswith(f"{book['min']:.0f} min in one cold pass at abc1234 on Test CPU (stock kernels), in one "
                            "segment: ") and f"reading high: {NOTEBOOKS[0]}" in words
    assert "in one cold pass" in cold_answer(book, 90) and cold_answer(None, 90).startswith("Not measured in one")
    run["done"].remove(NOTEBOOKS[-1])
    assert cold_book({**parts, "cold_pass": {"full": run}}) is None


def test_a_stopped_pass_resumes_at_its_commit_and_its_segments_add_up(tmp_path):
    """A session's end stops a pass mid-page: the same pass resumes (same commit, CPU, kernels) in a new segment, the
    stopped page is credited with the time it had run, and the cold time is every segment's; another commit or an
    unknown cache holding stages is a one-line error."""
    import json

    from redlib.bench import cold_pass
    from redlib.core.config import ParameterError

    where = {"cpu": "Test CPU", "vendor": "GenuineIntel", "cores": 2, "matmul": "stock"}
    run = cold_pass.begin(tmp_path, "full", "abc1234def", where)
    with cold_pass.segment(tmp_path, run) as seg:
        cold_pass.start_page(seg, "a")
        seg["page_started"] -= 100.0
        cold_pass.end_page(tmp_path, run, seg, "a")
        cold_pass.start_page(seg, "b")
        seg["page_started"] -= 40.0  # stopped 40 s into page b
    seg["start_s"] -= 140.0
    resumed = cold_pass.begin(tmp_path, "full", "abc1234def", where)
    assert resumed["done"] == ["a"] and len(resumed["segments"]) == 1
    with cold_pass.segment(tmp_path, resumed) as seg2:
        assert resumed["pages"]["b"] == pytest.approx(40.0, abs=1.0)  # the stopped segment's share of page b
        cold_pass.start_page(seg2, "b")
        seg2["page_started"] -= 60.0
        cold_pass.end_page(tmp_path, resumed, seg2, "b")
    assert resumed["pages"]["b"] == pytest.approx(100.0, abs=1.0) and len(resumed["segments"]) == 2
    assert json.loads((tmp_path / cold_pass.RECORD).read_text())["done"] == ["a", "b"]
    with pytest.raises(ParameterError, match="resume it there, or start a new pass"):
        cold_pass.begin(tmp_path, "full", "fff0000", where)
    (tmp_path / "other" / "t1").mkdir(parents=True)
    (tmp_path / "other" / "t1" / "x.safetensors").write_bytes(b"")
    with pytest.raises(ParameterError, match="holds stages but no cold pass"):
        cold_pass.begin(tmp_path / "other", "full", "abc1234def", where)


def test_the_readme_states_the_committed_benchs_cold_book():
    """The README's cold-book sentence is the committed bench's (the bench rewrites it; a stale one fails here)."""
    from redlib.bench.cold import README_MARK, readme_text
    from redlib.bench.report import committed
    from redlib.core.paths import project_root

    found = README_MARK.findall((project_root() / "README.md").read_text())
    assert found == [readme_text(committed())]


def test_the_speed_pages_answer_says_whether_the_book_meets_its_budget_and_what_costs_most():
    from redlib.bench.cold import cold_answer

    book = {"min": 100.0, "build min": 1.0, "commit": "abc1234", "cpu": "Test CPU", "matmul": "stock",
            "segments": [("2026-11-29T00:00", 100)],
            "pages": [{"page": "a", "min": 30.0, "disturbed": ""}, {"page": "b", "min": 69.0, "disturbed": "busy"}]}
    words = cold_answer(book, 90)
    assert "at abc1234, takes 100 min: it misses its budget of 90 min" in words
    assert "b (69 min, 69% of the book)" in words
    assert "reading high" in words and "meets" in cold_answer(book, 120)
    named = {**book, "pages": [{**book["pages"][1], "page": "step_decomposition"}]}  # a page of the book: its title
    assert "costs most is “Op experts, the step decomposer and program execution” (69 min" in cold_answer(named, 90)


def test_the_make_html_route_counts_the_reading_pages_it_executes(tmp_path):
    """`make html` executes the reading pages from the results files, then builds: its cost is both, as timed."""
    import json

    from redlib.book.registry import PAGES

    reading = [p.name for p in PAGES if not p.trains]
    per = {n: {"wall_seconds": 6.0} for n in reading}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"notebooks": {"full": {"book_build_seconds": 9.0, "per_notebook": per}}}))
    html = report.route_costs(path).set_index("command").iloc[:, 1]["make html"]
    assert html == f"{9 + 6 * len(reading):.0f} s: the reading pages {6 * len(reading):.0f} s, the build 9 s"
    path.write_text(json.dumps({"notebooks": {"full": {"book_build_seconds": 9.0, "per_notebook": {}}}}))
    assert report.route_costs(path).set_index("command").iloc[:, 1]["make html"].endswith("reading pages not timed")


def test_the_pages_budgets_fit_within_the_books():
    """The Speed page judges the book against its budget and each page against its own: the pages' add up to no more
    than the book's (they once added up to 92 against a book of 90)."""
    from redlib.book.registry import BOOK_MINUTES, BUDGETS

    assert sum(b.minutes for b in BUDGETS) <= BOOK_MINUTES
