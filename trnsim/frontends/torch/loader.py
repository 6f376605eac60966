"""Load ``my_model.py:MyModel``, build it on the meta device (no weights, no downloads) and make inputs."""
from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import sys
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .cuda_scan import _gpu_only
from .errors import ModelLoadError, require_torch
from .records import pick_user_frame

# torch dtype names a user may pass for the inputs (and for --model-dtype)
DTYPES = ("int64", "int32", "float32", "bfloat16", "float16", "bool")


def split_spec(spec: str) -> Tuple[str, str]:
    """``"path/model.py:MyModel"`` -> (path, class name)."""
    path, sep, cls = spec.rpartition(":")
    if not sep or not path or not cls:
        raise ModelLoadError(f"model must be given as FILE.py:CLASS, got {spec!r}", rule="model-spec",
                             limit="FILE.py:CLASS", value=spec, hint="e.g. trnsim check my_model.py:MyModel")
    return path, cls


def parse_shape(text: str) -> Tuple[int, ...]:
    """``"1x2048"`` -> (1, 2048); every dimension a positive integer."""
    try:
        dims = tuple(int(d) for d in str(text).lower().replace(",", "x").split("x"))
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise ModelLoadError(f"input shape must be positive integers joined by 'x', got {text!r}",
                             rule="input-shape", limit="e.g. 1x2048", value=text)
    return dims


def parse_kwargs(items: Sequence[str]) -> Dict[str, Any]:
    """``["n_layer=12", "bias=False"]`` (Python literals) -> dict; a plain string is kept as text."""
    out: Dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep or not key.isidentifier():
            raise ModelLoadError(f"constructor argument must be KEY=VALUE, got {item!r}", rule="model-kwargs",
                                 limit="KEY=VALUE", value=item)
        try:
            out[key] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            out[key] = text
    return out


def load_module_file(path: str):
    """Import a Python file as a fresh module (its own directory first on sys.path, for its imports)."""
    if not os.path.isfile(path):
        raise ModelLoadError(f"model file {path!r} does not exist", rule="model-file", limit="an existing .py file",
                             value=path)
    name = "_trnsim_model_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"{path!r} is not a Python module", rule="model-file", limit="a .py file", value=path)
    mod = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # the user's module itself fails: name the line
        hint = None
        if isinstance(e, ModuleNotFoundError) and e.name and _gpu_only(e.name):
            hint = (f"{e.name} is a GPU-only package: on Trainium its ops need an NKI kernel or an aten "
                    "rewrite; guard the import to check the rest of the model")
        where = _where(e, path)
        if isinstance(e, SyntaxError) and e.lineno:
            where = f"{e.filename}:{e.lineno}"
        raise ModelLoadError(f"importing {path} failed: {type(e).__name__}: {e}", rule="model-import",
                             limit="a module that imports", value=type(e).__name__, where=where,
                             hint=hint) from None
    finally:
        sys.path.remove(folder)
    return mod


def get_class(mod, cls_name: str, path: str):
    """The ``nn.Module`` subclass ``cls_name`` of ``mod``, or an error suggesting the nearest names."""
    torch = require_torch()
    classes = sorted(n for n, v in vars(mod).items()
                     if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == mod.__name__)
    cls = getattr(mod, cls_name, None)
    if cls is None:
        near = difflib.get_close_matches(cls_name, classes, n=3) or classes
        raise ModelLoadError(f"{path} has no class named {cls_name!r}", rule="model-class", limit=classes,
                             value=cls_name, hint=f"did you mean {', '.join(near)}?" if near else None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ModelLoadError(f"{cls_name} in {path} is not a torch.nn.Module subclass", rule="model-class",
                             limit="an nn.Module subclass", value=type(cls).__name__)
    return cls


def instantiate(cls, kwargs: Dict[str, Any], path: str, model_dtype: Optional[str] = None, train: bool = False):
    """Build the model on the meta device: parameters have shapes and dtypes but no storage."""
    torch = require_torch()
    from .cudameta import cuda_to_meta_mode
    try:
        with torch.device("meta"), cuda_to_meta_mode():
            model = cls(**kwargs)
        if model_dtype:
            model = model.to(getattr(torch, model_dtype))
    except Exception as e:
        raise ModelLoadError(f"building {cls.__name__}(**{kwargs}) on the meta device failed: "
                             f"{type(e).__name__}: {e}", rule="model-init", limit="a constructor that runs "
                             "without weights or downloads", value=type(e).__name__, where=_where(e, path),
                             hint="pass constructor arguments with --kwargs KEY=VALUE") from None
    return model.train(train)


def make_inputs(shapes: Sequence[Tuple[int, ...]], dtype: str, device: Any = "meta") -> List[Any]:
    """Empty tensors (meta: no storage) of the given shapes; integer inputs (token ids) or float ones."""
    torch = require_torch()
    if dtype not in DTYPES:
        raise ModelLoadError(f"unknown input dtype {dtype!r}", rule="dtype", limit=list(DTYPES), value=dtype)
    return [torch.empty(s, dtype=getattr(torch, dtype), device=device) for s in shapes]


def _where(exc: BaseException, path: str) -> Optional[str]:
    """``file:line`` of the innermost frame of ``exc`` in the user's code."""
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    loc = pick_user_frame(frames, prefer=[path])
    return f"{loc.file}:{loc.line} in {loc.function}" if loc else None
