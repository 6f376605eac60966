"""For every system (Trainium and GPU), op, group and size: what an estimate charges for a collective is what
``trnsim.fabric.collective`` returns, the function ``trnsim collective`` prints."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from trnsim.fabric import collective
from trnsim.model.context import make_context
from trnsim.model.system import make_system

# (system, LNC); every kind of fabric: NeuronLink ring / torus, the UltraServer's Z links, NVLink boxes and
# an NVL72 rack, each also on two instances joined by EFA / InfiniBand
SYSTEMS = [("trn1.32xlarge", 1), ("trn2.48xlarge", 2), ("trn2.48xlarge", 1), ("trn2-ultraserver", 2),
           ("p5.48xlarge", None), ("p5en.48xlarge", None), ("p6-b200.48xlarge", None), ("gb300-nvl72", None)]
OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv")


@st.composite
def cases(draw):
    system, lnc = draw(st.sampled_from(SYSTEMS))
    nodes = draw(st.sampled_from((1, 2)))
    ranks = make_system(system, nodes, lnc).cores
    # groups as the estimators lay them out: ``size`` ranks ``stride`` apart (TP innermost ... DP outermost)
    size = 2 ** draw(st.integers(1, max(1, ranks.bit_length() - 1)))
    stride = 2 ** draw(st.integers(0, (ranks // size).bit_length() - 1))
    op = draw(st.sampled_from(OPS))
    if op == "send-recv":
        size = 2
    nbytes = 2 ** draw(st.integers(10, 30))
    return system, lnc, nodes, op, nbytes, [i * stride for i in range(size)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_an_estimates_collective_is_what_trnsim_collective_prints(case):
    system, lnc, nodes, op, nbytes, ranks = case
    ctx = make_context("llama-2-7b", system, nodes=nodes, lnc=lnc)
    printed = collective(system, op, nbytes, ranks, instances=nodes, lnc=lnc).time_us * 1e-6
    charged = ctx.comm_s(op, nbytes, ranks)
    # one fast path serves both (time_us is printed in microseconds: float rounding only)
    assert charged == pytest.approx(printed, rel=1e-12), case
    assert ctx.charge(op, nbytes, ranks, 3) == pytest.approx(3 * charged, rel=1e-12)
