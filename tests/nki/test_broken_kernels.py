"""The broken-kernel suite: every kernel in tests/nki/broken/ breaks one hardware or NKI rule.

Each must raise exactly its TrnsimError subclass (or warn), with the rule, the limit and the value
in the message, blaming the kernel's own file and the line marked ``# ERR``; and the traceback a
user sees holds no trnsim frame below the kernel's.
"""
import ast
import importlib.util
import os
import pathlib
import re
import warnings

import pytest

from trnsim.errors import KernelError, TrnsimError
from trnsim.nki.harness import as_kernel
from trnsim.options import Options
from trnsim.source import is_internal

BROKEN = pathlib.Path(__file__).parent / "broken"
FILES = sorted(p for p in BROKEN.glob("*.py") if not p.name.startswith("_"))
PKG_DIR = os.path.dirname(os.path.abspath(importlib.util.find_spec("trnsim").origin))


def _n_variants(path: pathlib.Path) -> int:
    """How many expectations a file declares (read from its source: no import at collection)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXPECT" for t in node.targets):
            return len(node.value.elts) if isinstance(node.value, (ast.List, ast.Tuple)) else 1
    raise AssertionError(f"{path.name} has no EXPECT")


CASES = [pytest.param(p, i, id=f"{p.stem}" + (f"-{i}" if _n_variants(p) > 1 else ""))
         for p in FILES for i in range(_n_variants(p))]

_modules: dict = {}


def _load(path: pathlib.Path):
    mod = _modules.get(path)
    if mod is None:
        spec = importlib.util.spec_from_file_location(f"trnsim_broken_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _modules[path] = mod
    return mod


def _err_line(path: pathlib.Path) -> int:
    text = path.read_text().splitlines()
    lines = [i + 1 for i, t in enumerate(text) if t.rstrip().endswith("# ERR")]
    assert len(lines) == 1, f"{path.name} must mark exactly one line with '# ERR'"
    return lines[0]


def _err2_line(path: pathlib.Path):
    """The second line a report must name (a race's other side), marked ``# ERR2``; or None."""
    text = path.read_text().splitlines()
    lines = [i + 1 for i, t in enumerate(text) if t.rstrip().endswith("# ERR2")]
    assert len(lines) <= 1, f"{path.name} marks more than one line with '# ERR2'"
    return lines[0] if lines else None


def _expect(mod, variant: int) -> dict:
    e = mod.EXPECT
    return e[variant] if isinstance(e, (list, tuple)) else e


def _run(mod, exp: dict):
    kernel = getattr(mod, "KERNEL", None) or mod.kernel
    opts = Options(target=exp.get("target", "trn2"), strict=exp.get("strict", False))
    return as_kernel(kernel).run(*mod.args(), options=opts)


def _blames(text: str, path: pathlib.Path, line: int) -> bool:
    return re.search(re.escape(path.name) + r":" + str(line) + r"\b", text) is not None


def test_suite_is_large_and_covers_many_rules():
    assert len(FILES) >= 35
    rules = set()
    for p in FILES:
        mod = _load(p)
        for i in range(_n_variants(p)):
            rules.add(_expect(mod, i)["rule"])
    assert len(rules) >= 35


@pytest.mark.parametrize("path,variant", CASES)
def test_broken_kernel(path, variant):
    mod = _load(path)
    exp = _expect(mod, variant)
    line = _err_line(path)
    if "warning" in exp:
        _check_warning(mod, exp, path, line)
        return
    cls = exp["error"]
    assert issubclass(cls, KernelError)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a broken kernel fails with its error, not a stray warning
        with pytest.raises(TrnsimError) as ei:
            _run(mod, exp)
    e = ei.value
    assert type(e) is cls, f"{type(e).__name__}: {e}"
    assert e.rule == exp["rule"], str(e)
    msg = str(e)
    assert msg.startswith(f"[{exp['rule']}] ")
    for key in ("limit", "value"):
        if key in exp:
            want = str(exp[key])
            assert want in str(getattr(e, key)), (key, getattr(e, key))
            assert want in msg, (key, msg)
    assert _blames(msg, path, line), msg
    other = _err2_line(path)
    assert other is None or _blames(msg, path, other), msg
    _check_traceback(ei, path, line, deferred=exp.get("deferred", False))


def _check_traceback(ei, path: pathlib.Path, line: int, *, deferred: bool) -> None:
    entries = []
    tb = ei.value.__traceback__
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    # every trnsim frame left in the traceback is one pytest hides (__tracebackhide__)
    for t in entries:
        f = t.tb_frame
        if is_internal(f.f_code):
            assert f.f_locals.get("__tracebackhide__") or f.f_globals.get("__tracebackhide__"), \
                f"visible trnsim frame {f.f_code.co_filename}:{t.tb_lineno}"
    mine = [i for i, t in enumerate(entries) if t.tb_frame.f_code.co_filename == str(path)]
    if not deferred:
        # raised while the kernel ran: the innermost frame is the offending kernel line, and no
        # trnsim frame sits below the kernel's frames
        assert mine, "the kernel's own frame is missing from the traceback"
        assert not any(is_internal(t.tb_frame.f_code) for t in entries[mine[0]:])
        assert entries[-1].tb_frame.f_code.co_filename == str(path)
        assert entries[-1].tb_lineno == line
    else:
        # found after the kernel returned (liveness, outputs, launch checks): the message names the
        # line; no frame of the kernel's file can be left in the traceback
        assert not mine or not any(is_internal(t.tb_frame.f_code) for t in entries[mine[0]:])
    # what pytest prints: its own filtering (hidden frames removed) leaves no trnsim file
    shown = ei.traceback.filter(ei)
    for entry in shown:
        assert not str(entry.path).startswith(PKG_DIR + os.sep), f"pytest shows {entry.path}"


def _check_warning(mod, exp: dict, path: pathlib.Path, line: int) -> None:
    cls = exp["warning"]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        _run(mod, exp)
    got = [w for w in rec if issubclass(w.category, cls)]
    assert got, f"no {cls.__name__}; got {[str(w.message) for w in rec]}"
    assert len(rec) == len(got), [str(w.message) for w in rec]
    msgs = [str(w.message) for w in got]
    assert any(m.startswith(f"[{exp['rule']}]") and _blames(m, path, line) for m in msgs), msgs
    other = _err2_line(path)
    assert other is None or any(_blames(m, path, line) and _blames(m, path, other)
                                for m in msgs), msgs
    for key in ("limit", "value"):
        if key in exp:
            assert any(str(exp[key]) in m for m in msgs), (key, msgs)


def test_strict_mode_from_environment(monkeypatch):
    """TRNSIM_STRICT=1 turns the uninitialized-read warning into an error for a plain kernel call."""
    from trnsim.errors import UninitializedReadError, UninitializedReadWarning
    mod = _load(BROKEN / "uninit_read_to_output.py")
    for var in ("TRNSIM_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRNSIM_STRICT", "1")
    with pytest.raises(UninitializedReadError) as ei:
        mod.kernel(*mod.args())
    path = BROKEN / "uninit_read_to_output.py"
    assert _blames(str(ei.value), path, _err_line(path))
    monkeypatch.setenv("TRNSIM_STRICT", "0")
    with pytest.warns(UninitializedReadWarning):
        mod.kernel(*mod.args())
