"""Launching kernels: argument conversion, SPMD grids (legacy) and LNC (new API), nested sub-kernel
calls, results back as numpy (or torch when torch came in), and the trace of the run.

Both API generations share this; what differs between their compilers is data (``Conventions``),
handed in by the front ends (``trnsim.frontends``).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..errors import KernelError, LaunchError, TrnsimError
from ..options import Options
from ..source import SourceLoc, describe, is_internal, strip_internal_frames, user_loc
from .core import dtypes as dt
from .core import fastforward, fastpath, races
from .core.context import KernelContext, maybe_current, running
from .host_inputs import storage_array as _storage_array, zero_broadcast as _zero_broadcast
from .core.memory import CopySpillRerun
from .core.conventions import Conventions, conventions
from .core.storage import Storage
from .core.tensor import NkiTensor
from ..ir.trace import Trace
from .world import launch_shared

_last = threading.local()
ACTIVE_TRACES: List[Trace] = []  # traces being recorded now (progress display reads their length)


@dataclasses.dataclass
class RunResult:
    """What one launch produced: outputs, the trace of every core, warnings."""
    outputs: Any
    traces: List[Trace]
    options: Options
    grid: Tuple[int, ...]
    lnc: int


def last_run() -> Optional[RunResult]:
    """The most recent top-level launch in this thread (used by benchmark/profile/trace)."""
    return getattr(_last, "run", None)


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _to_numpy(x) -> np.ndarray:
    import torch  # only reached when a torch tensor was passed
    t = x.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(dt.bfloat16)
    if str(t.dtype).startswith("torch.float8"):
        name = str(t.dtype).replace("torch.", "")
        return t.contiguous().view(torch.uint8).numpy().view(dt.as_dtype(name))
    return t.numpy()


def _to_torch(a: np.ndarray):
    import torch
    if a.dtype == dt.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    if a.dtype in (dt.float8_e4m3fn, dt.float8_e5m2):
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.uint8))
        return t.view(getattr(torch, dt.name(a.dtype)))
    return torch.from_numpy(np.ascontiguousarray(a))


def _host_dtype(a: np.ndarray) -> np.dtype:
    d = a.dtype
    if d == np.float64:
        return dt.float32   # NKI has no fp64; host fp64 arrays arrive as fp32
    if d == np.int64:
        return dt.int32     # 64-bit ints are narrowed to 32 bit (DT)
    if d == np.uint64:
        return dt.uint32
    return dt.as_dtype(d)


class _Inputs:
    """Host arrays turned into HBM tensors shared by every program instance of one launch."""

    def __init__(self, options: Options, mutable: set, writable_all: bool):
        self.options = options
        self.mutable = mutable
        self.writable_all = writable_all
        self.tensors: List[Tuple[NkiTensor, Any]] = []
        self.any_torch = False

    def convert(self, x, pname: Optional[str] = None):
        if _is_torch(x) and hasattr(x, "detach"):
            self.any_torch = True
            arr = _to_numpy(x)
            return self._tensor(arr, x, pname)
        if isinstance(x, np.ndarray):
            return self._tensor(x, x, pname)
        if isinstance(x, tuple):
            return tuple(self.convert(v, pname) for v in x)
        if isinstance(x, list):
            return [self.convert(v, pname) for v in x]
        if isinstance(x, np.generic):
            return x
        return x

    def _tensor(self, arr: np.ndarray, original, pname) -> NkiTensor:
        d = _host_dtype(arr)
        sd = dt.storage_dtype(d, self.options.precise_fp)
        writable = self.writable_all or (pname in self.mutable)
        buf = _zero_broadcast(arr, sd)
        if buf is not None:   # one zero repeated (np.broadcast_to): no copy, pages untouched
            shape = tuple(arr.shape)
            nbytes = buf.nbytes
        else:
            data = _storage_array(arr, sd)
            shape = tuple(data.shape) if data.ndim else (1,)
            nbytes = max(data.nbytes, sd.itemsize)
            if data is not arr and data.base is None and data.nbytes == nbytes:
                buf = data.reshape(-1).view(np.uint8)  # already our own converted copy
            else:
                buf = np.empty(nbytes, np.uint8)
                buf[:data.nbytes] = data.reshape(-1).view(np.uint8)
        st = Storage(memory="hbm", kind="shared_hbm", name=pname or "input", nbytes=nbytes,
                     sdtype=sd, partitions=1, pstride=0, data=buf, full=True,
                     readonly=not writable, loc=None)
        st.manual = False
        st.init = np.ones(1, np.uint8)
        st.mutable = writable
        st.hbm_pitch = shape[-1] * sd.itemsize
        strides = []
        acc = sd.itemsize
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        t = NkiTensor(st, 0, shape, tuple(reversed(strides)), d, None, owner=st.id,
                      name=pname or "input")
        self.tensors.append((t, original))
        return t

    def write_back(self) -> None:
        """Copy writes to mutable input tensors back into the caller's arrays."""
        for t, orig in self.tensors:
            if not t._st.mutable:
                continue
            vals = t.array()
            if isinstance(orig, np.ndarray) and orig.flags.writeable:
                src = vals.reshape(orig.shape) if orig.ndim else vals.reshape(())
                np.copyto(orig, src.astype(orig.dtype, copy=False), casting="unsafe")
            elif _is_torch(orig):
                import torch
                with torch.no_grad():
                    orig.copy_(_to_torch(np.array(vals)).reshape(orig.shape))


def _mutable_params(fn: Callable) -> set:
    out = set()
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return out
    for name, p in sig.parameters.items():
        ann = p.annotation
        if ann is inspect.Parameter.empty:
            continue
        if getattr(ann, "_trnsim_mutable", False) or "mutable_tensor" in str(ann):
            out.add(name)
    return out


def _bind_names(fn: Callable, args, kwargs) -> Tuple[List[Optional[str]], Dict[str, str]]:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else None for i in range(len(args))]
    return names, {k: k for k in kwargs}


def _outputs(ret, as_torch: bool, seen: Optional[set] = None):
    """Kernel results as numpy arrays (or torch tensors).  Each output storage is the kernel's
    own, so its array is handed out without a copy, except to a second output of the same
    storage (two returned views must not write through to each other)."""
    if seen is None:
        seen = set()
    if isinstance(ret, NkiTensor):
        if ret._st.memory != "hbm":
            loc = ret._st.loc
            raise LaunchError(f"a kernel must return HBM tensors; '{ret.name}' (allocated at the line "
                              f"below) is in {ret._st.memory.upper()} (store it into an "
                              "nl.shared_hbm tensor)", rule="kernel-output-memory",
                              limit="hbm / shared_hbm", value=ret._st.memory,
                              where=describe(loc) if loc else None)
        a = ret.array()
        if ret._st.id in seen or not a.flags.c_contiguous:
            a = np.array(a, copy=True)
        seen.add(ret._st.id)
        if ret._st.sdtype != dt.storage_dtype(ret.dtype, True) and ret.dtype in dt.LOW_PRECISION_FLOATS:
            a = a.astype(ret.dtype)  # NKI_PRECISE_FP=0 kept fp32 internally
        if ret.dtype != a.dtype and ret.dtype.fields is None:
            a = a.view(ret.dtype) if a.dtype.itemsize == ret.dtype.itemsize else a
        return _to_torch(a) if as_torch else a
    if isinstance(ret, tuple):
        return tuple(_outputs(r, as_torch, seen) for r in ret)
    if isinstance(ret, list):
        return [_outputs(r, as_torch, seen) for r in ret]
    if isinstance(ret, dict):
        return {k: _outputs(v, as_torch, seen) for k, v in ret.items()}
    return ret


def _short(loc) -> str:
    return f"{loc.file.split('/')[-1]}:{loc.line}" if loc else "?"


def _check_outputs_written(ctx: KernelContext, ret) -> None:
    tensors = []

    def walk(r):
        if isinstance(r, NkiTensor):
            tensors.append(r)
        elif isinstance(r, (tuple, list)):
            for x in r:
                walk(x)
        elif isinstance(r, dict):
            for x in r.values():
                walk(x)
    walk(ret)
    reported = ctx.shared.get("uninit_sinks", ())
    for t in tensors:
        st = t._st
        if st.memory == "hbm" and not st.full and not st.mutable and st.id not in reported:
            iv = t.init_view()
            if iv is not None and not iv.all():
                n = int(iv.size - np.count_nonzero(iv))
                ctx.report_uninit(f"output '{t.name}' (allocated at {_short(st.loc)}) has {n} of "
                                  f"{iv.size} elements never written by the kernel",
                                  rule="err_tensor_output_not_written_to", loc=st.loc)


def launch(fn: Callable, args: tuple, kwargs: dict, *, api: Union[str, Conventions],
           grid: Tuple = (), lnc: int = 1, options: Optional[Options] = None,
           writable_inputs: bool = False, kernel_name: Optional[str] = None,
           track_spills: bool = False) -> RunResult:
    """Run ``fn`` as a top-level kernel on every grid point or LNC core; ``api``: the compiler's
    Conventions (or a preset name); ``track_spills``: record SBUF accesses so that an overflow
    the compiler's own copies cause can be spilled (set by the rerun that needs it)."""
    __tracebackhide__ = True
    conv = conventions(api)
    opts = options or Options.from_env()
    mutable = _mutable_params(fn)
    names, _ = _bind_names(fn, args, kwargs)
    inputs = _Inputs(opts, mutable, writable_inputs)
    cargs = tuple(inputs.convert(a, n) for a, n in zip(args, names))
    ckw = {k: inputs.convert(v, k) for k, v in kwargs.items()}
    grid = tuple(int(g) for g in grid)
    for g in grid:
        if g <= 0:
            raise LaunchError(f"launch grid dims must be positive, got {grid}", rule="launch-grid",
                              limit="positive integers", value=grid, where=describe(user_loc()))
    kname = kernel_name or getattr(fn, "__name__", "kernel")
    shared: dict = launch_shared()  # a rank of run_ranks: its World and rank id (world.py)
    traces: List[Trace] = []
    ret = None
    try:
        if lnc > 1:
            ret, traces = _run_lnc(fn, cargs, ckw, conv, lnc, opts, shared, kname, track_spills)
        else:
            trace = Trace(target=opts.target, meta={"kernel": kname, "grid": list(grid), "lnc": 1})
            traces = [trace]
            ACTIVE_TRACES.append(trace)
            points = list(itertools.product(*[range(g) for g in grid])) if grid else [()]
            programs = races.ProgramMarks(trace)  # where each program starts (race check)
            for pid in points:
                programs.mark()
                ctx = KernelContext(options=opts, conventions=conv, core_id=0, program_id=pid,
                                    grid=grid,
                                    trace=trace, shared=shared, kernel_name=kname, lnc=1,
                                    track_spills=track_spills)
                with running(ctx):
                    ret = fn(*cargs, **ckw)
                    ctx.check_capacity()
            if opts.race_check:
                races.check_programs(shared, programs, grid)
                races.report(shared, opts.strict)
            with running(ctx):  # all instances together must have written every output
                _check_outputs_written(ctx, ret)
        fastpath.drain()  # kernel end: queued PSUM accumulations finish before anything is read
        outputs = _outputs(ret, inputs.any_torch)
        inputs.write_back()
    except (fastforward.Rerun, CopySpillRerun) as e:
        # a fast-forwarded run needs what only a full run records (e.g. SBUF spill planning)
        return launch(fn, args, kwargs, api=api, grid=grid, lnc=lnc,
                      options=opts.replace(fast_forward="off"),
                      writable_inputs=writable_inputs, kernel_name=kernel_name,
                      track_spills=track_spills or isinstance(e, CopySpillRerun))
    except TrnsimError as e:
        _locate(e, fn)
        raise e.with_traceback(strip_internal_frames(e.__traceback__)) from None
    finally:
        fastpath.drain()  # also when the kernel raised: nothing queued outlives its launch
        for t in traces:  # no longer being recorded (and not kept alive by this list)
            for j in range(len(ACTIVE_TRACES) - 1, -1, -1):
                if ACTIVE_TRACES[j] is t:
                    del ACTIVE_TRACES[j]
    res = RunResult(outputs=outputs, traces=traces, options=opts, grid=grid, lnc=lnc)
    _last.run = res
    return res


def _kernel_loc(fn) -> Optional[SourceLoc]:
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno, code.co_name)


def _locate(e: TrnsimError, fn) -> None:
    """An error raised without a location gets the kernel line it came from: the innermost user
    frame of its traceback, else (checks made after the kernel returned) the kernel's definition."""
    if e.where:
        return
    tb, last = e.__traceback__, None
    while tb is not None:
        if not is_internal(tb.tb_frame.f_code):
            last = tb
        tb = tb.tb_next
    if last is not None:
        code = last.tb_frame.f_code
        e.where = describe(SourceLoc(code.co_filename, last.tb_lineno, code.co_name))
        return
    loc = _kernel_loc(fn)
    if loc is not None:
        e.where = f"kernel {loc.function!r} defined at " + describe(loc)


def _run_lnc(fn, cargs, ckw, conv, lnc, opts, shared, kname, track_spills=False):
    """LNC=2: two logical cores as threads sharing shared_hbm (barriers and sendrecv sync them)."""
    if lnc not in (1, 2):
        raise LaunchError(f"LNC must be 1 or 2, got {lnc}", rule="lnc-value", limit="1 or 2",
                          value=lnc)
    from ..hardware import load_catalog
    cat = load_catalog(opts.hardware_file)
    core = cat.core_for(opts.target)
    if lnc not in core.lnc:
        raise LaunchError(f"LNC={lnc} is not available on {core.name} ({opts.target})",
                          rule="lnc-generation", limit=list(core.lnc), value=lnc)
    from .ops.sync import CoreGroup
    group = CoreGroup(lnc)
    traces = [Trace(target=opts.target, meta={"kernel": kname, "lnc": lnc, "core": i})
              for i in range(lnc)]
    results: List[Any] = [None] * lnc
    errors: List[Optional[BaseException]] = [None] * lnc
    shared_lock = threading.Lock()
    ctxs: List[Optional[KernelContext]] = [None] * lnc
    sid0 = races.ProgramMarks(traces[0]).sid0  # storages older than this: the launch's inputs

    def body(i):
        ctx = KernelContext(options=opts, conventions=conv, core_id=i, program_id=(i,), grid=(lnc,),
                            trace=traces[i], shared=shared, kernel_name=kname, lnc=lnc,
                            track_spills=track_spills)
        ctxs[i] = ctx
        ctx.group = group
        ctx.shared_lock = shared_lock
        try:
            with running(ctx):
                results[i] = fn(*cargs, **ckw)
                ctx.check_capacity()
        except BaseException as e:  # keep the first failure; release the other core's waits
            errors[i] = e
            group.fail(e)
        finally:
            fastpath.drain()  # this core's kernel end (one queue for both cores)

    threads = [threading.Thread(target=body, args=(i,), name=f"trnsim-core{i}") for i in range(lnc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None and not getattr(e, "_trnsim_secondary", False):
            raise e
    if opts.race_check:
        races.check_cores(shared, traces, sid0)
        races.report(shared, opts.strict)
    with running(ctxs[0]):  # both cores write the shared outputs: check once both are done
        _check_outputs_written(ctxs[0], results[0])
    return results[0], traces


# -- kernel objects ----------------------------------------------------------------------------

class Kernel:
    """A kernel function with its launch options; ``kernel[grid]`` sets the grid / LNC."""

    def __init__(self, fn: Callable, *, api: Union[str, Conventions], mode: str = "auto",
                 grid: Tuple = (), lnc: int = 1, trace_mode: bool = False,
                 options: Optional[dict] = None, platform_target: Optional[str] = None):
        self.fn = fn
        self.conventions = conventions(api)
        self.mode = mode
        self.grid = grid
        self.lnc = lnc
        self.trace_mode = trace_mode
        self.options = dict(options or {})
        self.platform_target = platform_target
        functools.update_wrapper(self, fn)

    def _replace(self, **kw) -> "Kernel":
        k = Kernel.__new__(type(self))
        k.__dict__.update(self.__dict__)
        k.__dict__.update(kw)
        return k

    def __getitem__(self, grid) -> "Kernel":
        if not isinstance(grid, tuple):
            grid = (grid,)
        if self.conventions.launch_by_lnc:
            if len(grid) != 1:
                raise LaunchError("new-API kernels launch as kernel[lnc] with one number",
                                  rule="lnc-launch", limit="kernel[1] or kernel[2]", value=grid,
                                  where=describe(user_loc()))
            return self._replace(lnc=int(grid[0]))
        return self._replace(grid=tuple(grid))

    def run(self, *args, options: Optional[Options] = None, **kwargs) -> RunResult:
        """Launch at the top level and return the RunResult (outputs and traces)."""
        __tracebackhide__ = True
        opts = options or Options.from_env()
        if self.platform_target:
            opts = opts.replace(target=self.platform_target)
        return launch(self.fn, args, kwargs, api=self.conventions, grid=self.grid, lnc=self.lnc,
                      options=opts,
                      writable_inputs=self.trace_mode or self.conventions.writable_inputs,
                      kernel_name=getattr(self.fn, "__name__", "kernel"))

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True
        ctx = maybe_current()
        if ctx is not None:
            if self.grid:
                raise LaunchError("a kernel launched with an SPMD grid cannot be called from another "
                                  "kernel", rule="err_nested_kernel_with_spmd_grid",
                                  limit="no grid on nested kernel calls", value=f"grid {self.grid}",
                                  where=describe(user_loc()))
            ctx.depth += 1
            try:
                return self.fn(*args, **kwargs)
            finally:
                ctx.depth -= 1
        return self.run(*args, **kwargs).outputs

    def __repr__(self):
        name = getattr(self.fn, '__name__', '?')
        return f"<trnsim kernel {name} api={self.conventions.name} grid={self.grid}>"


def as_kernel(k, api: Union[str, Conventions] = "legacy") -> Kernel:
    """Accept a Kernel, a wrapped kernel (baremetal/benchmark) or a plain function."""
    if isinstance(k, Kernel):
        return k
    inner = getattr(k, "_trnsim_kernel", None)
    if isinstance(inner, Kernel):
        return inner
    if callable(k):
        return Kernel(k, api=api)
    raise LaunchError(f"{k!r} is not a kernel", rule="launch-kernel", value=type(k).__name__)


def run_traced(kernel, *args, **kwargs) -> RunResult:
    """Run any kernel and return everything it produced (outputs and traces)."""
    __tracebackhide__ = True
    return as_kernel(kernel).run(*args, **kwargs)
