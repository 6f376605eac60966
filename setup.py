"""Builds the optional C extension of the timing model; all metadata lives in pyproject.toml.

The extension is optional: without a compiler the install still succeeds and trnsim uses its
pure-Python scheduler (trnsim/timing/native.py decides at import time)."""
import sys

from setuptools import Extension, setup

# no fused multiply-add: the C scheduler must round exactly as the Python reference does
_FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off", "-std=c99"]

setup(ext_modules=[Extension("trnsim.timing._native", ["trnsim/timing/_native.c"],
                             depends=[f"trnsim/timing/_native_{p}.h" for p in
                                      ("util", "encode", "deps", "schedule")],
                             extra_compile_args=_FLAGS, optional=True)])
