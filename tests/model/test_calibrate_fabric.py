"""The model fit's fabric trial files: a trial value of graph_call_overhead_s reaches the in-graph collectives
the estimators charge, and only them (the standalone call keeps its launch cost)."""
import pytest

from trnsim.fabric import FabricComm
from trnsim.model.calibrate import FABRIC_FIT, fabric_file


def test_trial_overhead_moves_in_graph_calls_by_the_difference(tmp_path):
    ranks = list(range(32))
    base = FabricComm("trn1.32xlarge", 1, 1, in_graph=True)
    a = fabric_file("trn1", {"graph_call_overhead_s": 1e-5}, str(tmp_path))
    b = fabric_file("trn1", {"graph_call_overhead_s": 2e-4}, str(tmp_path))
    ta = FabricComm("trn1.32xlarge", 1, 1, hardware_file=a, in_graph=True).time_s("all-reduce", 8192, ranks)
    tb = FabricComm("trn1.32xlarge", 1, 1, hardware_file=b, in_graph=True).time_s("all-reduce", 8192, ranks)
    # same algorithm and bytes: the times differ by the overheads' difference, 190 us
    assert tb - ta == pytest.approx(1.9e-4, rel=1e-6)
    assert base.time_s("all-reduce", 8192, ranks) > ta
    sa = FabricComm("trn1.32xlarge", 1, 1, hardware_file=a, in_graph=False).time_s("all-reduce", 8192, ranks)
    sb = FabricComm("trn1.32xlarge", 1, 1, hardware_file=b, in_graph=False).time_s("all-reduce", 8192, ranks)
    assert sa == sb   # a standalone call pays launch + per-message costs, not the in-graph one


def test_fit_bounds_are_physical():
    lo, hi = FABRIC_FIT["bandwidth_efficiency"]
    assert 0 < lo < hi <= 1.0
    lo, hi = FABRIC_FIT["graph_call_overhead_s"]
    assert 0 < lo < hi <= 1e-3
