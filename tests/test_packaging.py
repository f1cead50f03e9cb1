import re
import tomllib

import yaml

from redlib.core.paths import project_root


def test_environment_yml_lists_the_pyproject_dependencies():
    root = project_root()
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((root / "environment.yml").read_text())
    pip = next(d for d in env["dependencies"] if isinstance(d, dict))["pip"]
    name = lambda req: re.split(r"[<>=!~ ]", req, maxsplit=1)[0].lower()
    pinned = {name(r): r for r in pip if not r.startswith("-")}
    for req in wanted:
        assert name(req) in pinned, f"{req} missing from environment.yml"
        if name(req) != "torch":
            assert pinned[name(req)] == req, f"environment.yml has {pinned[name(req)]}, pyproject {req}"
    assert pinned["torch"] == "torch==2.13.0"


def test_a_failing_pip_fails_the_install_recipe(tmp_path):
    """Each pip line of the Makefile's install recipe, run as make runs it, with a pip that fails."""
    import subprocess

    makefile = (project_root() / "Makefile").read_text()
    flags = re.search(r"^\.SHELLFLAGS := (.*)$", makefile, re.M).group(1).split()
    lines = [ln.strip() for ln in makefile.splitlines() if ln.startswith("\t") and "pip install" in ln]
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ERROR: No matching distribution found for torch==2.13.0' >&2\nexit 1\n")
    fake.chmod(0o755)
    assert len(lines) == 2
    for line in lines:
        cmd = line.replace("$(PY)", str(fake))
        proc = subprocess.run(["bash", *flags, cmd], capture_output=True, text=True)
        assert proc.returncode != 0, cmd
        assert "No matching distribution" in proc.stdout + proc.stderr


def test_the_book_states_the_python_version_pyproject_requires():
    required = tomllib.loads((project_root() / "pyproject.toml").read_text())["project"]["requires-python"]
    version = required.removeprefix(">=")
    for doc in ("notebooks/intro.py", "README.md"):
        text = (project_root() / doc).read_text()
        assert f"Python {version}+" in text, doc
        assert not re.search(r"Python 3\.(?!" + version.split(".")[1] + r"\b)\d+\+", text), doc


def test_the_readme_says_what_the_project_is_and_its_two_commands_first():
    lines = (project_root() / "README.md").read_text().splitlines()
    first = "\n".join(lines[:15])
    assert len(lines) <= 100 and "Jupyter Book" in first and "make book" in first and "make test" in first
    assert (project_root() / "CONTRIBUTING.md").exists()
