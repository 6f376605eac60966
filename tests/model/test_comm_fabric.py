"""The model layer times collectives with the fabric by default (nominal link rates, the model's own
calibrated comm factor and per-call overhead on top); the alpha-beta placeholder reads the same link figures."""
import pytest

from trnsim.fabric import FabricComm, load_fabric_config
from trnsim.hardware import load_catalog
from trnsim.model import estimate_inference
from trnsim.model.comm import AlphaBetaComm, default_comm
from trnsim.model.context import make_context
from trnsim.model.datafiles import figure
from trnsim.model.efficiency import calibration_for
from trnsim.model.parallel import make_system

GiB = 2 ** 30


def test_the_default_is_the_fabric_the_calibration_was_fitted_with():
    ctx = make_context("llama-2-7b", "trn1.32xlarge")
    assert isinstance(ctx.comm, FabricComm) and not ctx.comm.runtime and not ctx.comm.simulate
    assert ctx.comm_name == ctx.calib.comm_model == "FabricComm"
    assert "calibrated with" not in ctx.calib.note
    e = estimate_inference("llama-2-7b", "trn1.32xlarge", tp=32, batch=1, input_len=128, output_len=128)
    assert e.tpot_ms > 0


def test_model_collective_is_the_nominal_fabric_time_over_the_comm_factor_plus_the_overhead():
    ctx = make_context("llama-2-7b", "trn2.48xlarge", lnc=2)
    cal = calibration_for("trn2")  # no trn2 rows: trn1's factors
    cfg = load_fabric_config()
    N, S = 16, 1 * GiB
    ranks = [4 * c for c in range(N)]  # one rank on each chip of the 4x4 torus
    port = 1.024e12 / 4  # per port, per direction, nominal
    dual_ring = 2 * (N - 1) * cfg.step_s + 2 * (N - 1) / N * S / (4 * port)
    assert ctx.comm_s("all-reduce", S, ranks) == pytest.approx(dual_ring / cal.factor("comm") + cal.overhead_s,
                                                               rel=1e-9)


def test_fabric_sim_and_alpha_beta_are_still_available():
    system = make_system("trn1.32xlarge")
    assert default_comm(system, which="fabric-sim").simulate
    assert isinstance(default_comm(system, which="alpha-beta"), AlphaBetaComm)


def test_the_placeholder_reads_the_fabrics_link_figures(tmp_path):
    # reading the per-chip figure as both directions summed (an override of fabric.toml) halves every port,
    # for the placeholder as for the fabric
    hw = tmp_path / "both.toml"
    hw.write_text('[fabric.links]\nfigure_counts_both_directions = { value = true, source = "test" }\n')
    sysm = make_system("trn1.32xlarge")
    inst = load_catalog().instance("trn1.32xlarge")
    a = figure("comm", "latency.intra_node_s")
    S, ranks = 64 * 2 ** 20, [0, 2, 4, 6]  # one core on each of 4 chips, a ring over them
    for path, per_port in ((None, inst.chip_link_bandwidth_bytes_per_s / 4),
                           (str(hw), inst.chip_link_bandwidth_bytes_per_s / 4 / 2)):
        link = 2 * per_port  # a ring leaves each chip through one port each way round
        want = 2 * (3 * a + 3 / 4 * S / link)
        assert AlphaBetaComm(sysm, path).time_s("all-reduce", S, ranks) == pytest.approx(want, rel=1e-12)
