"""Import shims: make ``neuronxcc.nki``, ``nki``, ``nki_cpu_simulator`` and ``neuron_dtypes``
resolve to trnsim.

``install()`` puts trnsim's modules into ``sys.modules`` under the public names (recording what it
replaced, restored by ``uninstall()``), the way Triton's interpreter swaps its builder.
``trnsim exec -- CMD`` instead prepends ``_shims/`` to PYTHONPATH: the packages there replace
themselves with trnsim's modules on first import, so a kernel and its tests run unchanged.
PyPI's placeholder ``nki`` / ``neuronx-cc`` packages are shadowed, never used.
"""
from __future__ import annotations

import builtins
import importlib
import io
import os
import sys
import types
from typing import Dict, Optional

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shims")
DMI_PATH = "/sys/devices/virtual/dmi/id/product_name"

_saved: Dict[str, Optional[types.ModuleType]] = {}
_installed = False
_real_open = builtins.open


def _pkg(name: str, **attrs) -> types.ModuleType:
    """An empty package module standing in for a public name (``neuronxcc.starfish`` ...)."""
    m = types.ModuleType(name)
    m.__path__ = []  # a package, so submodule imports resolve through sys.modules
    m.__dict__.update(attrs)
    return m


def _aliases() -> Dict[str, types.ModuleType]:
    """Public module name -> the trnsim module that serves it."""
    legacy = importlib.import_module("trnsim.frontends.nki_legacy")
    lang = importlib.import_module("trnsim.frontends.nki_legacy.language")
    isa = importlib.import_module("trnsim.frontends.nki_legacy.isa")
    comp = importlib.import_module("trnsim.frontends.nki_legacy.compiler")
    typ = importlib.import_module("trnsim.frontends.nki_legacy.typing")
    const = importlib.import_module("trnsim.frontends.nki_legacy.constants")
    from trnsim.frontends.common import static_cast

    def allclose(a, b, *args, **kw):
        import numpy as np
        return np.allclose(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32),
                           *args, **kw)

    class TileIndex:  # legacy internal type some kernels annotate with
        """Stand-in for neuronxcc's internal tile index type (annotations only)."""

    indexing = _pkg("neuronxcc.nki.compiler.backends.neuron.indexing", TileIndex=TileIndex)
    tensor_mod = _pkg("neuronxcc.nki.compiler.backends.neuron.tensor",
                      local_tile=lambda *a, **k: None)
    neuron = _pkg("neuronxcc.nki.compiler.backends.neuron", indexing=indexing, tensor=tensor_mod)
    backends = _pkg("neuronxcc.nki.compiler.backends", neuron=neuron)
    sdtype = _pkg("neuronxcc.starfish.support.dtype", static_cast=static_cast)
    sutil = _pkg("neuronxcc.starfish.support.util", allclose=allclose)
    support = _pkg("neuronxcc.starfish.support", dtype=sdtype, util=sutil)
    starfish = _pkg("neuronxcc.starfish", support=support)
    root = _pkg("neuronxcc", nki=legacy, starfish=starfish, __version__="2.0.0+trnsim")
    out = {
        "neuronxcc": root,
        "neuronxcc.nki": legacy,
        "neuronxcc.nki.language": lang,
        "neuronxcc.nki.language.constants": const,
        "neuronxcc.nki.isa": isa,
        "neuronxcc.nki.compiler": comp,
        "neuronxcc.nki.compiler.backends": backends,
        "neuronxcc.nki.compiler.backends.neuron": neuron,
        "neuronxcc.nki.compiler.backends.neuron.indexing": indexing,
        "neuronxcc.nki.compiler.backends.neuron.tensor": tensor_mod,
        "neuronxcc.nki.typing": typ,
        "neuronxcc.starfish": starfish,
        "neuronxcc.starfish.support": support,
        "neuronxcc.starfish.support.dtype": sdtype,
        "neuronxcc.starfish.support.util": sutil,
    }
    new = importlib.import_module("trnsim.frontends.nki")
    for sub in new.SUBMODULES:
        out[f"nki.{sub}"] = importlib.import_module(f"trnsim.frontends.nki.{sub}")
    out["nki"] = new
    out["nki_cpu_simulator"] = _pkg("nki_cpu_simulator", nki=new)
    out["nki_cpu_simulator.nki"] = new
    for sub in new.SUBMODULES:
        out[f"nki_cpu_simulator.nki.{sub}"] = out[f"nki.{sub}"]
    # the Neuron SDK's host dtype helpers, imported by the NKI library's tests and goldens
    out["neuron_dtypes"] = importlib.import_module("trnsim.compat.neuron_dtypes")
    return out


def install(*, fake_dmi: Optional[bool] = None) -> None:
    """Make the public NKI module names resolve to trnsim (idempotent)."""
    global _installed
    for name, mod in _aliases().items():
        if name not in _saved:
            _saved[name] = sys.modules.get(name)
        sys.modules[name] = mod
    if fake_dmi is None:
        fake_dmi = os.environ.get("TRNSIM_FAKE_DMI", "") == "1"
    if fake_dmi:
        builtins.open = _open_with_dmi
    _installed = True


def uninstall() -> None:
    """Undo ``install()``: restore whatever was in sys.modules before."""
    global _installed
    for name, prev in _saved.items():
        if prev is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = prev
    _saved.clear()
    builtins.open = _real_open
    _installed = False


def install_torch_xla() -> None:
    """Make ``torch_xla`` resolve to trnsim's CPU stand-in, recording graphs under ``--instance``."""
    from trnsim.frontends import torch_xla as _tx
    sys.modules.update(_tx.public_modules())
    _tx.activate()


def _replace_self(name: str) -> None:
    if name.partition(".")[0] == "torch_xla":  # only under `trnsim exec`: a real torch_xla is shadowed there
        install_torch_xla()
        return
    install()
    mod = sys.modules.get(name)
    if mod is None:  # pragma: no cover
        raise ImportError(f"trnsim has no shim for {name}")


def _dmi_product_name() -> str:
    from trnsim.hardware import load_catalog
    from trnsim.options import Options
    opts = Options.from_env()
    chip = load_catalog(opts.hardware_file).chip_for(opts.target)
    return chip.dmi_product_name or opts.target  # a what-if chip may name no instance


def _open_with_dmi(file, *args, **kwargs):
    """Under ``trnsim exec``, the DMI product name reads as the simulated instance type, so tests
    that check the instance before running (nki-samples double_row_matmul) run on the target."""
    if isinstance(file, (str, os.PathLike)) and os.fspath(file) == DMI_PATH:
        mode = args[0] if args else kwargs.get("mode", "r")
        text = _dmi_product_name() + "\n"
        return io.BytesIO(text.encode()) if "b" in mode else io.StringIO(text)
    return _real_open(file, *args, **kwargs)


def shim_env(env: Optional[dict] = None, *, target: Optional[str] = None,
             fake_dmi: bool = True) -> dict:
    """An environment in which Python processes import trnsim for the NKI module names."""
    env = dict(os.environ if env is None else env)
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = SHIM_DIR + (os.pathsep + pp if pp else "")
    if target:
        env["TRNSIM_TARGET"] = target
    env["TRNSIM_FAKE_DMI"] = "1" if fake_dmi else "0"
    return env
