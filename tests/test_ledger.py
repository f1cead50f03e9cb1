import json

import pandas as pd
import pytest

from redlib.book import ledger
from redlib.core.claims import load_claims


def write(root, notebook, claims, params=None):
    """A page's claims.json as a run writes it, with the digest readers check."""
    from redlib.book.results import digests

    d = root / "full" / notebook
    d.mkdir(parents=True)
    doc = {"claims": claims, "provenance": {"parameters": params or {}}, "sha256": digests(d, claims)}
    (d / "claims.json").write_text(json.dumps(doc))


@pytest.fixture
def fake_results(tmp_path):
    write(tmp_path, "toy_experiments", {
        "toy.linear.param_average": {"value": 1.0, "per_seed": [1.0, 1.0], "bound": [1.0, 1.0]},
        "toy.mlp.average_collapse": {"value": 0.06, "per_seed": [0.05, 0.09], "bound": [0.0, 0.07]},
        "toy.residual.base_only": {"value": 0.5, "per_seed": [0.5, 0.5]},
    })
    write(tmp_path, "task1_addition", {
        "t1.red.acc": {"value": 0.96, "per_seed": [0.95, 0.97]},
        "t1.global.acc": {"value": 0.2, "per_seed": [0.2, 0.2]},
        "t1.red.per_range": {"value": [1.0, 0.98, 0.5, 0.5, 0.5], "per_seed": [[1, 0.98, 0.5, 0.5, 0.5]]},
        "t1.order": {"value": {}, "per_seed": [True, False], "mean_holds": True},
        "t1.oracle.upper_bound": {"value": {}, "per_seed": [False, False], "mean_holds": False},
    }, {"backbone": "embedded", "split": "pairs"})
    return tmp_path


def test_every_claim_gets_a_row_and_a_verdict_by_rule(fake_results):
    df = ledger.table(ledger.collect(fake_results)).set_index("id")
    assert list(df.index) == list(load_claims())  # every id of the yaml, in its order
    expected = {
        "toy.linear.param_average": "holds",  # bound [1, 1], every seed inside
        "toy.mlp.average_collapse": "partly",  # one seed of two inside [0, 0.07]
        "toy.residual.base_only": "does not hold",  # paper 1.0 -> bound [1, 1]
        "t1.red.acc": "holds",  # within 0.05 of 0.9725 in both seeds
        "t1.global.acc": "does not hold",  # 0.2 vs 0.5503
        "t1.red.per_range": "partly",  # two of five ranges within tolerance
        "t1.order": "partly",  # one seed of two
        "t1.oracle.upper_bound": "does not hold",
        "t2.red.acc": "not measured",
    }
    for cid, v in expected.items():
        assert df.loc[cid, "verdict"] == v, cid
    assert df.loc["t2.red.acc", "ours"] == "not measured"
    assert df.loc["t1.red.acc", "measured on"] == "backbone embedded, split pairs"
    assert df.loc["t1.red.acc", "spread over seeds"] == "± 0.014 (2 seeds, each seed its own data)"  # sample sd
    assert ledger._spread({"per_seed": [0.5], "notebook": "robustness_and_cost"}) == "one seed: no spread"
    assert df.loc["t1.global.acc", "miss"] == "below" and df.loc["t1.red.acc", "miss"] == ""
    assert (df["verdict"] != "").all()


def test_summary_counts_every_verdict(fake_results):
    s = ledger.summary(ledger.table(ledger.collect(fake_results)))
    assert list(s.index) == list(ledger.VERDICTS) and s.sum() == len(load_claims())
    assert s["holds"] == 2 and s["partly"] == 3


def test_unknown_claim_id_in_results_is_an_error(tmp_path):
    write(tmp_path, "toy_experiments", {"toy.made.up": {"value": 1.0}})
    with pytest.raises(KeyError, match="toy.made.up"):
        ledger.collect(tmp_path)


def test_links_point_to_the_claims_section():
    assert ledger.link("toy_experiments") == "toy_experiments.html#toy-claims"


def test_status_names_each_page_and_counts_its_claims(fake_results):
    status = ledger.status(ledger.collect(fake_results)).set_index("paper")
    toy = status.loc["toy experiments A-C (linear, MLP, residual experts)"]
    assert toy["page"] == "{doc}`toy_experiments`" and toy["measured"] == 3 and toy["hold"] == 1
    assert status.loc["research code: MNIST label-pair five-domain benchmark", "page"] == "{doc}`mnist_label5`"
    assert status.loc["4.2.2, 4.7 arithmetic Task 2 end to end", "page"] == "{doc}`task2_mixed`"
    assert status["claims"].sum() == len(load_claims())


def test_claims_given_per_named_case_are_judged_case_by_case():
    from redlib.book.ledger import verdict

    claim = {"kind": "value", "paper": {"all": 0.99, "2": 0.99, "3": 0.99}}
    assert verdict(claim, {"value": {"all": 0.98, "2": 0.97, "3": 1.0}}) == "holds"
    assert verdict(claim, {"value": {"all": 0.98, "2": 0.5, "3": 1.0}}) == "partly"
    assert verdict(claim, {"value": {"all": 0.1, "2": 0.5, "3": 0.2}}) == "does not hold"
    assert verdict(claim, {"value": {"other": 0.9}}) == "not measured"


def test_an_order_inside_the_seeds_spread_is_a_tie_not_an_order():
    """Paired seeds decide an order: equal scores (1.000 vs 1.000) are a tie at the ceiling, a difference smaller
    than the spread of the per-seed differences is a tie, and a clear reversal does not hold."""
    import pandas as pd

    from redlib.core import measure

    claim = {"kind": "order", "paper": None}
    tied = measure.ordering(pd.DataFrame({"RED": [1.0, 1.0, 1.0], "MoE": [1.0, 1.0, 1.0]}), ["RED", "MoE"])
    assert ledger.verdict(claim, tied) == "untestable here" and "at the ceiling" in ledger.note(claim, tied)
    noisy = measure.ordering(pd.DataFrame({"RED": [0.80, 0.70, 0.90], "MoE": [0.75, 0.78, 0.80]}), ["RED", "MoE"])
    assert noisy["mean_holds"] and ledger.verdict(claim, noisy) == "partly" and ledger.note(claim, noisy).startswith("tie")
    clear = measure.ordering(pd.DataFrame({"RED": [0.90, 0.92, 0.91], "MoE": [0.80, 0.81, 0.79]}), ["RED", "MoE"])
    assert ledger.verdict(claim, clear) == "holds"  # a decided order shows its margin over the threshold
    assert ledger.note(claim, clear).startswith("decided: RED − MoE = +0.110") and "0.090 beyond" in ledger.note(claim, clear)
    reversed_ = measure.ordering(pd.DataFrame({"RED": [0.70, 0.72, 0.71], "MoE": [0.80, 0.81, 0.79]}), ["RED", "MoE"])
    assert ledger.verdict(claim, reversed_) == "does not hold"
    one_seed = measure.order([True], True, pairs=[("0 and 7", "others", [0.5], [0.472])])
    assert ledger.verdict(claim, one_seed) == "partly" and "one seed" in ledger.note(claim, one_seed)


def test_changed_verdicts_are_listed_with_their_cause(tmp_path):
    import pandas as pd

    before = tmp_path / "before.csv"
    pd.DataFrame({"id": ["a", "b", "c"], "verdict": ["holds", "holds", "partly"], "notebook": ["x", "y", "z"],
                  "published_at": ["abc1234"] * 3}).to_csv(before, index=False)
    now = pd.DataFrame({"id": ["a", "b", "c"], "verdict": ["partly", "holds", "holds"],
                        "notebook": ["x", "y", "task2_mixed"], "note": ["tie: RED − MoE = +0.000", "", ""]})
    moved = ledger.changes(now, before)
    assert list(moved["id"]) == ["a", "c"] and list(moved["before"]) == ["holds", "partly"]
    assert moved["cause"][0].startswith("tie") and moved["cause"][1] == ledger.REPUBLICATION_CAUSES["task2_mixed"]
    # the same page, not re-run since the previous publication: only a rule can have moved its verdict
    same_run = {"c": {"provenance": {"git_commit": "abc1234def"}}}
    assert ledger.changes(now, before, same_run)["cause"][1] == ledger.UNCHANGED_RUN_CAUSE


def test_the_verdicts_an_extension_would_change_are_named_with_both_verdicts():
    main = {"value": 0.99, "per_seed": [0.99, 0.99, 0.99], "run": "iid"}
    same, low = dict(main), {**main, "value": 0.05, "per_seed": [0.05, 0.05, 0.05]}
    measured = {"t1.red.acc": {**main, "extensions": {"beside": low, "alike": same}}}
    before, after = ledger.verdict(load_claims()["t1.red.acc"], main), ledger.verdict(load_claims()["t1.red.acc"], low)
    assert before != after
    assert ledger.verdicts_beside(measured, "beside") == f"t1.red.acc {before} → {after}"
    assert ledger.verdicts_beside(measured, "alike") == "no verdict differs"
    assert ledger.verdicts_beside(measured, "other") == "not measured"
    assert ledger.verdicts_beside(measured, None) == "not run"


def test_a_tie_below_the_ceiling_beside_one_at_it_is_partly_not_untestable():
    from redlib.core import measure

    claim = {"kind": "order", "paper": None}
    acc = pd.DataFrame({"RED": [1.0, 1.0, 1.0], "MoE": [1.0, 1.0, 1.0], "head": [0.99, 0.6, 0.98]})
    entry = measure.ordering(acc, ["RED", "MoE", "head"])
    assert ledger.verdict(claim, entry) == "partly"


def test_claims_of_several_numbers_are_judged_seed_by_seed():
    """One seed far off and the mean far off: per seed, the close seed still counts (partly), not the mean alone."""
    claim = {"kind": "value", "paper": {"all": 0.99, "2": 0.99}}
    entry = {"value": {"all": 0.75, "2": 0.8}, "per_seed": [{"all": 0.99, "2": 1.0}, {"all": 0.51, "2": 0.6}]}
    assert ledger.verdict(claim, entry) == "partly"
    assert ledger.verdict(claim, {**entry, "per_seed": [{"all": 0.5, "2": 0.6}] * 2}) == "does not hold"
    ranges = {"kind": "value", "paper": [0.9, 0.9]}
    assert ledger.verdict(ranges, {"value": [0.9, 0.9], "per_seed": [[0.9, 0.9], [0.9, 0.5]]}) == "partly"
    assert ledger.miss(ranges, {"value": [0.9, 0.7], "per_seed": [[0.9, 0.9], [0.9, 0.5]]}) == "below"


def test_a_quantity_measured_on_other_hardware_is_not_comparable_and_still_shown(fake_results):
    claims = load_claims()
    entry = {"value": {"total_hours": 0.2}, "per_seed": [{"total_hours": 0.2}]}
    assert ledger.verdict(claims["eff.train_time"], entry) == "not comparable"
    assert ledger.note(claims["eff.train_time"], entry).startswith("not comparable: CPU hours")
    assert ledger.miss(claims["eff.train_time"], entry) == ""


def test_changes_name_the_ledgers_own_rules_as_causes(tmp_path):
    before = tmp_path / "before.csv"
    pd.DataFrame([{"id": "eff.train_time", "verdict": "does not hold", "published_at": "x"},
                  {"id": "sd.red.acc", "verdict": "does not hold", "published_at": "x"}]).to_csv(before, index=False)
    entry = {"value": {"all": 0.75}, "per_seed": [{"all": 0.99}, {"all": 0.51}], "notebook": "step_decomposition"}
    now = pd.DataFrame([{"id": "eff.train_time", "verdict": "not comparable", "note": "", "notebook": "robustness_and_cost"},
                        {"id": "sd.red.acc", "verdict": "partly", "note": "", "notebook": "step_decomposition"}])
    causes = ledger.changes(now, before, {"sd.red.acc": entry}).set_index("id")["cause"]
    assert causes["eff.train_time"].startswith("the ledger's rule: our figure")
    assert causes["sd.red.acc"] == ledger.PER_SEED_CAUSE


def test_a_snapshot_of_the_published_ledger_holds_every_claim_with_its_pages_commit():
    """What a re-publication saves as results/verdicts_before.csv before it re-runs the pages."""
    from redlib.core.paths import project_root

    snap = ledger.snapshot(project_root() / "results")
    assert list(snap.columns) == ["id", "verdict", "notebook", "published_at"]
    assert set(snap["id"]) == set(load_claims()) and set(snap["verdict"]) <= set(ledger.VERDICTS)
    assert (snap["published_at"].str.len() == 7).all()


def test_a_pages_extensions_sit_in_a_table_of_their_own_with_the_rules_word():
    measured = {"t1.red.acc": {"value": 0.96, "per_seed": [0.95, 0.97],
                               "extensions": {"pairs split": {"value": 0.5, "per_seed": [0.5]}}},
                "t1.moe.acc": {"value": 0.86, "per_seed": [0.86]}}
    assert "our extension (rule's verdict)" not in ledger.page_table(measured).columns
    ext = ledger.extension_table(measured)
    assert list(ext.index) == ["t1.red.acc"] and ext.loc["t1.red.acc", "pairs split"] == "0.5 (does not hold)"
    assert ledger.extension_table({"t1.moe.acc": measured["t1.moe.acc"]}).empty


def test_a_pages_claims_table_says_a_spread_note_all_rows_share_once_in_its_header():
    """'(2 seeds, each seed its own data)' in every row would make each row several lines tall: the header says it."""
    same = {"t1.red.acc": {"value": 0.96, "per_seed": [0.95, 0.97], "notebook": "task1_addition"},
            "t1.moe.acc": {"value": 0.86, "per_seed": [0.85, 0.87], "notebook": "task1_addition"},
            "t1.red.per_range": {"value": [1.0] * 5}}  # no spread: its cell stays empty
    df = ledger.page_table(same)
    column = [c for c in df.columns if c.startswith("spread over seeds")]
    assert column == ["spread over seeds (2 seeds, each seed its own data)"]
    assert df[column[0]].tolist() == ["± 0.014", "± 0.014", ""]
    mixed = ledger.page_table({**same, "t1.global.acc": {"value": 0.5, "per_seed": [0.5], "notebook": "task1_addition"}})
    assert "one seed: no spread" in mixed["spread over seeds"].tolist()  # notes differ: each cell keeps its own


def test_a_mean_in_exponent_form_gets_its_spread_in_exponent_form_with_a_minus_that_never_wraps():
    shown = ledger._spread({"per_seed": [1e-7, 3e-7], "notebook": "toy_experiments"})
    assert shown.startswith("± 1.41e\u201107") and "< 5e-4" not in shown


def test_an_order_needs_a_difference_001_beyond_its_spread():
    """The minimum effect: a paired difference beyond its spread but by less than 0.01 is a tie; by 0.01 or more
    it decides the order."""
    from redlib.core import measure

    claim = {"kind": "order", "paper": None}
    small = measure.ordering(pd.DataFrame({"RED": [0.905, 0.906, 0.905], "MoE": [0.90, 0.90, 0.90]}), ["RED", "MoE"])
    assert ledger.verdict(claim, small) == "partly" and ledger.note(claim, small).startswith("tie")
    large = measure.ordering(pd.DataFrame({"RED": [0.915, 0.916, 0.915], "MoE": [0.90, 0.90, 0.90]}), ["RED", "MoE"])
    assert ledger.verdict(claim, large) == "holds"


def test_a_comparison_whose_every_value_is_at_the_ceiling_is_untestable_whichever_way_it_goes():
    """Decided either way, an order or an effect among values all >= 0.995 is untestable here; a value claim at the
    ceiling is still judged as a value; one value below the ceiling makes the comparison testable."""
    from redlib.core import measure

    claim = {"kind": "order", "paper": None}
    up = measure.ordering(pd.DataFrame({"RED": [0.9999, 0.9998, 0.9999], "MoE": [0.996, 0.9955, 0.996]}), ["RED", "MoE"])
    down = measure.ordering(pd.DataFrame({"RED": [0.996, 0.9955, 0.996], "MoE": [0.9999, 0.9998, 0.9999]}), ["RED", "MoE"])
    assert ledger.verdict(claim, up) == ledger.verdict(claim, down) == "untestable here"
    effect = measure.order([False, True], False, compared=[1.0, 1.0, 0.999, 1.0])  # a change among values at 1.000
    assert ledger.verdict(claim, effect) == "untestable here"
    assert ledger.verdict(claim, {**effect, "compared": [1.0, 0.9]}) == "partly"
    assert ledger.verdict(load_claims()["t1.red.acc"], {"value": 1.0, "per_seed": [1.0, 1.0]}) != "untestable here"


def test_the_only_method_above_a_bound_is_judged_against_every_other_methods_lowest_range():
    claim = load_claims()["t1.red.all_ranges_high"]
    entry = {"value": 0.9, "per_seed": [0.9, 0.92], "bound": [0.8, 1.0], "others_lowest": {"MoE": 0.7, "head": 0.5}}
    assert ledger.verdict(claim, entry) == "holds"
    assert ledger.verdict(claim, {**entry, "others_lowest": {"MoE": 0.85, "head": 0.5}}) == "does not hold"
    assert ledger.verdict(claim, {**entry, "per_seed": [0.9, 0.7]}) == "partly"


def test_a_number_that_rounds_to_zero_never_prints_as_zero_point_zero():
    from redlib.core.claims import small

    assert [small(0.0), small(0.0001), small(-0.0001), small(0.0123)] == ["0", "< 5e-4", "> −5e-4", "0.012"]
    assert [small(0.0, sign=True), small(0.0002, sign=True), small(0.01, sign=True)] == ["0", "< +5e-4", "+0.010"]


def test_a_pages_glance_line_says_what_its_number_measures(tmp_path):
    from redlib.book import ledger_html

    write(tmp_path, "toy_experiments", {"toy.linear.weights": {
        "value": 1e-7, "per_seed": [1e-7, 1e-7], "bound": [0, 0.01], "measure": "max |deviation| from [0.5, 0.5, 0]"}})
    line = ledger_html.glance(ledger.table(ledger.collect(tmp_path)))
    assert "ours 1e\u201107 (max |deviation| from [0.5, 0.5, 0]), the paper's" in line


def test_a_pages_glance_line_answers_its_question_where_the_page_names_it():
    import pandas as pd

    from redlib.book import ledger_html
    from redlib.book.registry import PAGES
    from redlib.core.claims import load_claims

    part = pd.DataFrame({"id": ["eff.red_vs_moe_params", "rob.routing_noise"], "kind": ["order", "order"]})
    assert ledger_html._headline(part)["id"] == "eff.red_vs_moe_params"
    assert ledger_html._headline(part, "rob.routing_noise")["id"] == "rob.routing_noise"
    claims = load_claims()
    assert all(p.question in claims for p in PAGES if p.question)


def test_an_order_measured_anywhere_is_judged_by_the_one_order_rule():
    """The ledger's verdict of an order claim and a page's words about one (robustness's plug-in on MNIST) are the
    same function: at the ceiling untestable, else by paired seeds or seed by seed."""
    from redlib.core.claims import order_claim_verdict

    claim = {"id": "mod.plug_in", "kind": "order", "paper": None}
    for entry in ({"per_seed": [True, True], "mean_holds": True, "compared": [1.0, 1.0]},
                  {"per_seed": [True, False], "mean_holds": False, "compared": [0.9, 0.8]},
                  {"per_seed": [False, False], "mean_holds": False}):
        assert ledger.verdict(claim, entry) == order_claim_verdict(entry)
    assert order_claim_verdict({"per_seed": [True], "mean_holds": True, "compared": [1.0, 0.999]}) == "untestable here"


def test_the_old_numbers_under_todays_rules_name_what_moved_a_verdict(tmp_path):
    """Beside verdicts_before.csv, the pass keeps the numbers behind them: a verdict the old numbers already give under
    today's rules moved by the rules; one they do not give moved by the re-run."""
    import json

    claims = load_claims()
    t1_old, t2_old = {"value": 0.97, "per_seed": [0.97, 0.97]}, {"value": 0.76, "per_seed": [0.76, 0.76]}
    far = {"value": 0.3, "per_seed": [0.3, 0.3]}
    before = tmp_path / "verdicts_before.csv"
    pd.DataFrame({"id": ["t1.red.acc", "t2.red.acc"], "verdict": ["partly", "holds"], "notebook": ["task1_addition",
                  "task2_mixed"], "published_at": ["abc1234"] * 2}).to_csv(before, index=False)
    (tmp_path / ledger.CLAIMS_BEFORE).write_text(json.dumps({"t1.red.acc": t1_old, "t2.red.acc": t2_old}))
    assert ledger.verdict(claims["t1.red.acc"], t1_old) == "holds" == ledger.verdict(claims["t2.red.acc"], t2_old)
    now = pd.DataFrame({"id": ["t1.red.acc", "t2.red.acc"],
                        "verdict": ["holds", ledger.verdict(claims["t2.red.acc"], far)],
                        "notebook": ["task1_addition", "task2_mixed"], "note": ["", ""]})
    moved = ledger.changes(now, before)
    assert moved["cause"][0].startswith("the ledger's rules: the previous numbers")
    assert moved["cause"][1].startswith("the re-run: the previous numbers, judged by today's rules, still read 'holds'")
