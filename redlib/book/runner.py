"""Execute notebooks (validate parameters -> jupytext -> papermill) and build the book (jupyter-book, strict)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..core.config import PROFILES, ParameterError
from ..core.paths import project_root, resolve_path
from .registry import NOTEBOOKS, PAGES, config_for, render_toc

BOOK_FILES = ("_config.yml",)  # _toc.yml is written from the page registry


def stage_dir(profile: str) -> Path:
    """The book source folder a profile's executed notebooks go to: the repo for full, _build/smoke for smoke."""
    if profile not in PROFILES:
        raise ParameterError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}")
    root = project_root()
    return root if profile == "full" else root / "_build" / profile


def parse_params(notebook: str, pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Command-line `-p name value` pairs -> typed parameters, validated against the notebook's config."""
    cls = config_for(notebook)
    params = {name: cls.coerce(name, text) for name, text in pairs}
    cls.from_params(**params)  # names, types, ranges and orderings; `execute` checks this machine before any kernel
    return params


def scratch_dir(kind: str, profile: str) -> Path:
    """Where runs in progress ("running") and failed runs ("failed") keep their notebooks: under _build/, per profile."""
    path = project_root() / "_build" / kind / profile
    path.mkdir(parents=True, exist_ok=True)
    return path


def published() -> tuple[Path, Path]:
    """The published book's folders, as they are on disk (links and `..` resolved): book/ and results/."""
    root = project_root().resolve()
    return root / "book", root / "results"


def _within(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def outside_published(path: Path, what: str, hint: str) -> Path:
    """`path` resolved through `..` and links; a one-line error if it lands in book/ or under results/."""
    real = path.expanduser().resolve()
    for folder in published():
        if _within(real, folder):
            shown = f"{str(path)!r}" + ("" if str(path) == str(real) else f" (that is {str(real)!r})")
            raise ParameterError(f"{what} {shown} lies in the published {folder.name}/: {hint}")
    return real


def _encodable(path: str | os.PathLike, what: str) -> None:
    """One-line error for a path the file system cannot name in UTF-8 (a run would crash only when it writes)."""
    try:
        os.fsdecode(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ParameterError(f"{what} {os.fsdecode(path)!r} is not valid UTF-8: name a path in UTF-8") from None


def check_file(path: str | os.PathLike, suffix: str, what: str) -> Path:
    """An output file path that can be written: UTF-8, the right suffix, not a folder, in a folder that exists."""
    _encodable(path, what)
    p = Path(path).expanduser().resolve()
    if p.is_dir() or p.suffix != suffix:
        raise ParameterError(f"{what} {str(path)!r} must be a {suffix} file path (not a folder)")
    if not p.parent.is_dir():
        raise ParameterError(f"{what} {str(path)!r}: folder {str(p.parent)!r} does not exist")
    if not os.access(p.parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ParameterError(f"{what} {str(path)!r} cannot be written (folder {str(p.parent)!r} is read-only)")
    return p


def writable_folder(path: Path, what: str) -> None:
    """One-line error unless `path` is (or can be made in) a folder this user may write to: checked before any work."""
    _encodable(path, what)
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ParameterError(f"{what} {str(path)!r}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ParameterError(f"{what} {str(path)!r}: folder {str(existing)!r} is not writable")


def placement(notebook: str, params: dict[str, Any], output: str | None, publish: bool) -> dict[str, Any]:
    """Where a run writes, checked before any work; returns the parameters with results_dir set for --output.

    With --output FILE.ipynb the results go beside it (FILE's folder/results/) unless results_dir is given.
    Without it the run replaces the profile's page (book/ for full); a full run whose parameters differ from
    the profile's defaults does that only with --publish, so the published book changes only when asked.
    """
    if not str(params.get("results_dir", "results")).strip():
        raise ParameterError("results_dir is empty: name a folder (results go to <results_dir>/<profile>/<notebook>/)")
    cfg = config_for(notebook).from_params(**params)
    cfg.preflight()  # this machine's answer (device, folders) comes before any word about where the run writes
    published_results = published()[1]
    if output is not None:
        out = check_file(output, ".ipynb", "--output")
        outside_published(Path(output), "--output", "leave --output out to replace the published page (with "
                          "--publish when its parameters differ from the profile's), or write the notebook elsewhere")
        params = {"results_dir": str(out.parent / "results"), **params}
    given = resolve_path(params.get("results_dir", "results"))
    results = given.resolve()
    writable_folder(results, "results_dir")
    if results != published_results:
        outside_published(given, "results_dir", "name results (the published results, or results/smoke for the "
                          "smoke profile) or a folder outside results/ and book/")
    is_published = results == published_results
    changed = cfg.non_default()  # where results go is not one of the parameters it compares
    published_page = cfg.profile == "full" and output is None
    if published_page and not is_published and not publish:
        raise ParameterError(
            f"results_dir {str(results)!r} is not the published results/: this run would replace the published "
            f"{notebook} page with one that reads results from elsewhere; pass --output FILE.ipynb to write the page "
            "elsewhere too, or --publish to replace the published page")
    if cfg.profile == "full" and output is not None and is_published and not publish:
        raise ParameterError(
            f"results_dir {str(results)!r} is the published results/: this run would replace the published {notebook} "
            "results while its page goes to --output; leave results_dir out (results go beside --output), or pass "
            "--publish")
    if cfg.profile == "full" and changed and not publish and output is None:
        raise ParameterError(
            f"parameters {', '.join(f'{k}={v!r}' for k, v in changed.items())} differ from the full profile's defaults: "
            f"this run would replace the published {notebook} page; pass --output FILE.ipynb to write elsewhere "
            "(results go beside it), or --publish to replace the published page")
    return params


def source_of(notebook: str) -> Path:
    """The py:percent source of a notebook."""
    path = project_root() / "notebooks" / f"{notebook}.py"
    if not path.exists():
        raise FileNotFoundError(f"notebook source {path} is missing")
    return path


def execute(notebook: str, params: dict[str, Any], output: Path | None = None, progress: bool = True) -> Path:
    """Run one notebook with papermill; the executed copy replaces `output` only if the run succeeds."""
    cls = config_for(notebook)
    cfg = cls.from_params(**params)
    cfg.preflight()  # before the heavy imports below: a bad folder is rejected in a second
    cfg.require_results()
    import jupytext
    import papermill as pm

    output = Path(output) if output else stage_dir(cfg.profile) / "book" / f"{notebook}.ipynb"
    output.parent.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(source_of(notebook))
    # a run in progress and a failed run live outside every folder the book or nbval reads
    partial, failed = (scratch_dir(kind, cfg.profile) / f"{notebook}.ipynb" for kind in ("running", "failed"))
    log = partial.with_suffix(".kernel.log")  # what the kernel process itself prints (cell outputs go to the notebook)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{notebook}.ipynb"
        jupytext.write(nb, src)
        start = time.time()
        try:
            pm.execute_notebook(str(src), str(partial), parameters=params, kernel_name="python3",
                                cwd=str(project_root()), progress_bar=progress, log_output=False,
                                kernel_manager_class=_ipc_kernel_manager(Path(tmp) / "kernel-ipc", log))
        except pm.PapermillExecutionError as err:
            os.replace(partial, failed)
            raise RuntimeError(f"{notebook} failed in cell {err.exec_count}: {err.ename}: {err.evalue} "
                               f"(the executed notebook is kept at {failed}; the published one is unchanged)") from None
    _finish_notebook(partial, notebook, output)
    os.replace(partial, output)
    print(f"{notebook}: executed in {time.time() - start:.0f} s -> {output}", file=sys.stderr)
    report_stages(notebook, cfg)
    return output


def report_stages(notebook: str, cfg) -> None:
    """Say on the terminal what the run's stage cache did: loaded, computed, and what was rebuilt and why."""
    from .results import read

    res = read(notebook, cfg.profile, cfg.results_dir)
    st = res.provenance.get("stages") if res.exists else None
    if st:
        print(f"{notebook}: {st['loaded_from_cache']} stages loaded from the cache, {st['computed']} computed",
              file=sys.stderr)
        for e in st.get("rebuilt", []):
            print(f"{notebook}: rebuilt {e['kind']}: {e['why']}", file=sys.stderr)


def _ipc_kernel_manager(prefix: Path, log: Path) -> type:
    """A kernel manager that talks to the kernel over local IPC sockets (no TCP port, no plain-text warning), whose
    socket files live at `prefix`-N in the run's temporary folder (never in the project, even if the run is killed),
    and whose own stdout/stderr (not the cells' outputs) go to `log` rather than the terminal."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            super().__init__(transport="ipc", ip=str(prefix), **kwargs)

        async def start_kernel(self, **kwargs):
            with log.open("w") as out:  # the kernel holds its own copy of the file once started
                kwargs.setdefault("stdout", out)
                kwargs.setdefault("stderr", out)
                return await super().start_kernel(**kwargs)

    return IPCKernelManager


def _finish_notebook(path: Path, notebook: str, output: Path) -> None:
    """Tidy an executed notebook before it is placed: pages whose parameters cell is tagged remove-cell get
    papermill's injected cell removed from the book too, and papermill's record of where the run read and wrote
    holds paths relative to the project, never this machine's folders."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    if any("parameters" in t and "remove-cell" in t for t in tags):
        for cell, t in zip(nb.cells, tags):
            if "injected-parameters" in t and "remove-cell" not in t:
                cell.metadata["tags"] = [*t, "remove-cell"]
    pm_meta = nb.metadata.get("papermill", {})
    root = project_root()
    out = output.resolve()
    pm_meta["input_path"] = f"notebooks/{notebook}.py"
    pm_meta["output_path"] = str(out.relative_to(root)) if out.is_relative_to(root) else out.name
    nbformat.write(nb, path)


def copy_book_sources(stage: Path) -> None:
    """Copy the book's config and its pages other than executed notebooks into `stage` (pages since removed go)."""
    root = project_root()
    (stage / "book").mkdir(parents=True, exist_ok=True)
    for old in (stage / "book").iterdir():  # pages removed from book/ since the last staging
        if old.suffix != ".ipynb" and not (root / "book" / old.name).exists():
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    for name in BOOK_FILES:
        shutil.copy2(root / name, stage / name)
    shutil.copytree(root / "_static", stage / "_static", dirs_exist_ok=True)  # the book's CSS
    for page in (root / "book").iterdir():
        if page.suffix != ".ipynb" and not page.name.startswith("."):
            dest = stage / "book" / page.name
            shutil.copytree(page, dest, dirs_exist_ok=True) if page.is_dir() else shutil.copy2(page, dest)


def stage_book(profile: str) -> Path:
    """Make the profile's book source folder: for smoke, a copy of the book's pages and config."""
    stage = stage_dir(profile)
    if stage != project_root():
        copy_book_sources(stage)
    return stage


def effective_config(config: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The book's configuration as built: without a repository URL, no repository link and no launch buttons."""
    if (config.get("repository") or {}).get("url"):
        return config, None
    config = {k: v for k, v in config.items() if k not in ("repository", "launch_buttons")}
    config["html"] = {**config.get("html", {}), "use_repository_button": False, "use_issues_button": False,
                      "use_edit_page_button": False}
    return config, ("repository.url is unset in _config.yml: the repository link and the Binder/Colab launch buttons "
                    "are left out of the book")


def build_html(stage: Path, quiet: bool = False) -> Path:
    """Strict jupyter-book build (nitpicky, warnings are errors) of a staged book, then a link check; returns index.html."""
    (stage / "_toc.yml").write_text(render_toc())
    config, warning = effective_config(yaml.safe_load((stage / "_config.yml").read_text()))
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    (stage / "_build").mkdir(exist_ok=True)
    (stage / "_build" / "_config.effective.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(stage), "--all", "-W", "-n", "--keep-going",
           "--config", str(stage / "_build" / "_config.effective.yml")]
    proc = subprocess.run(cmd, capture_output=quiet, text=True)
    if proc.returncode:
        lines = (proc.stdout + proc.stderr).splitlines() if quiet else []
        shown = [ln for ln in lines if "WARNING" in ln or "ERROR" in ln or "Error" in ln][:5] \
            or (lines[-3:] if quiet else ["see the warnings above"])
        raise RuntimeError(f"jupyter-book build of {stage} failed (exit {proc.returncode}): " + " | ".join(shown))
    from .linkcheck import broken_links

    html = stage / "_build" / "html"
    broken = broken_links(html)
    if broken:
        raise RuntimeError(f"{len(broken)} broken internal link(s) in {html}: " + "; ".join(broken[:10]))
    return html / "index.html"


def plan_lines(profile: str, cold: str = "") -> list[str]:
    """What `book` will do before it does it: the pages it executes, what the stage cache holds, and (`cold`, a line
    the bench's reader writes) what the pages cost from an empty cache."""
    from ..core.paths import cache_dir

    entries = sum(1 for _ in cache_dir().rglob("*.safetensors")) if cache_dir().is_dir() else 0
    return [f"book (profile {profile}): executes {len(NOTEBOOKS)} pages in order, then builds the HTML book",
            f"  stage cache {cache_dir()}: {entries} trained stages; a page whose stages are all there only loads them"
            + ("" if entries else " (empty: every stage trains)"), *([cold] if cold else []),
            "  quicker: `python -m redlib book --no-execute` (the committed experiment pages, the reading pages "
            "built from their results: a minute or two); "
            "`make book PROFILE=smoke` (tiny runs, minutes)"]


def verify_results(profile: str, results_dir: str = "results") -> None:
    """Every page's result files as its run wrote them (one-line ResultFileError naming a file changed by hand)."""
    from .results import read

    for page in PAGES:
        res = read(page.name, profile, results_dir)
        if res.exists:
            res.verify()


def build_book(profile: str = "full", execute_notebooks: bool = True, progress: bool = True) -> Path:
    """Execute every notebook with the profile, then build the HTML strictly; returns index.html. Without
    `execute_notebooks`, the experiment pages are taken as executed (the committed book) and only the reading pages,
    which are built and never committed, are executed from the results and the bench file."""
    stage = stage_book(profile)
    todo = list(NOTEBOOKS) if execute_notebooks else [p.name for p in PAGES if not p.trains]
    if not execute_notebooks:
        verify_results(profile)
    for k, notebook in enumerate(todo, 1):
        print(f"page {k} of {len(todo)}: {notebook}", file=sys.stderr)
        execute(notebook, {"profile": profile}, progress=progress)
    missing = [n for n in NOTEBOOKS if not (stage / "book" / f"{n}.ipynb").exists()]
    if missing:
        raise FileNotFoundError(f"executed notebooks missing in {stage / 'book'}: {', '.join(missing)}; run without --no-execute")
    warn_unlanded(profile)
    return build_html(stage)


def warn_unlanded(profile: str) -> None:
    """Say, when the book is built, which pages name a commit outside this checkout's history (amended, rebased,
    or never pushed): their provenance points at code no reader can check out."""
    from .results import in_history, named_commits

    away = {page: c[:12] for page, c in named_commits(profile).items() if in_history(c).startswith("no")}
    if away:
        print("warning: results name commits outside this checkout's history: "
              + ", ".join(f"{p} ({c})" for p, c in away.items()), file=sys.stderr)


PARAMETERS_CELL = re.compile(r"^# %% tags=\[\"parameters\"[^\n]*\n(.*?)\n\n# %%", re.S | re.M)


def write_parameters_cells() -> list[str]:
    """Rewrite each notebook's `parameters` cell from its config; the notebooks whose cell changed."""
    changed = []
    for notebook in NOTEBOOKS:
        path = source_of(notebook)
        text = path.read_text()
        cell = PARAMETERS_CELL.search(text)
        if cell is None:
            raise ValueError(f"{path} has no cell tagged 'parameters'")
        want = config_for(notebook).parameters_source()
        if cell.group(1) != want:
            path.write_text(text[:cell.start(1)] + want + text[cell.end(1):])
            changed.append(notebook)
    return changed
