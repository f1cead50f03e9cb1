"""Reader words (issue 63): tables, legends and the ledger show reader words for the code's labels, and no number
changes on the way."""

import pandas as pd

from redlib.book import plots
from redlib.book.ledger import _fmt
from redlib.book.words import reader, relabel


def test_labels_read_as_words_and_numbers_stay():
    df = pd.DataFrame({"method": ["RED", "RED stage 4"], "accuracy": [0.5, 0.25], "macro_f1": [0.1, 0.2]},
                      index=pd.Index(["pairs, digits", "iid"], name="run"))
    out = relabel(df)
    assert list(out.columns) == ["method", "accuracy", "macro F1"]
    assert out["method"].tolist() == ["RED", "RED, tuned jointly (stage 4)"]
    assert out.index.tolist() == ["pairs, digit-spaced numbers", "iid"] and out.index.name == "run"
    assert out["accuracy"].tolist() == [0.5, 0.25] and out["macro F1"].tolist() == [0.1, 0.2]
    assert list(df.columns) == ["method", "accuracy", "macro_f1"]  # the caller's frame is untouched
    assert reader("pairs, digits, 50/50 mix") == "pairs, digit-spaced numbers, 50/50 mix" and reader(3) == 3
    assert reader("macro_f1 sd") == "macro F1 sd" and reader("boundary_accuracy mean") == "accuracy on boundary sums mean"
    assert reader("accuracy std") == "accuracy sd" and reader("std") == "sd" and reader("split_part") == "split"


def test_every_table_and_the_ledgers_paper_values_use_them():
    html = plots.styled(pd.DataFrame({"macro_f1": [0.5]}), caption="c").to_html()
    assert "macro F1" in html and "macro_f1" not in html
    assert _fmt({"task1_drop": 0.115, "task2_drop": 0.225}) == "Task 1 drop: 0.115, Task 2 drop: 0.225"


def test_a_learning_rate_reads_as_a_rate_and_a_tiny_share_says_it_rounds_to_zero():
    html = plots.styled(pd.DataFrame({"stage 1 lr": [1e-3, 1e-4], "lr": [1e-4, 1e-4], "accuracy": [1e-4, 0.5]}),
                        caption="c").to_html()
    assert html.count("1e\u20114") == 3 and "1e\u20113" in html  # never "< 5e-4" for the paper's 1e-4
    assert html.count("&lt; 5e-4") == 1  # a share (accuracy) that rounds to zero still says so


def test_a_column_of_perfect_accuracies_reads_as_shares_and_a_count_with_a_gap_as_integers():
    """Accuracies that are all 1.0 print "1.000" beside "0.909" (not "1"); counts a missing value made floats stay
    integers."""
    df = pd.DataFrame({"R1": [1.0, 1.0], "R5": [0.909, 1.0], "sd": [0.0, 0.0], "runs": [3.0, float("nan")],
                       "rank": [192.0, 96.0]})
    html = plots.styled(df, caption="c", hide_index=True).to_html()
    assert html.count(">1.000<") == 3 and ">0.909<" in html and ">1<" not in html
    assert ">3<" in html and ">192<" in html and ">96<" in html and ">3.000<" not in html
