import re
import tomllib

import yaml

from redlib.core.runtime import project_root


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
