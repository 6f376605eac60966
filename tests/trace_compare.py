"""Trace comparison shared by the fast-path tests (tests/nki/test_fastpath_*.py).
Imported by module name: the root conftest puts ``tests/`` on ``sys.path``."""


def normalized(trace):
    """The instructions with storage ids renumbered in order of appearance (ids come from a
    process-wide counter, so two runs differ there and nowhere else)."""
    ids = {}

    def reg(r):
        return r._replace(tensor=ids.setdefault(r.tensor, len(ids)))
    return [i._replace(reads=tuple(map(reg, i.reads)), writes=tuple(map(reg, i.writes)))
            for i in trace]


def bits(x):
    """The raw bits of an array (unsigned ints of its item size): NaN payloads compare too."""
    import numpy as np
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def fast_and_reference(kernel, *args, target="trn1", **opts):
    """Run ``kernel`` with the functional fast paths on, then off (the reference); both runs."""
    from trnsim.nki.core import fastpath
    from trnsim.options import Options
    was = fastpath.set_enabled(True)
    try:
        fast = kernel.run(*args, options=Options(target=target, **opts))
        fastpath.set_enabled(False)
        ref = kernel.run(*args, options=Options(target=target, **opts))
    finally:
        fastpath.set_enabled(was)
    return fast, ref


def assert_identical(fast, ref):
    """Same output bits and, per core, the same trace up to storage ids."""
    import numpy as np
    np.testing.assert_array_equal(bits(fast.outputs), bits(ref.outputs))
    assert len(fast.traces) == len(ref.traces)
    for tf, tr in zip(fast.traces, ref.traces):
        assert len(tf) == len(tr)
        assert normalized(tf) == normalized(tr)
