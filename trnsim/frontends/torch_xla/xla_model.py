"""``torch_xla.core.xla_model`` (imported as ``xm``) on the CPU: the device is the CPU, ``mark_step`` cuts
the recorded graph, ``optimizer_step`` all-reduces gradients over the launch's ranks (gloo) then steps.

The computation is real (losses and the script's own checks are what CPU torch computes); only the time
printed is Trainium's.
"""
from __future__ import annotations

import atexit
import os
from typing import Any, List, Optional

from . import session as _session

REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX = "sum", "mul", "and", "or", "min", "max"
_DEVICE_TYPE = "TRN"   # what xla_device_hw() reports on a Trainium instance


def xla_device(n: Optional[int] = None, devkind: Optional[str] = None):
    """The device tensors go to: the CPU, where trnsim runs the real computation."""
    import torch
    return torch.device("cpu")


def xla_device_hw(device: Any = None) -> str:
    """The hardware type of the (simulated) device."""
    return _DEVICE_TYPE


def get_xla_supported_devices(devkind: Optional[str] = None, max_devices: Optional[int] = None) -> List[str]:
    """The devices of this process (one NeuronCore per rank)."""
    return ["xla:0"]


def _dist():
    import torch.distributed as dist
    return dist if dist.is_available() and dist.is_initialized() else None


def xrt_world_size(defval: int = 1) -> int:
    """Ranks of the launch (torchrun's WORLD_SIZE, or the process group's size)."""
    d = _dist()
    if d is not None:
        return d.get_world_size()
    return int(os.environ.get("WORLD_SIZE", defval) or defval)


def world_size() -> int:
    """Same as ``xrt_world_size``."""
    return xrt_world_size()


def get_ordinal(defval: int = 0) -> int:
    """This process's global rank."""
    d = _dist()
    if d is not None:
        return d.get_rank()
    return int(os.environ.get("RANK", defval) or defval)


def get_local_ordinal(defval: int = 0) -> int:
    """This process's rank on its instance."""
    return int(os.environ.get("LOCAL_RANK", defval) or defval)


def is_master_ordinal(local: bool = True) -> bool:
    """True on the (local) rank 0."""
    return (get_local_ordinal() if local else get_ordinal()) == 0


def master_print(*args, fd=None, **kwargs) -> None:
    """``print`` on the master rank only."""
    if is_master_ordinal(local=False):
        print(*args, file=fd, **kwargs) if fd is not None else print(*args, **kwargs)


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """End of a graph: trnsim costs what ran since the last one and prints the estimated step."""
    _session.mark_step()


def wait_device_ops(devices: Any = None) -> None:
    """Nothing to wait for: the CPU ran every op already."""


def init_default_group() -> None:
    """The group ``xm`` collectives use when the script made none: gloo over torchrun's environment,
    destroyed at exit (a gloo group left to interpreter teardown can abort the rank: its worker
    threads are destructed while joinable, "terminate called without an active exception")."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="env://")
        atexit.register(_destroy_default_group)


def _destroy_default_group() -> None:
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()


def _group():
    """The process group to reduce over; under torchrun without ``init_process_group`` one is made (gloo)."""
    import torch.distributed as dist
    if xrt_world_size() <= 1:
        return None
    if not dist.is_initialized():
        init_default_group()
    return dist.group.WORLD


def all_reduce(reduce_type: str, inputs, scale: float = 1.0, groups=None, pin_layout: bool = True):
    """All-reduce a tensor (returned) or a list of tensors (reduced in place) over the launch's ranks."""
    import torch
    import torch.distributed as dist
    single = isinstance(inputs, torch.Tensor)
    ts = [inputs] if single else list(inputs)
    if _group() is not None and ts:
        op = {REDUCE_SUM: dist.ReduceOp.SUM, REDUCE_MUL: dist.ReduceOp.PRODUCT, REDUCE_MIN: dist.ReduceOp.MIN,
              REDUCE_MAX: dist.ReduceOp.MAX, REDUCE_AND: dist.ReduceOp.BAND,
              REDUCE_OR: dist.ReduceOp.BOR}[reduce_type]
        if single:
            inputs = inputs.clone()
            ts = [inputs]
        flat = torch._utils._flatten_dense_tensors(ts)   # one collective, as the XLA bridge buckets them
        dist.all_reduce(flat, op=op)
        for t, r in zip(ts, torch._utils._unflatten_dense_tensors(flat, ts)):
            t.copy_(r)
    if scale != 1.0:
        for t in ts:
            t.mul_(scale)
    return ts[0] if single else None


def reduce_gradients(optimizer, groups=None, pin_layout: bool = True) -> None:
    """Average every parameter gradient over the ranks (what ``optimizer_step`` does before stepping)."""
    n = xrt_world_size()
    if n <= 1:
        return
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    if grads:
        all_reduce(REDUCE_SUM, grads, scale=1.0 / n)


def optimizer_step(optimizer, barrier: bool = False, optimizer_args: Optional[dict] = None, groups=None,
                   pin_layout: bool = True):
    """Reduce gradients over the ranks, run ``optimizer.step``; with ``barrier`` also ``mark_step``."""
    s = _session.current()
    rec = s.recorder if s is not None else None
    if rec is not None:
        from .recorder import grad_counts
        rec.mark_optimizer(*grad_counts(optimizer))
        rec.in_optimizer = True
    try:
        reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
        loss = optimizer.step(**(optimizer_args or {}))
    finally:
        if rec is not None:
            rec.in_optimizer = False
    if barrier:
        mark_step()
    return loss


def rendezvous(tag: str, payload: bytes = b"", replicas: Optional[list] = None) -> List[bytes]:
    """Wait for every rank (a barrier); returns the payloads of all ranks when there are several."""
    import torch.distributed as dist
    if _group() is None:
        return [payload]
    out: List[Any] = [None] * xrt_world_size()
    dist.all_gather_object(out, payload)
    return out


def save(data, file_or_path, master_only: bool = True, global_master: bool = False) -> None:
    """``torch.save`` on the master rank (tensors are already on the CPU)."""
    import torch
    if not master_only or is_master_ordinal(local=not global_master):
        torch.save(data, file_or_path)


def mesh_reduce(tag: str, data, reduce_fn):
    """Gather ``data`` from every rank and reduce it with ``reduce_fn`` (a Python function)."""
    return reduce_fn(rendezvous(tag, data))
