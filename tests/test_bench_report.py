"""The bench page's logic, against the committed bench.json (what the page shows is computed here)."""

import re

import pandas as pd
import pytest

from redlib.bench import levers, report
from redlib.bench import page as speed
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
    assert report.current_profile("task1_addition", "full", old) == "yes"
    assert report.current_profile("task1_addition", "full", {**old, "digits_variant_on": "none"}) == "no: extensions"
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


def test_the_whole_book_row_says_how_its_total_was_taken(bench):
    import copy

    def book_row(total_from_parts, one_pass=None):
        b = copy.deepcopy(bench)
        full = b["notebooks"]["full"]
        full.update(book_build_seconds=full.get("book_build_seconds") or 60.0, total_from_parts=total_from_parts)
        full.pop("one_pass", None)
        if one_pass:
            full["one_pass"] = one_pass
        return next(t for t in report.targets(b)["target"] if t.startswith("whole full-profile book"))

    commits = sorted({t["git_commit"][:7] for t in bench["notebooks"]["full"]["per_notebook"].values()})
    assert f"sum of each notebook's last cold time + strict build; pages timed at {', '.join(commits)})" in book_row(True)
    assert book_row(False, {"git_commit": "abcdef0123", "at": "2026-11-25"}).endswith("in one pass at abcdef0)")


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


def test_the_cold_book_is_one_sum_of_each_pages_last_cold_run_and_the_build():
    """One number: every page's last cold run (named with its commit) plus the build; a page never timed: none."""
    from redlib.bench.cold import cold_book, cold_book_words
    from redlib.book import registry

    NOTEBOOKS = list(registry.NOTEBOOKS)
    per = {n: {"wall_seconds": 60.0 * (i + 1), "git_commit": f"{i:07d}abc"} for i, n in enumerate(NOTEBOOKS)}
    per[NOTEBOOKS[0]]["disturbed"] = "beside a test run"
    bench = {"notebooks": {"full": {"per_notebook": per, "book_build_seconds": 120.0}}}
    book = cold_book(bench)
    assert book["min"] == pytest.approx(sum(range(1, len(NOTEBOOKS) + 1)) + 2)
    words = cold_book_words(book)
    assert words.startswith(f"{book['min']:.0f} min: ") and f"{NOTEBOOKS[-1]} {len(NOTEBOOKS)} (" in words
    assert f"reading high: {NOTEBOOKS[0]}" in words and "reading low" not in words
    per[NOTEBOOKS[2]]["resumed"] = "its own pass, stopped at a session's end"  # its wall time covers a part only
    low = cold_book_words(cold_book(bench))
    assert low.startswith("at least ") and f"reading low: {NOTEBOOKS[2]}" in low
    timing = {**per[NOTEBOOKS[2]], "wall": {"reps": 1}, "peak_rss_mb": 1024.0}
    one = {"notebooks": {"smoke": {"per_notebook": {NOTEBOOKS[2]: timing}}}}
    assert report.notebooks(one)["started from"].tolist() == ["its own stopped pass"]
    del per[NOTEBOOKS[1]]
    assert cold_book(bench) is None and cold_book_words(None).startswith("not measured")


def test_the_readme_states_the_committed_benchs_cold_book():
    """The README's cold-book sentence is the committed bench's (the bench rewrites it; a stale one fails here)."""
    from redlib.bench.cold import README_MARK, readme_text
    from redlib.bench.report import committed
    from redlib.core.paths import project_root

    found = README_MARK.findall((project_root() / "README.md").read_text())
    assert found == [readme_text(committed())]


def test_the_speed_pages_answer_says_whether_the_book_meets_its_budget_and_what_costs_most():
    from redlib.bench.cold import cold_answer

    book = {"min": 100.0, "build min": 1.0, "pages": [{"page": "a", "min": 30.0, "commit": "x", "disturbed": ""},
                                                      {"page": "b", "min": 69.0, "commit": "y", "disturbed": "busy"}]}
    words = cold_answer(book, 90)
    assert "takes 100 min: it misses its budget of 90 min" in words and "b (69 min, 69% of the book)" in words
    assert "reading high" in words and "meets" in cold_answer(book, 120) and cold_answer(None, 90).startswith("Not")
    named = {**book, "pages": [{**book["pages"][1], "page": "step_decomposition"}]}  # a page of the book: its title
    assert "costs most is “Op experts, the step decomposer and program execution” (69 min" in cold_answer(named, 90)
    low = {**book, "pages": [*book["pages"], {"page": "c", "min": 0.0, "commit": "z", "disturbed": "", "resumed": "its own"}]}
    # a page resumed: the sum is a lower bound, it can only miss for sure
    assert "takes at least 100 min: it misses" in cold_answer(low, 90) and "it may miss" in cold_answer(low, 120)


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
