"""``Storage.fresh`` (the hot ops' quick constructor) builds what ``Storage(...)`` builds for a fully
written on-chip result tile: every slot, the same values, fresh ids."""
import numpy as np

from trnsim.nki.core import dtypes as dt
from trnsim.nki.core.storage import Storage
from trnsim.nki.ops.hot_matmul import PendingStorage


def _slots(cls):
    out = []
    for k in cls.__mro__:
        out += [s for s in getattr(k, "__slots__", ()) if s != "__weakref__"]
    return out


def test_fresh_sets_every_slot_as_the_constructor_does():
    data = np.zeros(128 * 64 * 4, np.uint8)
    ref = Storage(memory="psum", kind="psum", name="t7", nbytes=data.size, sdtype=dt.float32,
                  partitions=128, pstride=256, loc=None, data=data, full=True)
    got = Storage.fresh("psum", "t7", data.size, dt.float32, 128, 256, None, data)
    for name in _slots(Storage):
        want, have = getattr(ref, name), getattr(got, name)
        if name in ("id", "region_id"):
            assert have == got.id and have != want  # a new id from the same counter
        elif isinstance(want, np.ndarray):
            assert have is want
        else:
            assert have == want, name


def test_fresh_on_a_pending_subclass_stores_the_bytes_without_its_property():
    st = PendingStorage.fresh("psum", "t8", 16, dt.float32, 2, 8, None, np.zeros(16, np.uint8))
    st.operands = None  # set by every caller right after fresh()
    assert type(st) is PendingStorage and st.data.size == 16 and st.full and not st.manual
