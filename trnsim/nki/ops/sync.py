"""Cross-core synchronization for LNC=2: ``core_barrier`` and ``sendrecv`` (new API, gen3+).

The two logical cores run as threads (as the official simulator does); a failure on one core
releases the other's waits so a broken kernel never hangs (the Pallas ``fail_on_exception`` idea).
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import numpy as np

from ...errors import GenerationError, KernelError, LaunchError
from ..core.context import current
from ..core.tensor import NkiTensor
from . import base
from .base import read, tile, where

_TIMEOUT_S = 120.0


class _PeerFailed(KernelError):
    rule = "peer-core-failed"
    _trnsim_secondary = True


class CoreGroup:
    def __init__(self, n: int):
        self.n = n
        self.barrier = threading.Barrier(n)
        self.cond = threading.Condition()
        self.mail: Dict[Tuple[int, int, int], list] = {}
        self.failed: Optional[BaseException] = None

    def fail(self, e: BaseException) -> None:
        with self.cond:
            if self.failed is None:
                self.failed = e
            self.cond.notify_all()
        self.barrier.abort()

    def wait_barrier(self) -> None:
        try:
            self.barrier.wait(timeout=_TIMEOUT_S)
        except threading.BrokenBarrierError:
            raise _PeerFailed("the other logical core failed or never reached core_barrier",
                              where=where()) from None

    def send(self, key, value) -> None:
        with self.cond:
            self.mail.setdefault(key, []).append(value)
            self.cond.notify_all()

    def recv(self, key):
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
    ctx = current()
    if ctx.spec.generation < 3:
        raise GenerationError("core_barrier needs NeuronCore-v3 or newer (LNC)", rule="lnc-generation",
                              limit="gen3+", value=ctx.spec.nc_version, where=where())
    g = _group(ctx)
    ctx.record(base.engine_name(engine, "gpsimd"), "core_barrier", [], [], 1, 1, "-", "-",
               (("cores", tuple(cores)),))
    g.wait_barrier()


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None) -> None:
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
