"""The intro's answer (`redlib/book/headline.py`): RED against the softmax MoE where there is room to rank."""

import json

import pandas as pd

from redlib.book import headline
from redlib.book.results import digests
from redlib.core.claims import load_claims


def page(root, name, table, rows, params=None):
    """A page's result folder as a run writes it: one table and a claims.json with the digests readers check."""
    d = root / "full" / name
    d.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(d / f"{table}.csv", index=False)
    (d / "claims.json").write_text(json.dumps({"claims": {}, "provenance": {"parameters": params or {}},
                                               "sha256": digests(d, {})}))


def accs(run, red, moe):
    return [{"run": run, "seed": s, "method": m, "accuracy": a} for s, (r, o) in enumerate(zip(red, moe))
            for m, a in (("RED", r), ("softmax MoE", o))]


def test_every_setting_with_room_to_rank_is_a_row_judged_by_the_ledgers_rule(tmp_path):
    page(tmp_path, "task1_addition", "overall", accs("iid", [1.0, 1.0, 0.999], [1.0, 0.998, 1.0])
         + accs("pairs", [0.60, 0.62, 0.61], [0.70, 0.71, 0.72]))
    page(tmp_path, "task2_mixed", "overall", accs("iid", [0.90, 0.91, 0.92], [0.903, 0.905, 0.918]))
    page(tmp_path, "mnist_label5", "overall", [{k: v for k, v in r.items() if k != "run"}
                                               for r in accs("", [0.95, 0.96], [0.90, 0.905])])
    df, left_out = headline.red_vs_moe("full", tmp_path)
    assert list(df["setting"]) == ["Task 2, iid", "Task 1, pairs", "MNIST"]  # Task 1's iid: both at the ceiling
    assert left_out == ["Task 1, iid"]
    got = df.set_index("setting")
    assert list(got["by the ledger's rule"]) == ["tie", "MoE ahead", "RED ahead"]  # MNIST: +0.0525, sd 0.0035
    assert abs(got.loc["Task 1, pairs", "RED − softmax MoE"] + 0.10) < 1e-9 and got.loc["Task 1, pairs", "seeds"] == 3
    claims = load_claims()
    t1_gap = claims["t1.red.acc"]["paper"] - claims["t1.moe.acc"]["paper"]
    assert got.loc["Task 1, pairs", "paper's gap"] == f"{t1_gap:+.3f} (iid)"  # the paper measured iid only
    words = headline.answer_words(df, left_out)
    assert "(3 settings)" in words and "in 1, behind it in 1 and tied in 1" in words and "Task 1, iid" in words


def test_a_setting_on_one_seed_is_shown_but_not_judged(tmp_path):
    """One paired difference has no spread: its row says so instead of calling +0.3 a tie, and the sentence counts
    it apart."""
    page(tmp_path, "task2_mixed", "overall", accs("iid", [0.90, 0.91, 0.92], [0.80, 0.81, 0.815])
         + accs("isolated", [0.6], [0.3]))
    df, left_out = headline.red_vs_moe("full", tmp_path)
    assert list(df["by the ledger's rule"]) == ["RED ahead", headline.ONE_SEED]
    words = headline.answer_words(df, left_out)
    assert "on several seeds (1 setting), RED is ahead of the softmax MoE in 1" in words
    assert "1 setting ran on one seed: a difference there has no spread" in words
    alone, _ = headline.red_vs_moe("full", tmp_path / "nowhere")
    page(tmp_path / "one", "mnist_label5", "overall", [{k: v for k, v in r.items() if k != "run"}
                                                       for r in accs("", [0.95], [0.90])])
    only, _ = headline.red_vs_moe("full", tmp_path / "one")
    assert headline.answer_words(only, []).startswith("Every setting with room to rank (1 setting ran on one seed")
    assert headline.answer_words(alone, []) == "No setting with room to rank has been measured yet."


def test_the_misses_are_counted_by_where_they_lie():
    table = pd.DataFrame({"verdict": ["does not hold"] * 4 + ["holds"], "miss": ["above", "above", "below", "", ""]})
    words = headline.misses_words(table, {"Task 1 (iid)": 1.0})
    assert words.startswith("Of the 4 claims that do not hold, 2 lie above the paper's numbers, 1 below")
    assert "1 is an order or a bound" in words and "Task 1 (iid) 100%" in words and "Most misses lie above" in words


def test_a_page_states_a_one_seed_gap_without_a_verdict():
    """The pages' RED − MoE words follow the same rule: several seeds get the ledger's reading, one seed none."""
    from redlib.experiments import ranges

    three = pd.DataFrame({"RED": [0.90, 0.91, 0.92], "softmax MoE": [0.80, 0.81, 0.815]})
    assert ranges.paired_gap(three).endswith("over 3 seeds, RED ahead by the ledger's rule")
    one = ranges.paired_gap(three.iloc[:1])
    assert one.startswith("+0.100 on one seed") and "tie" not in one


def test_each_row_says_how_well_the_router_routes_and_the_unseen_texts_are_a_row_of_their_own(tmp_path):
    """Beside each setting: the router's test accuracy, RED's distance to RED with the true range and the MoE's to the
    oracle experts (the tie's cause); Task 2's unseen test texts are judged as a setting of their own; the cause
    sentence states the routers' range and where RED is ahead."""
    rows = []
    for s, (red, moe, true, oracle, unseen_red, unseen_moe) in enumerate([(0.90, 0.88, 0.91, 0.89, 0.80, 0.70),
                                                                           (0.91, 0.89, 0.91, 0.90, 0.81, 0.72),
                                                                           (0.92, 0.90, 0.93, 0.90, 0.82, 0.71)]):
        for m, a, u in (("RED", red, unseen_red), ("softmax MoE", moe, unseen_moe), ("RED (true range)", true, 0.9),
                        ("oracle experts", oracle, 0.9)):
            rows.append({"run": "iid", "seed": s, "method": m, "accuracy": a, "unseen_accuracy": u})
    page(tmp_path, "task2_mixed", "overall", rows)
    d = tmp_path / "full" / "task2_mixed"
    pd.DataFrame([{"split_part": p, "router_accuracy": a, "seed": s, "run": "iid"} for s in range(3)
                  for p, a in (("train", 0.99), ("test", 0.97 + 0.01 * s))]).to_csv(d / "router_accuracy.csv",
                                                                                    index=False)
    (d / "claims.json").write_text(json.dumps({"claims": {}, "provenance": {"parameters": {}},
                                               "sha256": digests(d, {})}))
    df, _ = headline.red_vs_moe("full", tmp_path)
    got = df.set_index("setting")
    assert list(got.index) == ["Task 2, iid", "Task 2, iid, unseen test texts"]
    assert abs(got.loc["Task 2, iid", "router"] - 0.98) < 1e-9
    assert abs(got.loc["Task 2, iid", "RED − true range"] + 0.0067) < 1e-3
    assert abs(got.loc["Task 2, iid", "MoE − oracle"] + 0.0067) < 1e-3
    assert got.loc["Task 2, iid, unseen test texts", "by the ledger's rule"] == "RED ahead"
    shown = headline.display_table(df).set_index("setting")
    assert shown.loc["Task 2, iid, unseen test texts", "router"] == "—"
    words = headline.cause_words(df)
    assert "send 0.980 to 0.980 of test inputs" in words and "Task 2, iid, unseen test texts (+0.100)" in words


def test_the_misrouting_gap_is_read_per_task_at_the_papers_router_error(tmp_path):
    """RED − MoE per task, seed and misrouted share from the robustness sweep; at a share between two swept ones it
    lies on the line between them (a method's accuracy is linear in the share); the words name where each task
    reaches the paper's gap, or that it does not."""
    from redlib.book import misrouting

    rows = []
    for task, slope in (("Task 1", 0.9), ("MNIST", 0.05)):
        for seed in (0, 1):
            for share in (0.0, 0.1, 0.5, 1.0):
                rows += [{"task": task, "seed": seed, "perturbation": misrouting.KIND, "strength": share,
                          "method": "RED", "accuracy": 1.0 - 0.05 * share},
                         {"task": task, "seed": seed, "perturbation": misrouting.KIND, "strength": share,
                          "method": "softmax MoE", "accuracy": 1.0 - (0.05 + slope) * share},
                         {"task": task, "seed": seed, "perturbation": "logit noise", "strength": share,
                          "method": "RED", "accuracy": 0.0}]
    page(tmp_path, "robustness_and_cost", "sweep", rows)
    g = misrouting.gaps("full", tmp_path)
    assert sorted(g["task"].unique()) == ["MNIST", "Task 1"] and len(g) == 16
    at = misrouting.at_share(misrouting.means(g), 0.035)
    assert abs(at["Task 1"] - 0.9 * 0.035) < 1e-9 and abs(at["MNIST"] - 0.05 * 0.035) < 1e-9
    words = misrouting.words(g)
    assert "Task 1 from 50% of inputs misrouted" in words  # 0.45 at 50% first clears the paper's +0.115
    assert "MNIST at no share up to 100%" in words
    assert misrouting.gaps("full", tmp_path / "none") is None
