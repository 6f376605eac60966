"""``check_model``: the compatibility dry run behind ``trnsim check`` (load, capture, classify, report)."""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .classify import OP_CLASSES_FILE, SUPPORTED_FILE, load_tables
from .cuda_scan import scan_file
from .errors import CaptureError, ModelLoadError, require_torch
from .loader import get_class, instantiate, load_module_file, make_inputs, parse_shape, split_spec
from .records import CapturedOp, is_library_file
from .report import CompatReport, build_rows, coverage_counts

CAPTURES = ("auto", "export", "dispatch")
Shape = Union[str, Sequence[int]]


def _shapes(input_shape: Union[Shape, Sequence[Shape]]) -> Tuple[Tuple[int, ...], ...]:
    """One shape ("1x2048" or (1, 2048)) or several -> a tuple of int tuples."""
    if isinstance(input_shape, str):
        return (parse_shape(input_shape),)
    items = list(input_shape)
    if items and all(isinstance(d, int) for d in items):
        return (parse_shape("x".join(map(str, items))),)
    return tuple(parse_shape(s if isinstance(s, str) else "x".join(map(str, s))) for s in items)


def load_model(path_or_module: Any, kwargs: Optional[Dict[str, Any]] = None, model_dtype: Optional[str] = None,
               train: bool = False):
    """(model on meta, label, source file) from "file.py:Class", an nn.Module class or an instance."""
    torch = require_torch()
    kwargs = dict(kwargs or {})
    if isinstance(path_or_module, str):
        path, cls_name = split_spec(path_or_module)
        cls = get_class(load_module_file(path), cls_name, path)
        return instantiate(cls, kwargs, path, model_dtype, train), path_or_module, os.path.abspath(path)
    if isinstance(path_or_module, type) and issubclass(path_or_module, torch.nn.Module):
        src = _source_file(path_or_module)
        return (instantiate(path_or_module, kwargs, src or "", model_dtype, train),
                path_or_module.__name__, src)
    if isinstance(path_or_module, torch.nn.Module):
        return path_or_module, type(path_or_module).__name__, _source_file(type(path_or_module))
    raise ModelLoadError("model must be 'file.py:Class', an nn.Module class or an nn.Module instance",
                         rule="model-spec", limit="file.py:Class | nn.Module", value=type(path_or_module).__name__)


def _source_file(cls) -> Optional[str]:
    try:
        return os.path.abspath(inspect.getsourcefile(cls) or "") or None
    except (TypeError, OSError):
        return None


def capture(model, inputs: Sequence[Any], prefer: Sequence[str], how: str = "auto",
            decompose: bool = True) -> Tuple[List[CapturedOp], str, str]:
    """(ops, capture method, note): torch.export first, the dispatch trace when export fails."""
    from .capture_dispatch import dispatch_trace
    from .capture_export import export_program, records_from_program
    if how not in CAPTURES:
        raise ModelLoadError(f"unknown capture method {how!r}", rule="capture", limit=list(CAPTURES), value=how)
    with _quiet():
        return _capture(model, inputs, prefer, how, decompose)


@contextlib.contextmanager
def _quiet():
    """Silence torch's own logging while capturing: a failing fake-tensor kernel logs a full traceback
    before raising, and the user gets a one-paragraph CaptureError instead."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


def _capture(model, inputs, prefer, how, decompose):
    from .capture_dispatch import dispatch_trace
    from .capture_export import export_program, records_from_program
    note = ""
    if how in ("auto", "export"):
        try:
            program = export_program(model, inputs)
        except Exception as e:  # export is strict about Python control flow; the fallback is not
            if how == "export":
                from .capture_dispatch import capture_error
                raise capture_error(e, None, prefer) from None
            first = (str(e).strip().splitlines() or [""])[0][:200]
            note = f"torch.export failed ({type(e).__name__}: {first}); traced with a TorchDispatchMode instead"
        else:
            return records_from_program(program, prefer, decompose), "torch.export", note
    return dispatch_trace(model, inputs, prefer), "dispatch-trace", note


def check_model(path_or_module: Any, input_shape: Union[Shape, Sequence[Shape]], dtype: str = "int64", *,
                kwargs: Optional[Dict[str, Any]] = None, model_dtype: Optional[str] = None, train: bool = False,
                capture_with: str = "auto", decompose: bool = True, op_classes: str = OP_CLASSES_FILE,
                supported: str = SUPPORTED_FILE,
                progress: Optional[Callable[[str], None]] = None) -> CompatReport:
    """Compatibility dry run of a torch model on the meta device: op classes, torch-neuronx coverage,
    custom / CUDA-only ops and hard-coded CUDA use, each with its source line."""
    step = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    tables = load_tables(op_classes, supported)
    shapes = _shapes(input_shape)
    step("building the model on the meta device")
    model, label, src = load_model(path_or_module, kwargs, model_dtype, train)
    # a module instance handed in with real weights is traced where its parameters live
    device = next((p.device for p in model.parameters()), "meta")
    inputs = make_inputs(shapes, dtype, device)
    prefer = [src] if src else []
    step("capturing the graph")
    ops, method, note = capture(model, inputs, prefer, capture_with, decompose)
    step("classifying operators")
    total, documented, costable = coverage_counts(ops, tables)
    files = list(dict.fromkeys(prefer + [op.loc.file for op in ops if op.loc and not is_library_file(op.loc.file)]))
    findings = tuple(f for path in files for f in scan_file(path))
    return CompatReport(model=label, input_shapes=shapes, input_dtype=dtype, capture=method, capture_note=note,
                        rows=tuple(build_rows(ops, tables)), cuda_findings=findings, total_ops=total,
                        documented_ops=documented, costable_ops=costable, seconds=time.perf_counter() - t0,
                        supported_source=tables.supported_source, ops=tuple(ops))


__all__ = ["check_model", "capture", "load_model", "CaptureError"]
