"""The house rules a maintainer relies on: only the Speed page reads the bench (the cost page, its peaks alone), units
stay short, the registry is the one list of pages."""

import ast
import re
from pathlib import Path

from redlib.book import registry
from redlib.core.paths import project_root

REDLIB = project_root() / "redlib"


def _imports(path: Path) -> set[str]:
    """The redlib modules a file imports, resolved to dotted names."""
    tree, found = ast.parse(path.read_text()), set()
    package = ".".join(path.relative_to(project_root()).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            found.add(f"{base}.{node.module}" if base and node.module else base or node.module or "")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_book_package_imports_nothing_from_the_bench():
    for path in (REDLIB / "book").rglob("*.py"):
        assert not [m for m in _imports(path) if m.startswith("redlib.bench")], path


def test_the_bench_is_a_leaf_no_page_imports_it_and_the_cost_page_reads_only_its_peaks():
    """The bench writes results/bench/ and nothing imports it from the pages: the Speed page reads what it wrote, the
    cost page one thing of it, each page's peak memory (the book's one value of it), through `book/costs.py`."""
    texts = {p.stem: p.read_text() for p in (project_root() / "notebooks").glob("*.py")}
    assert not [name for name, text in texts.items() if "redlib.bench" in text and name != "speed_and_memory"]
    assert [name for name, text in texts.items() if "bench.json" in text] == ["speed_and_memory"]
    for path in (REDLIB / "experiments").rglob("*.py"):
        assert not [m for m in _imports(path) if m.startswith("redlib.bench")], path
    costs = (REDLIB / "book" / "costs.py").read_text()
    assert costs.count('"bench.json"') == 1 and "def cold_peaks(" in costs


def test_no_class_over_200_lines_and_no_function_over_60():
    long = []
    for path in REDLIB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            limit = 200 if isinstance(node, ast.ClassDef) else 60
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.end_lineno - node.lineno + 1 > limit:
                long.append(f"{path.relative_to(REDLIB)}:{node.lineno} {node.name}")
    assert not long


def test_budgets_and_stage_kinds_come_from_the_registry():
    budgeted = [name for b in registry.BUDGETS for name in b.pages]
    assert sorted(budgeted) == sorted(p.name for p in registry.PAGES if p.trains)
    assert next(b for b in registry.BUDGETS if "step_decomposition" in b.pages).pages == ("task2_mixed", "step_decomposition")
    kinds = registry.stage_kinds()
    assert {"stage1", "residual", "decomposer", "linear_base"} <= set(kinds)  # the pipeline's and two pages' own


# redlib's floors, lowest first: a module imports from its own floor or from those below it, never from above
FLOORS = ["core", "speed", "models", "tasks", "configs", "red", "experiments", "book", "bench", "__main__"]


def _module_imports() -> dict[str, set[str]]:
    """Every redlib module (dotted name) -> the redlib modules it imports, wherever in the file (`from pkg import
    module` names the module; a name from a package's __init__ names the package)."""
    files = {".".join(p.relative_to(project_root()).with_suffix("").parts).removesuffix(".__init__"): p
             for p in REDLIB.rglob("*.py")}
    out = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                base = ".".join(x for x in (base, node.module) if x)
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        out[name] = {m for m in found if m in files and m != name}
    return out


def _floor(module: str) -> int:
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 and parts[1] in FLOORS else -1


def test_no_import_runs_back_up_a_floor():
    up = [f"{m} -> {i}" for m, imports in _module_imports().items() for i in imports
          if _floor(m) >= 0 and _floor(i) > _floor(m)]
    assert not up


def test_no_module_imports_itself_round_a_circle():
    graph = _module_imports()
    seen, on_path, circles = set(), [], []

    def visit(m: str) -> None:
        if m in on_path:
            circles.append(on_path[on_path.index(m):] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        on_path.append(m)
        for i in sorted(graph.get(m, ())):
            if i != "redlib":  # the package's own __init__ imports nothing of its modules
                visit(i)
        on_path.pop()

    for m in sorted(graph):
        visit(m)
    assert not circles


def test_nothing_in_redlib_sets_the_environment_at_import():
    """Every redlib module imported (after the libraries they use): the process environment is unchanged; set-up
    happens in one call, `speed.kernels.configure`."""
    import subprocess
    import sys

    code = ("import os, pkgutil, importlib, torch, transformers, pandas, matplotlib, sklearn\n"
            "before = dict(os.environ)\n"
            "import redlib\n"
            "for m in pkgutil.walk_packages(redlib.__path__, 'redlib.'):\n"
            "    if not m.name.endswith('__main__'):\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)))")
    import os

    # a bare environment: this test process has imported redlib, so its own environment may hold what redlib set
    bare = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=bare)
    assert out.stdout.strip() == "[]", out.stdout


def test_each_training_page_has_a_config_and_an_experiment_module_named_as_its_notebook():
    for p in registry.PAGES:
        if p.trains:
            assert p.config.__module__ == f"redlib.configs.{p.name}", p.name
            assert (REDLIB / "experiments" / f"{p.name}.py").exists(), p.name


def test_a_rejected_parameter_is_answered_before_torch_or_pandas_load():
    """The command line checks names, types and the reader's folders on configs that import neither torch nor pandas
    (one line, exit 2), so bad input is answered at once."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from redlib.__main__ import main\n"
            "for argv in (['run', 'task1_addition', '-p', 'bogus', '1'], ['run', 'task2_mixed', '-p', 'lr', 'abc'],\n"
            "             ['run', 'step_decomposition', '-p', 'backbone', '/no/such/folder'],\n"
            "             ['run', 'mnist_label5', '-p', 'data_dir', '/no/such/folder'],\n"
            "             ['run', 'routing_heatmaps', '-p', 'tokenizer', '/no/such/folder'],\n"
            "             ['run', 'robustness_and_cost', '-p', 'n_seeds', '0'], ['run', 'toy_experiments', '-p', 'hidden', '-1']):\n"
            "    assert main(argv) == 2, argv\n"
            "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    assert len([line for line in out.stderr.splitlines() if line.startswith("error: ")]) == 7, out.stderr


def test_one_key_names_each_training_page_in_its_claims_and_glued_values():
    """A training page's config declares its short name once (`KEY`): every value its notebook glues starts with
    "<KEY>_", and its claim ids with "<KEY>." (robustness measures four claim groups the paper names otherwise:
    its claims keep the paper's prefixes, its glued values take its key). Its stages are filed in the cache under
    "<KEY>/", which each page's own tests check on a tiny run."""
    from redlib.core.claims import load_claims

    keys = {p.name: p.config.KEY for p in registry.PAGES if p.trains}
    assert all(keys.values()) and len(set(keys.values())) == len(keys), keys
    for name, key in keys.items():
        text = (project_root() / "notebooks" / f"{name}.py").read_text()
        glued = set(re.findall(r"\{glue:\w+\}`(\w+)", text))
        assert glued and all(g.startswith(f"{key}_") for g in glued), (name, sorted(g for g in glued
                                                                                   if not g.startswith(f"{key}_")))
        groups = registry.BY_NAME[name].claim_groups
        ids = [cid for cid, c in load_claims().items() if c["group"] in groups]
        if name != "robustness_and_cost":
            assert ids and all(cid.startswith(f"{key}.") for cid in ids), (name, ids)


def test_no_module_but_the_registry_imports_a_page_by_name():
    """A page's module is imported where it is used, by an import the import graph sees; only the registry, the one
    list of pages, reaches the experiment modules by name (issue 77: `ranges` imported its page back by name)."""
    by_name = re.compile(r"importlib\.import_module|__import__\(")
    found = [p.relative_to(REDLIB) for p in REDLIB.rglob("*.py") if by_name.search(p.read_text())]
    assert found == [Path("book/registry.py")]


def test_every_training_page_offers_the_page_contract():
    """Each training page's module offers run(cfg, store), claims(cfg, tables) and found(cfg, tables, verdicts), and
    its notebook calls all three (issue 77: a page is a declared object, one contract to fill)."""
    import inspect

    contract = {"run": ["cfg", "store"], "claims": ["cfg", "tables"], "found": ["cfg", "tables", "verdicts"]}
    for p in registry.PAGES:
        if not p.trains:
            assert p.module is None
            continue
        for name, params in contract.items():
            fn = getattr(p.module, name, None)
            assert callable(fn), f"{p.name}: no {name}()"
            assert list(inspect.signature(fn).parameters) == params, f"{p.name}.{name}{inspect.signature(fn)}"
        text = (project_root() / "notebooks" / f"{p.name}.py").read_text()
        alias = re.escape(p.name) + "|" + "|".join(re.findall(rf"import {p.name} as (\w+)", text))
        for call in (rf"({alias})\.run\(cfg, store\)", rf"({alias})\.claims\(cfg, t\)",
                     rf"pages\.glue_found\(results, ({alias})\.found, cfg, t\)", r"pages\.end\(results\)"):
            assert re.search(call, text), f"{p.name}: the notebook does not call {call}"


def test_the_notebooks_repeat_few_lines(tmp_path):
    """`duplicates --min-lines 4` over notebooks/, their parameters cells left out (each page lists its own knobs),
    finds at most 3 repeated runs (a row a run, and the runs it says a pair has besides): what pages share lives in
    redlib. Skipped where the tool is not installed."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("duplicates") is None:
        pytest.skip("the duplicates tool is not installed here")
    cell = re.compile(r'(# %% tags=\["parameters"[^\n]*\n)(.*?)(\n\n# %%)', re.S)
    for path in (project_root() / "notebooks").glob("*.py"):
        blank = lambda m: m.group(1) + "\n".join("#" for _ in m.group(2).split("\n")) + m.group(3)  # noqa: E731
        (tmp_path / path.name).write_text(cell.sub(blank, path.read_text()))
    out = subprocess.run(["duplicates", "--min-lines", "4", "--most", "50", "--repo", str(tmp_path)],
                         capture_output=True, text=True, check=False).stdout
    rows = [line for line in out.splitlines() if re.match(r"D\d+ ", line)]
    runs = len(rows) + sum(int(n) for n in re.findall(r"\(\+(\d+) more runs?\)", out))
    assert runs <= 3, out
