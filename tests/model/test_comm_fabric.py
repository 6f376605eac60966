"""The model layer charges every collective through one call into the fabric, runtime constants included:
no model-side comm factor or per-call overhead on top."""
import pytest

from trnsim.errors import ConfigError
from trnsim.fabric import FabricComm, collective, load_fabric_config
from trnsim.model import estimate_inference
from trnsim.model.comm import default_comm
from trnsim.model.context import make_context
from trnsim.model.system import make_system

GiB = 2 ** 30


def test_the_default_is_the_fabric_with_its_runtime_constants():
    ctx = make_context("llama-2-7b", "trn1.32xlarge")
    assert isinstance(ctx.comm, FabricComm) and ctx.comm.runtime and not ctx.comm.simulate
    assert ctx.comm_name == "FabricComm"
    e = estimate_inference("llama-2-7b", "trn1.32xlarge", tp=32, batch=1, input_len=128, output_len=128)
    assert "collectives timed by FabricComm" in e.notes


def test_a_model_collective_is_the_dual_ring_by_hand_plus_the_graph_call_cost():
    ctx = make_context("llama-2-7b", "trn2.48xlarge", lnc=2)
    cfg = load_fabric_config()
    rt = cfg.runtime("trn2").call(in_graph=True)   # a model's collectives run inside its compiled graph
    N, S = 16, 1 * GiB
    ranks = [4 * c for c in range(N)]  # one rank on each chip of the 4x4 torus
    port = 1.024e12 / 4 * rt.bandwidth_efficiency  # per port, per direction, at the runtime's efficiency
    dual_ring = 2 * (N - 1) * cfg.step_s + 2 * (N - 1) / N * S / (4 * port)
    # a model's collectives run inside its compiled graph: one fixed cost per call, no launch or per-message cost
    assert ctx.comm_s("all-reduce", S, ranks) == pytest.approx(dual_ring + rt.graph_call_overhead_s, rel=1e-9)


@pytest.mark.parametrize("system,lnc,op,size,ranks", [
    ("trn1.32xlarge", 1, "all-reduce", 16384, list(range(32))),
    ("trn1.32xlarge", 1, "all-gather", 64 * 2 ** 20, [0, 2, 4, 6]),
    ("trn2.48xlarge", 2, "all-reduce", 16384, list(range(64))),
    ("trn2.48xlarge", 2, "reduce-scatter", 8 * 2 ** 20, list(range(0, 64, 4))),
])
def test_what_an_estimate_charges_is_what_trnsim_collective_prints(system, lnc, op, size, ranks):
    ctx = make_context("llama-2-7b", system, lnc=lnc)
    printed = collective(system, op, size, ranks, lnc=lnc).time_us * 1e-6
    # the estimate and the command take the same fast path
    assert ctx.comm_s(op, size, ranks) == pytest.approx(printed, rel=1e-12)


def test_fabric_sim_is_available_and_unknown_models_are_refused():
    system = make_system("trn1.32xlarge")
    assert default_comm(system, which="fabric-sim").simulate
    with pytest.raises(ConfigError) as e:
        default_comm(system, which="alpha-beta")
    assert e.value.rule == "comm-model"
