"""The small stages of a seed (or of several runs) trained side by side in worker processes, before the page asks
for them.

`prefetch` hands every job not cached yet to `parallel.worker_count()` processes, each once the jobs it comes
`after` are done; each worker trains its job exactly as the page would (`stages.Stages`), into the shared stage
cache, and the page then loads it: the same bits as a serial run, in less wall time. `prefetch_runs` does it for several runs in one pool, so that the
workers stay busy across runs. Nothing here changes a number.
"""

from __future__ import annotations

from ..core.store import Store
from ..speed import parallel
from .jobs import STACKED
from .stages import Stages
from .types import Job


def prefetch(st: Stages, jobs: list[Job], after: dict[Job, list[Job]]) -> None:
    """Train the jobs that are not cached in `parallel.worker_count()` processes (on CPU, when > 1), side by side,
    each once the jobs it comes `after` are done, the first ready in `jobs` first; `st.get` then loads them."""
    prefetch_runs([(st, jobs, after)], st.store, f"seed {st.seed}: stages")


Plan = tuple[Stages, list[Job], dict[Job, list[Job]]]  # a run's stages (stage 1 and features done), jobs, their order


def prefetch_runs(plans: list[Plan], store: Store, desc: str = "small stages") -> None:
    """`prefetch` of several runs at once, in one pool, what the workers did recorded in `store`: a worker that finishes one run's jobs takes up another run's
    instead of waiting while a long stage of the first trains. Jobs start by their place in their run's list, the
    runs in turn at each place (every run's first job, then every run's second, ...), so the longest chains start
    first; each job seeds itself, so the bits do not depend on the order."""
    workers = parallel.worker_count()
    if workers <= 1 or any(st.device.type != "cpu" for st, _, _ in plans):
        return
    unit = lambda job: (job[0], 0) if job[0] in STACKED else job  # noqa: E731  (a stacked kind trains as one job)
    places: list[tuple[int, int, tuple[int, Job]]] = []
    deps: dict[tuple[int, Job], list[tuple[int, Job]]] = {}
    for r, (st, jobs, after) in enumerate(plans):
        todo = list(dict.fromkeys(unit(j) for j in jobs if not st.cached(j)))
        places += [(place, r, (r, job)) for place, job in enumerate(todo)]
        for job, before in after.items():
            deps[r, unit(job)] = [(r, d) for d in dict.fromkeys(unit(d) for d in before)]
    if not places:
        return
    contexts = [{"cfg": st.cfg, "data": st.data, "seed": st.seed, "key": st.key, "dim": st.dim, "head": st.head,
                 "settings": st.settings} for st, _, _ in plans]
    pieces = [piece for _, _, piece in sorted(places, key=lambda p: p[:2])]
    parallel.map_pieces(_train_run_job, contexts, pieces, store, workers, desc, deps,
                        threads=parallel.STAGE_THREADS)


def _train_run_job(contexts: list[dict], piece: tuple[int, Job], store: Store) -> None:
    """In a worker: the job of one run (`piece`: the run's place in `contexts`, the job)."""
    run, job = piece
    _train_job(contexts[run], job, store)


def _train_job(context: dict, job: Job, store: Store) -> None:
    """In a worker: train (or load) one small stage into the shared cache (for a stacked kind, every domain's stage
    of that kind). The store keeps only the job's own events (loading its inputs is not one)."""
    seen = len(store.events)  # a single job runs in the caller's own store
    st = Stages(context["cfg"], context["data"], None, store, context["seed"], context["key"], context["dim"],
                context["settings"])
    st.head = context["head"].requires_grad_(False)
    st.features()
    if job[0] in STACKED:
        st.stack(job[0])  # the features and the inputs load first; the stack's entries come last, one per domain
        own = [e for e in store.events[seen:] if e["event"] != "loaded" and e["kind"] == st.kind(job[0])]
    else:
        st.get(job)  # the features and the job's inputs load first; the job's own entry comes last
        own = store.events[-1:]
    store.events[seen:] = own  # loading its inputs is not this job's event (and the caller's earlier events stay)
    store.mark_merged(own)  # run in the caller's store: its later load of the entry is not a new event
