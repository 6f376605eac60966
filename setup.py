"""Builds the optional C extensions of the timing model, the functional core and the trace's loop
blocks; all metadata lives in pyproject.toml.

All are optional: without a compiler the install still succeeds and trnsim uses its pure-Python
references (trnsim/timing/native.py, trnsim/nki/core/fastpath.py, trnsim/ir/loops.py and
trnsim/source.py decide at import time)."""
import sys

from setuptools import Extension, setup

# no fused multiply-add: the C scheduler must round exactly as the Python reference does
_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off", "-std=c99"]

setup(ext_modules=[Extension("trnsim.timing._native", ["trnsim/timing/_native.c"],
                             depends=[f"trnsim/timing/_native_{p}.h" for p in
                                      ("util", "encode", "deps", "gaps", "assign", "place", "schedule")],
                             extra_compile_args=_FLAGS, optional=True),
                   # the functional core's hot numeric kernels (nki/core/fastpath.py falls back to
                   # numpy without it)
                   Extension("trnsim.nki.core._fastpath", ["trnsim/nki/core/_fastpath.c"],
                             depends=["trnsim/nki/core/_fastpath_queue.h"],
                             extra_compile_args=_FLAGS + ([] if sys.platform == "win32"
                                                          else ["-O3"]),
                             optional=True),
                   # the trace's loop-block kernels: expanding synthesized iterations, comparing
                   # recorded ones (ir/loops.py falls back to Python without it)
                   Extension("trnsim.ir._loops", ["trnsim/ir/_loops.c"], extra_compile_args=_FLAGS,
                             optional=True),
                   # the user's source line of every traced instruction (source.py falls back to
                   # its Python walk without it)
                   Extension("trnsim._source", ["trnsim/_source.c"], extra_compile_args=_FLAGS,
                             optional=True)])
