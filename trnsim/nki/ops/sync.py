"""Cross-core synchronization for LNC=2: ``core_barrier`` and ``sendrecv`` (new API, gen3+).

The two logical cores run as threads (as the official simulator does); a failure on one core
releases the other's waits so a broken kernel never hangs (the Pallas ``fail_on_exception`` idea).
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import numpy as np

from ...errors import KernelError, LaunchError, ShapeError
from ..core import dtypes as dt
from ..core.context import current, region
from ..core import gates
from . import base
from .base import emit, read, tile, where

_TIMEOUT_S = 120.0


class _PeerFailed(KernelError):
    rule = "peer-core-failed"
    _trnsim_secondary = True


class CoreGroup:
    """The logical cores of one LNC launch: a barrier and send/receive pipes between threads."""
    def __init__(self, n: int):
        self.n = n
        self.barrier = threading.Barrier(n)
        self.cond = threading.Condition()
        self.mail: Dict[Tuple[int, int, int], list] = {}
        self.failed: Optional[BaseException] = None

    def fail(self, e: BaseException) -> None:
        """Release every waiting core after ``e`` (this core's failure)."""
        with self.cond:
            if self.failed is None:
                self.failed = e
            self.cond.notify_all()
        self.barrier.abort()

    def wait_barrier(self) -> None:
        """Block until every core of the group reaches the barrier."""
        try:
            self.barrier.wait(timeout=_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise _PeerFailed("the other logical core failed or never reached core_barrier",
                              where=where()) from None

    def send(self, key, value) -> None:
        """Post ``value`` on pipe ``key`` for the peer."""
        with self.cond:
            self.mail.setdefault(key, []).append(value)
            self.cond.notify_all()

    def recv(self, key):
        """Take the value the peer posted on pipe ``key`` (waiting for it)."""
        with self.cond:
            ok = self.cond.wait_for(lambda: self.mail.get(key) or self.failed is not None,
                                    timeout=_TIMEOUT_S)
            if self.failed is not None and not self.mail.get(key):
                raise _PeerFailed("the other logical core failed before sending", where=where())
            if not ok:
                raise KernelError("sendrecv: no matching send from the peer core (deadlock?)",
                                  rule="sendrecv-deadlock", value=key, where=where())
            return self.mail[key].pop(0)


def _group(ctx):
    g = getattr(ctx, "group", None)
    if g is None:
        raise LaunchError("core_barrier/sendrecv need an LNC=2 launch (kernel[2])",
                          rule="lnc-sync", where=where())
    return g


def core_barrier(data=None, cores=(0, 1), engine=None) -> None:
    """``core_barrier``: both logical cores meet here (NeuronCore-v3 and later)."""
    ctx = current()
    gates.require(ctx, "core_barrier")  # logical cores (LNC) exist from NeuronCore-v3
    g = _group(ctx)
    ctx.record(str(base.engine_name(engine, "gpsimd")), "core_barrier", [], [], 1, 1, "-", "-",
               (("cores", tuple(cores)),))
    g.wait_barrier()


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None) -> None:
    """Send ``src`` to the peer core while receiving its ``src`` into ``dst`` (DMA)."""
    ctx = current()
    g = _group(ctx)
    s = tile(ctx, src, "src", "sendrecv", "dma", memories=("sbuf",))
    d = base.need_tensor(dst, "dst", "sendrecv")
    limit = {4: 1024, 2: 512, 1: 256}.get(s.itemsize, 1024)
    per_part = s.size // s.shape[0] * s.itemsize
    # the per-partition size limit is the GpSimd DMA's (dma_engine.gpsimd_dma) [ISA sendrecv]
    if getattr(dma_engine, "name", dma_engine) == "gpsimd_dma" and per_part > limit:
        raise KernelError(f"sendrecv moves {per_part} B per partition", rule="sendrecv-size",
                          limit=f"{limit} B", value=per_part, where=where())
    v, init = read(ctx, s, "sendrecv")
    g.send((ctx.core_id, int(send_to_rank), int(pipe_id)), (np.array(v, copy=True), init))
    got, ginit = g.recv((int(recv_from_rank), ctx.core_id, int(pipe_id)))
    base.emit(ctx, dst=d, values=got.reshape(d.shape) if ctx.numerics else None,
              init=None if ginit is None else ginit.reshape(d.shape), out_shape=d.shape,
              out_dtype=d.dtype, mask=None, engine="dma", opcode="sendrecv", reads=[s],
              attrs=(("peer", int(send_to_rank)),))


def register_load(reg, src) -> None:
    """A runtime register <- the single value of a 1-element HBM/SBUF tensor."""
    ctx = current()
    t = base.need_tensor(src, "src", "register_load")
    if t.size != 1:
        raise ShapeError(f"register_load reads a 1-element tensor, got shape {t.shape}",
                         rule="register-load-shape", limit=1, value=t.size, where=where())
    if t._st.memory == "psum":
        raise KernelError("register_load reads HBM or SBUF, not PSUM", rule="register-load-memory",
                          limit="hbm or sbuf", value="psum", where=where())
    v, init = read(ctx, t, "register_load")
    if init is not None and not np.asarray(init).all():
        ctx.report_uninit(f"register_load reads never-written '{t.name}'",
                          rule="uninitialized-register")
    val = np.asarray(v).reshape(-1)[0]
    if val.dtype.kind == "f" or t.dtype in dt.LOW_PRECISION_FLOATS:
        fv = float(np.float32(val))
        val = 0 if not np.isfinite(fv) else int(fv)
    reg._set(int(val))
    ctx.record("sync", "register_load", [region(t)], [], 1, 1, dt.name(t.dtype), "int32")


def register_store(dst, value: int):
    """A 1-element HBM/SBUF tensor <- a register value."""
    ctx = current()
    d = base.need_tensor(dst, "dst", "register_store")
    if d.size != 1:
        raise ShapeError(f"register_store writes a 1-element tensor, got shape {d.shape}",
                         rule="register-store-shape", limit=1, value=d.size, where=where())
    vals = np.full(d.shape, int(value), dtype=np.int64) if ctx.numerics else None
    return emit(ctx, dst=d, values=vals, init=None, out_shape=d.shape, out_dtype=d.dtype, mask=None,
                engine="sync", opcode="register_store", reads=[], dtype_in="int32")
