"""Where the planner's batches run: in this process, on a local process pool, or on Ray.

Every backend returns the same list of results in the order of the batches it was given (completion
order only drives the progress bar), so the ranking never depends on which backend or how many workers.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, List, Optional, Sequence

from ..lifetime import die_with_parent, install_signal_handlers, kill_processes, on_exit
from .errors import PlanError
from .evaluate import Evaluated, Job, evaluate_batch
from .rules import Config

BACKENDS = ("local", "ray")
Progress = Callable[[int, int, str], None]   # (configs done, configs total, label)
RAY_HINT = "pip install 'trnsim[ray]'"


def default_workers() -> int:
    """The number of CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


def check_backend(backend: str, workers: Optional[int]) -> int:
    """Validate the backend name and worker count; returns the worker count to use."""
    if backend not in BACKENDS:
        raise PlanError(f"unknown planner backend {backend!r}", rule="plan-backend", limit=BACKENDS, value=backend)
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise PlanError("--workers must be a positive integer", rule="plan-workers", limit=">= 1", value=workers)
    return workers or default_workers()


def run_batches(job: Job, batches: Sequence[Sequence[Config]], backend: str, workers: int,
                progress: Optional[Progress] = None) -> List[List[Evaluated]]:
    """Evaluate every batch on ``backend`` with ``workers`` workers; results in batch order."""
    total = sum(len(b) for b in batches)
    if backend == "ray":
        return _ray(job, batches, workers, progress, total)
    if workers == 1 or len(batches) <= 1:
        out, done = [], 0
        for b in batches:
            out.append(evaluate_batch(job, b))
            done += len(b)
            if progress:
                progress(done, total, "estimating")
        return out
    return _pool(job, batches, workers, progress, total)


_POOL: dict = {}   # workers -> the live ProcessPoolExecutor of the plan in progress (see _executor)


def _executor(workers: int) -> ProcessPoolExecutor:
    """A process pool of ``workers`` for one plan.  Not kept between plans: forked workers inherit the
    parent's warm caches anyway, and a kept pool would serve a later plan with state (data files,
    settings) the parent has since changed."""
    pool = _POOL.get(workers)
    if pool is None:
        # fork where the platform has it (workers start in milliseconds and inherit the warm catalog);
        # spawn elsewhere, which works too because every task is a module-level function
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        for old in _POOL.values():
            old.shutdown(wait=False, cancel_futures=True)
        _POOL.clear()
        # every worker dies with this process, even when it is killed with SIGKILL
        pool = _POOL[workers] = ProcessPoolExecutor(max_workers=workers,
                                                    mp_context=multiprocessing.get_context(method),
                                                    initializer=die_with_parent, initargs=(os.getpid(),))
    return pool


def shutdown_pool(kill: bool = False) -> None:
    """Stop the kept process pool (a later plan starts a new one); ``kill``: at once, without waiting
    for the batches in flight (an interrupted or failed plan)."""
    for pool in _POOL.values():
        if kill:
            kill_processes((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=True, cancel_futures=True)
    _POOL.clear()


atexit.register(shutdown_pool)


def _pool(job: Job, batches, workers: int, progress, total: int) -> List[List[Evaluated]]:
    out: List[Optional[List[Evaluated]]] = [None] * len(batches)
    done = 0
    pool = _executor(workers)
    try:
        futs = {pool.submit(evaluate_batch, job, list(b)): i for i, b in enumerate(batches)}
        for f in as_completed(futs):
            i = futs[f]
            out[i] = f.result()
            done += len(batches[i])
            if progress:
                progress(done, total, "estimating")
    except BrokenProcessPool:
        shutdown_pool(kill=True)   # a worker died (killed, out of memory): the next plan starts a fresh pool
        raise PlanError("a planner worker process died", rule="plan-backend", value=workers,
                        hint="retry with fewer --workers, or --workers 1") from None
    except BaseException:
        shutdown_pool(kill=True)   # interrupted: do not leave queued or running batches behind
        raise
    shutdown_pool()
    return out  # type: ignore[return-value]


def import_ray():
    """The ``ray`` module, or a PlanError saying how to install it."""
    try:
        import ray  # type: ignore
    except ImportError:
        raise PlanError("the Ray backend needs the optional extra 'ray', which is not installed",
                        rule="plan-backend", limit="ray installed", value="ray", hint=RAY_HINT) from None
    return ray


def ray_init(workers: int):
    """Connect to Ray: the cluster at ``RAY_ADDRESS`` when set, else a local Ray with ``workers`` CPUs
    (an already-initialised Ray is reused as it is)."""
    ray = import_ray()
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS") or None
        kw = dict(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False,
                  configure_logging=False)
        if address is None:
            kw["num_cpus"] = workers
        else:
            _check_reachable(address)
        try:
            ray.init(address=address, **kw)
        except Exception as e:  # ray raises plain ConnectionError / RuntimeError for a bad address
            raise PlanError(f"cannot start or reach Ray ({type(e).__name__}: {e})", rule="plan-backend",
                            value=address or "local", hint="unset RAY_ADDRESS for a local Ray, or start the "
                            "cluster with `ray start --head`") from None
        # Ray's fatal-signal handlers print a C++ stack on SIGTERM: ours end the run with one line, and
        # the Ray this run started (or joined) is shut down however the run ends
        install_signal_handlers()
        on_exit(ray.shutdown)
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``host:port`` (or ``ray://host:port``) nobody listens on: Ray itself retries for
    minutes before it gives up.  Other forms ("auto", "local") are left to Ray."""
    import socket
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise PlanError(f"no Ray cluster answers at RAY_ADDRESS={address} ({e})", rule="plan-backend",
                        value=address, hint="start it with `ray start --head`, or unset RAY_ADDRESS for a "
                        "local Ray") from None


def _ray(job: Job, batches, workers: int, progress, total: int) -> List[List[Evaluated]]:
    ray = ray_init(workers)
    task = ray.remote(num_cpus=1)(evaluate_batch)
    job_ref = ray.put(job)
    refs = [task.remote(job_ref, list(b)) for b in batches]
    index = {r: i for i, r in enumerate(refs)}
    out: List[Optional[List[Evaluated]]] = [None] * len(batches)
    pending, done = list(refs), 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for r in ready:
            i = index[r]
            out[i] = ray.get(r)
            done += len(batches[i])
            if progress:
                progress(done, total, "estimating on Ray")
    return out  # type: ignore[return-value]
