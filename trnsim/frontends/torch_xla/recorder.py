"""Record every aten call a script executes between two ``mark_step``s, as torch_xla would trace it.

A ``TorchDispatchMode`` entered once for the whole run sees forward, backward (the autograd engine runs
CPU backward on the calling thread) and optimizer ops.  Recording must stay cheap (the target is < 1.5x
the plain CPU run), so each call keeps only shapes, dtypes, integer arguments and the innermost user
frame; turning calls into ``CapturedOp`` records happens once per distinct graph, not per step.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from ..torch.records import TensorSpec, dtype_name, is_library_file

FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "optimizer"
_SKIP_NS = ("profiler",)   # record_function markers: bookkeeping, no work
OPTIMIZER_MARK = "trnsim::optimizer_step"   # a pseudo-call: the parameters xm.optimizer_step updated


@dataclass(frozen=True)
class Call:
    """One executed operator: the overload, argument specs, outputs, phase and the user's line."""
    func: Any                       # torch OpOverload
    args: Tuple[Any, ...]           # TensorSpec, tuples of them, or plain values
    kwargs: Tuple[Tuple[str, Any], ...]
    outputs: Tuple[TensorSpec, ...]
    phase: str
    loc: Optional[Tuple[str, int, str]]   # (file, line, function) of the innermost user frame

    def key(self) -> tuple:
        """What makes two calls the same graph node: the op, shapes, dtypes and non-float arguments
        (Python floats such as a learning rate are device data in torch_xla, not graph constants)."""
        return (str(self.func), _struct(self.args), _struct(tuple(v for _, v in self.kwargs)), self.outputs)


def _struct(v: Any) -> Any:
    if isinstance(v, float):
        return "f"
    if isinstance(v, tuple):
        return tuple(_struct(x) for x in v)
    return v


class _Specs:
    """Tensor -> TensorSpec conversion with a dtype-name cache (called for every argument)."""

    def __init__(self):
        import torch
        self.tensor = torch.Tensor
        self.names: Dict[Any, str] = {}

    def spec(self, x: Any) -> Any:
        if isinstance(x, self.tensor):
            d = self.names.get(x.dtype)
            if d is None:
                d = self.names[x.dtype] = dtype_name(x.dtype)
            return TensorSpec(tuple(x.shape), d)
        if isinstance(x, (list, tuple)):
            return tuple(self.spec(v) for v in x)
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        s = str(x)   # dtypes, devices, layouts; objects (a Generator) by type, not by address
        return type(x).__name__ if " at 0x" in s else s


class Recorder:
    """Holds the calls of the graph under construction; ``cut()`` hands them over at a step boundary."""

    def __init__(self):
        import torch
        self.calls: List[Call] = []
        self.enabled = True
        self.in_optimizer = False
        self.specs = _Specs()
        self._lib: Dict[str, bool] = {}
        self._node = torch._C._current_autograd_node
        self._mode = None

    def _loc(self) -> Optional[Tuple[str, int, str]]:
        f = sys._getframe(3)
        lib = self._lib
        while f is not None:
            fn = f.f_code.co_filename
            is_lib = lib.get(fn)
            if is_lib is None:
                is_lib = lib[fn] = is_library_file(fn)
            if not is_lib:
                return (fn, f.f_lineno, f.f_code.co_name)
            f = f.f_back
        return None

    def record(self, func, args, kwargs, out) -> None:
        """Append one call (called by the dispatch mode after running it)."""
        ns = func.namespace if hasattr(func, "namespace") else ""
        if ns in _SKIP_NS:
            return
        sp = self.specs.spec
        outs = out if isinstance(out, (list, tuple)) else (out,)
        o = tuple(s for s in (sp(x) for x in outs) if isinstance(s, TensorSpec))
        phase = OPTIMIZER if self.in_optimizer else (BACKWARD if self._node() is not None else FORWARD)
        self.calls.append(Call(func, tuple(sp(a) for a in args),
                               tuple((k, sp(v)) for k, v in kwargs.items()) if kwargs else (),
                               o, phase, self._loc()))

    def mark_optimizer(self, params: int, grad_bytes: int = 0) -> None:
        """Note that ``xm.optimizer_step`` updated ``params`` parameters (for the fused-optimizer cost) whose
        gradients hold ``grad_bytes`` bytes (what a data-parallel step all-reduces before the update)."""
        self.calls.append(Call(OPTIMIZER_MARK, (int(params), int(grad_bytes)), (), (), OPTIMIZER,
                               self._loc_at(2)))

    def _loc_at(self, depth: int) -> Optional[Tuple[str, int, str]]:
        f = sys._getframe(depth)
        while f is not None and is_library_file(f.f_code.co_filename):
            f = f.f_back
        return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f is not None else None

    def cut(self) -> List[Call]:
        """The calls since the last cut (the graph a ``mark_step`` would compile and run)."""
        calls, self.calls = self.calls, []
        return calls

    def start(self) -> None:
        """Enter the dispatch mode for the rest of the process."""
        from torch.utils._python_dispatch import TorchDispatchMode
        rec = self

        class _Mode(TorchDispatchMode):
            """Run each operator on the CPU, then note it."""

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if rec.enabled:
                    rec.record(func, args, kwargs, out)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        # a plain `optimizer.step()` (no xm.optimizer_step) is the optimizer phase too
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        self._hooks = (register_optimizer_step_pre_hook(self._opt_pre),
                       register_optimizer_step_post_hook(self._opt_post))

    def _opt_pre(self, opt, args, kwargs) -> None:
        if self.in_optimizer or not self.enabled:
            return   # inside xm.optimizer_step, which marked the step already
        self.mark_optimizer(*grad_counts(opt))
        self.in_optimizer = self._by_hook = True

    def _opt_post(self, opt, args, kwargs) -> None:
        if getattr(self, "_by_hook", False):
            self.in_optimizer = self._by_hook = False

    def stop(self) -> None:
        """Leave the dispatch mode (at exit)."""
        for h in getattr(self, "_hooks", ()):
            h.remove()
        self._hooks = ()
        if self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception:  # pragma: no cover - the mode stack was already unwound by torch
                pass
            self._mode = None


def grad_counts(optimizer) -> Tuple[int, int]:
    """(parameters, gradient bytes) of the parameters of ``optimizer`` that have a gradient: the tensors
    ``xm.optimizer_step`` all-reduces over the ranks before the update."""
    grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
    return sum(t.numel() for t in grads), sum(t.numel() * t.element_size() for t in grads)


def short_loc(loc: Optional[Tuple[str, int, str]]) -> str:
    """``file.py:42`` of a recorded location (basename, for one-line messages)."""
    if not loc:
        return "?"
    return f"{os.path.basename(loc[0])}:{loc[1]}"
