"""``Options.race_check`` / ``TRNSIM_RACE_CHECK=0`` turns race detection off (for timing-only
sweeps over kernels known to be race-free); on by default, where the same kernel is reported."""
import warnings

import numpy as np
import pytest

from trnsim.errors import RaceError, RaceWarning
from trnsim.frontends.nki_legacy import language as nl
from trnsim.nki.harness import as_kernel
from trnsim.options import Options


def _racy(x):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nl.store(out[0:1, :], value=nl.load(x[i:i + 1, :]))  # every iteration: the same row
    return out


def _spmd(x):
    out = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    nl.store(out[0:1, :], value=nl.load(x[i:i + 1, :]))  # every program: the same row
    return out


def _x():
    return np.arange(4 * 64, dtype=np.float32).reshape(4, 64)


@pytest.mark.parametrize("kern,grid", [(_racy, ()), (_spmd, (4,))])
def test_race_reported_by_default_and_skipped_when_off(kern, grid):
    k = as_kernel(kern)
    if grid:
        k = k[grid]
    with pytest.warns(RaceWarning):
        k.run(_x(), options=Options())
    with pytest.raises(RaceError):
        k.run(_x(), options=Options(strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = k.run(_x(), options=Options(strict=True, race_check=False))
    # the simulator runs iterations/programs in order: the last one's row survives
    np.testing.assert_array_equal(res.outputs, _x()[3:4])


def test_env_switch():
    assert Options.from_env({}).race_check is True
    assert Options.from_env({"TRNSIM_RACE_CHECK": "0"}).race_check is False
