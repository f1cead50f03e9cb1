"""Result files of a notebook run: CSV tables and `claims.json` with provenance, under results/<profile>/<notebook>/.

`Results` writes them (all at once, at the end of a run); `read(page, profile)` reads them back.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..core.claims import check_ids
from ..core.config import NotebookConfig
from ..core.paths import ResultFileError, project_root, resolve_path
from ..core.store import Store
from .registry import PAGES
from ..speed import kernels, parallel
from ..speed.parallel import worker_count
from ..speed.usage import TreeUsage

LIBRARIES = ("redlib", "torch", "transformers", "numpy", "pandas", "scikit-learn", "papermill", "jupyter-book")


def jsonable(value: Any) -> Any:
    """numpy/torch scalars and arrays, tuples and dicts -> plain JSON types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return jsonable(value.tolist())
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def git_commit() -> str:
    """HEAD of the checkout, with '+dirty' when tracked files other than outputs (book/, results/) differ."""
    root = project_root()
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        outputs = ["--", ".", ":!book", ":!results"]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", *outputs], cwd=root,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def in_history(commit: str | None) -> str:
    """Whether a result's commit is in HEAD's history (an ancestor of HEAD, not merely an object in this clone, as an
    amended or rebased commit stays): "yes", "no: not in this repository's history" or "unknown"."""
    if not commit or commit == "unknown":
        return "unknown"
    sha = commit.removesuffix("+dirty")
    try:
        found = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "HEAD"], cwd=project_root(),
                               capture_output=True)
    except OSError:
        return "unknown"
    if found.returncode not in (0, 1) and b"Not a valid" not in found.stderr:
        return "unknown"  # not a git checkout, or git failed
    return ("yes" if found.returncode == 0 else "no: not in this repository's history") + \
        (" (+dirty)" if commit != sha else "")


def named_commits(profile: str = "full", results_dir: str | os.PathLike = "results") -> dict[str, str]:
    """The commit each published page's results name in their provenance, by page: the experiment pages (the
    reading pages' results are rebuilt with the book, at whatever the checkout is)."""
    root = resolve_path(results_dir) / profile
    published = {p.name for p in PAGES if p.trains}
    out = {}
    for path in sorted(p for p in root.glob("*/claims.json") if p.parent.name in published):
        try:
            out[path.parent.name] = json.loads(path.read_text()).get("provenance", {}).get("git_commit") or "unknown"
        except ValueError:
            out[path.parent.name] = "unknown"
    return out


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a result depends on."""
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine() -> dict[str, Any]:
    """The machine a result was measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.machine(),
        "cpu_model": kernels.cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "stage_threads": parallel.STAGE_THREADS,  # the small RED stages' own, in the page and its workers
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
    }


class Results:
    """Collects a notebook's tables and claims; `finish()` writes them all at once, replacing the old run's."""

    def __init__(self, cfg: NotebookConfig, notebook: str | None = None, store: Store | None = None):
        self.cfg = cfg
        self.store = store
        self.notebook = notebook or cfg.NOTEBOOK
        self.dir = resolve_path(cfg.results_dir) / cfg.profile / self.notebook
        self.started = time.time()
        self.started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.tables: dict[str, pd.DataFrame] = {}
        self.usage = TreeUsage().start()  # memory and CPU of this run's process and its workers
        self.claims: dict[str, dict[str, Any]] = {}

    def table(self, name: str, df: pd.DataFrame) -> None:
        """Keep a table to be written as <name>.csv by finish()."""
        self.tables[name] = df

    def record(self, measured: dict[str, dict[str, Any]]) -> None:
        """Keep the measurements (see `redlib.core.measure`) of claim ids of the paper's claims file."""
        check_ids(measured)
        self.claims.update(jsonable(measured))

    def provenance(self) -> dict[str, Any]:
        """Profile, seeds, parameters, commit, library versions, start time, wall seconds, machine."""
        train_seconds, unknown = self.store.train_seconds() if self.store else ({}, 0)
        return {
            "notebook": self.notebook,
            "profile": self.cfg.profile,
            "seeds": getattr(self.cfg, "seeds", []),
            "parameters": jsonable(self.cfg.asdict()),
            "non_default": jsonable(self.cfg.non_default()),
            "git_commit": git_commit(),
            "libraries": library_versions(),
            "started_at": self.started_at,
            "wall_seconds": round(time.time() - self.started, 2),
            **self.usage.report(),  # peak_rss_mb (this process), peak_rss_mb_with_workers, cpu_seconds
            "machine": machine(),
            "matmul": kernels.configure(),
            "run_options": {"workers": worker_count()},  # cannot change a number, so not a parameter
            "stages": {"loaded_from_cache": self.store.hits, "computed": self.store.misses,
                       "rebuilt": self.store.rebuilt(),
                       "computed_seconds_by_kind": {k: round(v, 2) for k, v in self.store.seconds.items()},
                       # what every stage this run used cost to train, loaded ones included (recorded in the entry)
                       "train_seconds_by_kind": {k: round(v, 2) for k, v in train_seconds.items()},
                       "stages_without_recorded_cost": unknown}
            if self.store else None,
        }

    def finish(self) -> Path:
        """Write every table and claims.json to a fresh folder, then swap it in place of the old one."""
        parent = self.dir.parent
        parent.mkdir(parents=True, exist_ok=True)
        staging = parent / f".{self.notebook}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for name, df in self.tables.items():
            df.to_csv(staging / f"{name}.csv", index=not isinstance(df.index, pd.RangeIndex))
        self.usage.stop()
        doc = {"claims": self.claims, "provenance": self.provenance()}
        doc["sha256"] = digests(staging, doc["claims"])
        (staging / "claims.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        old = parent / f".{self.notebook}.old"
        shutil.rmtree(old, ignore_errors=True)
        if self.dir.exists():
            os.replace(self.dir, old)
        os.replace(staging, self.dir)
        shutil.rmtree(old, ignore_errors=True)
        self.written = doc
        return self.dir

    def provenance_markdown(self) -> str:
        """A small MyST admonition with the provenance finish() wrote (profile, seeds, commit, wall time, rebuilt stages)."""
        p = self.written["provenance"] if hasattr(self, "written") else self.provenance()
        m, st = p["machine"], p.get("stages")
        cache = f" ({st['loaded_from_cache']} of {st['loaded_from_cache'] + st['computed']} trained stages loaded from cache)" if st else ""
        changed = ", ".join(f"{k}={v!r}" for k, v in p.get("non_default", {}).items())
        rebuilt = f"\n\n**Non-default parameters:** {changed}." if changed else ""
        rebuilt += "".join(f"\n\n**Rebuilt:** {e['kind']}: {e['why']}" for e in (st or {}).get("rebuilt", []))
        where = self.dir.relative_to(project_root()) if self.dir.is_relative_to(project_root()) else self.dir
        return (
            "```{admonition} Provenance\n:class: note\n"
            f"Profile **{p['profile']}**, seeds {p['seeds']}, commit `{p['git_commit'][:12]}"
            f"{'+dirty' if p['git_commit'].endswith('+dirty') else ''}`, "
            f"started {p['started_at']}, wall time {p['wall_seconds']:.0f} s{cache} on {m['processor']} "
            f"({m['cpu_count']} CPUs, torch {p['libraries']['torch']}; "
            f"{kernels.describe(p['matmul']) if p.get('matmul') else 'fp32 matmul: not recorded'}). "
            f"Result files: `{where}/`.{rebuilt}\n```"
        )


CLAIMS_KEY = "claims"  # the digest of claims.json's own claims, beside those of the tables


def digests(folder: Path, claims: dict[str, Any], names: list[str] | None = None) -> dict[str, str]:
    """SHA-256 of each CSV table in `folder` (or of `names`) and of the claims, as a run records them."""
    names = names if names is not None else sorted(p.name for p in folder.glob("*.csv")) + [CLAIMS_KEY]
    out = {}
    for name in names:
        if name == CLAIMS_KEY:
            out[name] = hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).hexdigest()
        elif (folder / name).is_file():
            out[name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    return out


@dataclass
class PageResults:
    """What one page's last run wrote for a profile: its claims, provenance and tables."""

    page: str
    profile: str
    dir: Path

    @property
    def exists(self) -> bool:
        """Whether the page has been run for this profile."""
        return (self.dir / "claims.json").exists()

    @cached_property
    def doc(self) -> dict[str, Any]:
        """The whole claims.json: {"claims": ..., "provenance": ...}."""
        path = self.dir / "claims.json"
        if not path.exists():
            raise FileNotFoundError(f"no results of {self.page} for profile {self.profile}: {path} is missing; "
                                    f"run `python -m redlib run {self.page} -p profile {self.profile}`")
        try:
            doc = json.loads(path.read_text())
        except ValueError as err:
            raise ResultFileError(f"{path} is not valid JSON ({err}); re-run {self.page} to write it again") from None
        self._verify(doc, path)
        return doc

    def _verify(self, doc: dict[str, Any], path: Path) -> None:
        expected = doc.get("sha256") if isinstance(doc.get("sha256"), dict) else {}
        unsigned = [n for n in [CLAIMS_KEY, *sorted(p.name for p in self.dir.glob("*.csv"))] if n not in expected]
        if unsigned:
            what = ", ".join("its claims" if n == CLAIMS_KEY else n for n in unsigned)
            raise ResultFileError(f"{path} has no SHA-256 for {what} (the run records one for its claims and every "
                                  f"table): it was changed by hand; restore it (git checkout) or re-run {self.page}")
        found = digests(self.dir, doc.get("claims", {}), names=list(expected))
        for name in expected:
            if found.get(name) != expected[name]:
                where = path if name == CLAIMS_KEY else self.dir / name
                raise ResultFileError(f"{where} was changed after the {self.page} run wrote it (its SHA-256 differs from "
                                      f"the one in {path.name}); restore it (git checkout) or re-run {self.page}")

    def verify(self) -> None:
        """Raise ResultFileError, naming the file, if a table or a claim was changed since the run wrote them."""
        _ = self.doc

    @property
    def claims(self) -> dict[str, dict[str, Any]]:
        """Claim id -> measurement."""
        return self.doc.get("claims", {})

    @property
    def provenance(self) -> dict[str, Any]:
        """Profile, seeds, parameters, commit, times, machine of the run."""
        return self.doc.get("provenance", {})

    def table(self, name: str) -> pd.DataFrame:
        """One of the page's CSV tables (checked against the digest its run recorded)."""
        path = self.dir / f"{name}.csv"
        if self.exists:
            self.verify()
        try:
            return pd.read_csv(path)
        except pd.errors.EmptyDataError:  # a table with no rows and no columns (e.g. no rates tried)
            return pd.DataFrame()
        except (OSError, ValueError) as err:
            raise ResultFileError(f"{path} cannot be read as a table ({type(err).__name__}: {err})") from None


def read(page: str, profile: str = "full", results_dir: str | os.PathLike = "results") -> PageResults:
    """The result files of `page` for `profile` under `results_dir` (relative to the repository root)."""
    return PageResults(page, profile, resolve_path(results_dir) / profile / page)
