"""The small stages of a seed trained side by side in worker processes, before the page asks for them.

`prefetch` hands every job not cached yet to `parallel.worker_count()` processes, each once the jobs it comes
`after` are done; each worker trains its job exactly as the page would (`stages.Stages`), into the shared stage
cache, and the page then loads it: the same bits as a serial run, in less wall time. Nothing here changes a number.
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
    workers = parallel.worker_count()
    if workers <= 1 or st.device.type != "cpu":
        return
    unit = lambda job: (job[0], 0) if job[0] in STACKED else job  # noqa: E731  (a stacked kind trains as one job)
    todo = list(dict.fromkeys(unit(j) for j in jobs if not st.cached(j)))
    if not todo:
        return
    after = {unit(j): list(dict.fromkeys(unit(d) for d in deps)) for j, deps in after.items()}
    context = {"cfg": st.cfg, "data": st.data, "seed": st.seed, "key": st.key, "dim": st.dim, "head": st.head,
               "root": str(st.store.root), "lrs": st.lrs}
    parallel.map_pieces(_train_job, context, todo, st.store, workers, f"seed {st.seed}: stages", after,
                        threads=parallel.STAGE_THREADS)


def _train_job(context: dict, job: Job, store: Store) -> None:
    """In a worker: train (or load) one small stage into the shared cache (for a stacked kind, every domain's stage
    of that kind). The store keeps only the job's own events (loading its inputs is not one)."""
    seen = len(store.events)  # a single job runs in the caller's own store
    st = Stages(context["cfg"], context["data"], None, store, context["seed"], context["key"], context["dim"],
                context["lrs"])
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
