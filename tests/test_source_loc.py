"""``source.user_loc`` in C (trnsim/_source.c) against the Python walk it replaces: the innermost
frame outside trnsim, through any number of trnsim frames, as the same interned SourceLoc."""
import os

import pytest

import trnsim
from trnsim import source

needs_c = pytest.mark.skipif(source._c is None, reason="C extension not built")
PKG = os.path.dirname(os.path.abspath(trnsim.__file__))


def _internal_chain(levels: int, fn):
    """``fn`` called through ``levels`` functions whose code claims a file inside trnsim."""
    code = "def hop(k, fn):\n    return fn() if k == 0 else hop(k - 1, fn)\n"
    ns: dict = {}
    exec(compile(code, os.path.join(PKG, "nki", "ops", "fake_hop.py"), "exec"), ns)
    return ns["hop"](levels, fn)


def _both(depth=None):
    args = () if depth is None else (depth,)
    return source.user_loc(*args), source.user_loc_py(*args)


@needs_c
@pytest.mark.parametrize("levels", [0, 1, 5])
def test_c_walk_finds_the_same_user_line(levels):
    got, ref = _internal_chain(levels, _both)
    assert got == ref and got is ref  # interned: the very same object
    # above the trnsim frames, the first frame of this (user) file: the one that entered them
    assert got.file == __file__ and got.function == "_internal_chain"


@needs_c
def test_explicit_depth_and_a_too_deep_stack():
    got, ref = _both(1)
    assert got == ref and got.function == "_both"
    with pytest.raises(ValueError):
        source.user_loc(10 ** 6)
    with pytest.raises(ValueError):
        source.user_loc_py(10 ** 6)
