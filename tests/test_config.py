import ast

import jupytext
import pytest

from redlib.book.registry import NOTEBOOKS, PAGES, config_for
from redlib.core.config import ParameterError
from redlib.core.paths import project_root
from redlib.configs.toy_experiments import ToyConfig


def test_profile_defaults_fill_none_fields():
    smoke, full = ToyConfig.from_params(profile="smoke"), ToyConfig.from_params(profile="full")
    assert smoke.n_seeds == ToyConfig.PROFILE_DEFAULTS["smoke"]["n_seeds"]
    assert full.max_epochs == ToyConfig.PROFILE_DEFAULTS["full"]["max_epochs"]
    assert ToyConfig.from_params(profile="smoke", n_seeds=7).n_seeds == 7
    assert ToyConfig.from_params(profile="full", seed=3, n_seeds=2).seeds == [3, 4]


@pytest.mark.parametrize(
    "params, words",
    [
        ({"sed": 3}, ["unknown parameter 'sed'", "allowed:", "seed", "profile"]),
        ({"seed": "three"}, ["'seed'", "must be int"]),
        ({"seed": True}, ["'seed'", "must be int"]),
        ({"lr": "fast"}, ["'lr'", "must be float"]),
        ({"profile": "fulll"}, ["unknown profile 'fulll'", "smoke, full"]),
        ({"device": "gpu"}, ["unknown device 'gpu'", "cpu"]),
        ({"n_seeds": 0}, ["'n_seeds'", ">= 1"]),
        ({"virtual_batch": 50, "batch_size": 32}, ["multiple of 'batch_size'"]),
    ],
)
def test_bad_parameters_give_one_line_errors(params, words):
    with pytest.raises(ParameterError) as err:
        ToyConfig.from_params(**params)
    msg = str(err.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_coerce_command_line_strings():
    assert ToyConfig.coerce("seed", "3") == 3
    assert ToyConfig.coerce("lr", "1e-3") == pytest.approx(1e-3)
    assert ToyConfig.coerce("n_seeds", "None") is None
    assert ToyConfig.coerce("profile", "smoke") == "smoke"
    with pytest.raises(ParameterError, match="must be int"):
        ToyConfig.coerce("seed", "3.5")
    with pytest.raises(ParameterError, match="unknown parameter"):
        ToyConfig.coerce("nope", "1")


def test_list_parameters_are_lists_from_every_door():
    """A list parameter is a list in the parameters cell and the config; the command line's and papermill's `-p` give
    a comma-separated string, which becomes the list ("none": the empty list); a bad element is a one-line error."""
    from redlib.configs.robustness_and_cost import RobustnessConfig as R
    from redlib.configs.task1_addition import Task1Config as T

    assert R.from_params(profile="smoke").noise_levels == R.default("noise_levels") == [0, 0.25, 0.5, 1, 2, 4]
    assert R.coerce("noise_levels", "0,1,4.5") == [0.0, 1.0, 4.5] == R.coerce("noise_levels", "[0, 1, 4.5]")
    assert R.coerce("rank_divisors", "4,32") == [4, 32]
    assert T.coerce("extensions", "none") == [] == T.coerce("extensions", "")
    assert T.coerce("extensions", "None") == []  # leaving a parameter out gives the profile's value
    assert R.from_params(profile="smoke", noise_levels="0,2").noise_levels == [0.0, 2.0]
    assert R.from_params(profile="smoke", noise_levels=(0, 2)).noise_levels == [0, 2]
    assert R.from_params(profile="smoke", rank_divisors=4).rank_divisors == [4]  # papermill's -p gives one number
    a, b = R.from_params(profile="smoke"), R.from_params(profile="smoke")
    a.noise_levels.append(8)  # each config has its own copy of a list default
    assert b.noise_levels == [0, 0.25, 0.5, 1, 2, 4]
    assert T.from_params(profile="full").extensions == ["pairs", "digits:pairs", "paper_budget"]
    for bad, words in [({"rank_divisors": "4,x"}, "must be a list of int, got '4,x'"),
                       ({"rank_divisors": [4, 2.5]}, "must be a list of int, got [4, 2.5]"),
                       ({"noise_levels": True}, "must be a list of float, got True")]:
        with pytest.raises(ParameterError) as err:
            R.from_params(profile="smoke", **bad)
        assert words in str(err.value) and "\n" not in str(err.value)


def test_unknown_notebook():
    with pytest.raises(ParameterError, match="allowed: toy_experiments"):
        config_for("toys")


@pytest.mark.parametrize("notebook", list(NOTEBOOKS))
def test_parameters_cell_mirrors_config(notebook):
    """The notebook's `parameters` cell assigns exactly the config's fields, with the config's defaults."""
    nb = jupytext.read(project_root() / "notebooks" / f"{notebook}.py")
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    assigned = {}
    for node in ast.parse(cells[0].source).body:
        assert isinstance(node, ast.Assign)
        assigned[node.targets[0].id] = ast.literal_eval(node.value)
    cls = config_for(notebook)
    assert list(assigned) == cls.param_names()
    assert assigned == {n: cls.default(n) for n in cls.param_names()}
    # the cell follows from the config, help text included (`python -m redlib params --write` rewrites it)
    assert cells[0].source == cls.parameters_source()


def test_every_parameter_is_described_once_in_its_config():
    """Help text lives in the config fields; choices and the profiles' values are filled in, not written twice."""
    from redlib.configs.task1_addition import Task1Config

    for page in PAGES:
        cls = page.config
        assert all(cls.describe(n) for n in cls.param_names()), page.name
        assert not any("{" in cls.describe(n) for n in cls.param_names()), page.name
    assert '"iid" or "pairs"' in Task1Config.describe("split")
    assert Task1Config.describe("dataset_size").endswith('None: the profile\'s value (smoke "tiny", full "final")')
    assert Task1Config.describe("results_dir") == "results go to <results_dir>/<profile>/task1_addition/"


def test_write_parameters_cells_restores_a_hand_edited_cell(tmp_path, monkeypatch):
    """A parameters cell edited by hand is put back from the config, and the rest of the notebook is kept."""
    from redlib.book import runner

    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS:
        (root / "notebooks" / f"{name}.py").write_text(runner.source_of(name).read_text())
    monkeypatch.setattr(runner, "project_root", lambda: root)
    path = root / "notebooks" / "toy_experiments.py"
    before = path.read_text()
    path.write_text(before.replace("lr = 0.01  #", "lr = 0.5  # edited by hand;"))
    assert runner.write_parameters_cells() == ["toy_experiments"]
    assert path.read_text() == before
    assert runner.write_parameters_cells() == []


def test_parameter_table_documents_every_experiment_parameter():
    from redlib.book.parameters import parameter_table

    table = parameter_table()
    for page in PAGES:
        notebook, cls = page.name, page.config
        rows = table[table["notebook"] == notebook]
        if not page.trains:
            assert rows.empty
            continue
        assert list(rows["parameter"]) == cls.param_names()
        assert (rows["description"] != "").all(), rows[rows["description"] == ""]["parameter"].tolist()
    split = table[(table["notebook"] == "task1_addition") & (table["parameter"] == "split")].iloc[0]
    assert split["allowed"] == "iid, pairs"


def test_expert_hidden_zero_means_a_linear_expert_and_says_so():
    from torch import nn

    from redlib.book.parameters import parameter_docs
    from redlib.configs.task1_addition import Task1Config
    from redlib.red.types import expert_module

    expert = expert_module(Task1Config.from_params(profile="smoke", expert_hidden=0), 8, 3)
    assert len(expert) == 1 and isinstance(expert[0], nn.Linear)
    assert "linear" in parameter_docs("task1_addition")["expert_hidden"]


def test_a_pages_runs_read_in_reader_words():
    """The profile sentence names settings as the tables do ("pairs, digit-spaced numbers"), never the code's "pairs,
    digits", and joins settings that share seeds with "and" (a label may hold a comma)."""
    from redlib.configs.task1_addition import Task1Config

    words = Task1Config.from_params(profile="full").runs_label()
    assert "pairs, digit-spaced numbers" in words and "digits;" not in words and not words.endswith("digits")


def test_precision_is_stage_one_only_and_checked():
    """Every page with a stage 1 takes `precision` (fp32 by default); it reaches stage 1's fit settings, never a small
    stage's; another value is a one-line error naming the allowed ones."""
    from redlib.configs.red import RedConfig, protocol_words

    pages = [n for n in NOTEBOOKS if issubclass(config_for(n), RedConfig)]
    assert set(pages) >= {"task1_addition", "task2_mixed", "step_decomposition", "mnist_label5"}
    for name in pages:
        cls = config_for(name)
        assert cls.CHOICES["precision"] == ("fp32", "bf16") and cls.from_params(profile="smoke").precision == "fp32"
        with pytest.raises(ParameterError, match="allowed: fp32, bf16"):
            cls.validate({"precision": "fp16"})
    # the published default, by the rule `bench --precision` applied (results/bench/precision.json): bf16 on the text
    # backbone's pages; MNIST's small CNN stays fp32
    assert {n: config_for(n).from_params(profile="full").precision for n in pages} == {
        "task1_addition": "bf16", "task2_mixed": "bf16", "step_decomposition": "bf16", "mnist_label5": "fp32"}
    cfg = config_for("task1_addition").from_params(profile="smoke", precision="bf16")
    assert cfg.stage1_config(0, cfg.lr).precision == "bf16"
    assert cfg.fit_config(0, "router").precision == "fp32"
    assert "bf16 autocast" in protocol_words(cfg)
    assert "bf16" not in protocol_words(config_for("task1_addition").from_params(profile="smoke"))


def test_variant_seeds_is_a_range_page_parameter_checked_at_once():
    """The range pages (Task 1, Task 2, the step decomposition) say on how many seeds the variant methods train; a
    negative count is a one-line error naming what 0 means; MNIST (its code forms are its judged alternative) has
    no such parameter."""
    for name in ("task1_addition", "task2_mixed", "step_decomposition"):
        cls = config_for(name)
        assert cls.default("variant_seeds") == 1
        with pytest.raises(ParameterError, match=r"'variant_seeds' must be >= 0 \(0: no variant methods\)"):
            cls.from_params(profile="smoke", variant_seeds=-1)
    assert "variant_seeds" not in config_for("mnist_label5").param_names()
