"""The size x group table of every estimate: each (op, bytes per call, group) a step charged, counted by hand,
timed as `trnsim collective` times it, with the links it crosses."""
import pytest

import trnsim.fabric as fabric
from trnsim.model import estimate_inference, estimate_training
from trnsim.model.colltable import add_group, scaled
from trnsim.model.neuron import ServingSetup


def _one(rows, op):
    got = [r for r in rows if r.op == op]
    assert len(got) == 1, rows
    return got[0]


def test_p5_decode_all_reduce_is_what_trnsim_collective_prints():
    e = estimate_inference("llama-3-70b", "p5.48xlarge", tp=8, batch=1, input_len=2048, output_len=256)
    (r,) = e.collective_table["decode"]
    # 80 layers x 2 all-reduces + 1 for the embedding, of batch 1 x hidden 8192 x 2 bytes, over the 8 GPUs
    assert (r.op, r.bytes, r.ranks, r.calls) == ("all-reduce", 8192 * 2, 8, 161)
    assert r.us_per_call == pytest.approx(fabric.collective("p5.48xlarge", "all-reduce", 16384, 8).time_us,
                                          rel=1e-12)
    assert r.total_ms == pytest.approx(161 * r.us_per_call / 1e3, rel=1e-12)
    assert r.links == ("NVLink",) and r.algorithm
    # prefill: the same 161 all-reduces of 2048 tokens x 8192 x 2 bytes
    (p,) = e.collective_table["prefill"]
    assert (p.op, p.bytes, p.calls) == ("all-reduce", 2048 * 8192 * 2, 161)
    assert sum(x.total_ms for x in e.collective_table["decode"]) == pytest.approx(e.breakdown["decode_comm_ms"])


@pytest.mark.parametrize("in_graph", [True, False])
def test_trn2_tp64_crosses_the_chip_and_neuronlink(in_graph):
    # the figure `trnsim collective` prints for 64 ranks (LNC 2) of a trn2.48xlarge: in a compiled graph (the
    # default) or launched call by call
    e = estimate_inference("llama-3-70b", "trn2.48xlarge", tp=64, batch=1, input_len=1024, output_len=128,
                           serving=ServingSetup(in_graph_collectives=in_graph))
    (r,) = e.collective_table["decode"]
    assert (r.op, r.bytes, r.ranks, r.calls) == ("all-reduce", 8192 * 2, 64, 161)
    assert r.links == ("intra-chip", "NeuronLink")
    want = fabric.collective("trn2.48xlarge", "all-reduce", 16384, 64, in_graph=in_graph)
    assert r.us_per_call == pytest.approx(want.time_us, rel=1e-12) and r.algorithm == want.algorithm


def test_trn2_in_graph_table_adds_up_to_the_breakdown():
    # 4 prompts, one per context-encoding call: the prefill's collectives are 4 calls' worth
    e = estimate_inference("llama-3-70b", "trn2.48xlarge", tp=64, batch=4, input_len=1024, output_len=128,
                           serving=ServingSetup(prefill_batch=1))
    for phase, key in (("prefill", "prefill_comm_ms"), ("decode", "decode_comm_ms")):
        assert sum(r.total_ms for r in e.collective_table[phase]) == pytest.approx(e.breakdown[key], rel=1e-9)
    assert _one(e.collective_table["prefill"], "all-reduce").calls == 4 * 161
    # and the per-kind tally counts the same 4 calls
    kind = e.collectives["prefill"]["all-reduce"]
    assert kind["calls"] == 4 * 161 and kind["seconds"] * 1e3 == pytest.approx(e.breakdown["prefill_comm_ms"])


def test_training_table_counts_per_step_with_dp_once():
    e = estimate_training("llama-3-8b", "trn1.32xlarge", nodes=2, tp=8, pp=2, zero=1, sp=False, recompute="none",
                          global_batch=8)
    assert e.parallel["dp"] == 4 and e.micro_batches == 2
    rows = e.collective_table
    ar = _one(rows, "all-reduce")
    # per micro-batch and stage: 16 layers x 2 x (forward + backward) + 1 embedding; 2 micro-batches;
    # 2048 tokens x 4096 x 2 bytes over the 8 ranks of a TP group (4 trn1 chips of 2 cores)
    assert (ar.calls, ar.bytes, ar.ranks) == (2 * (16 * 2 * 2 + 1), 2048 * 4096 * 2, 8)
    assert ar.links == ("intra-chip", "NeuronLink")
    # ZeRO-1: one gradient reduce-scatter and one parameter all-gather over the 4 DP ranks, one per instance half
    rs, ag = _one(rows, "reduce-scatter"), _one(rows, "all-gather")
    assert rs.calls == ag.calls == 1 and rs.ranks == 4 and "EFA" in rs.links
    assert rs.bytes == pytest.approx(2 * ag.bytes)   # fp32 gradients, bf16 weights
    assert sum(r.total_ms for r in rows) == pytest.approx(sum(c["seconds"] for c in e.collectives.values()) * 1e3)


def test_record_merges_and_scales():
    g: dict = {}
    add_group(g, "all-reduce", 16, [0, 1], 2)
    add_group(g, "all-reduce", 16.0, (0, 1), 3)
    add_group(g, "all-reduce", 16, [0], 5)      # one rank: nothing is issued
    add_group(g, "all-gather", 0, [0, 1], 5)    # empty buffer: nothing
    assert g == {("all-reduce", 16.0, (0, 1)): 5}
    assert scaled(g, 4) == {("all-reduce", 16.0, (0, 1)): 20}


def test_table_is_made_on_first_read_and_travels_as_rows():
    import json
    import pickle
    e = estimate_inference("llama-3-8b", "p5.48xlarge", tp=2, batch=1, input_len=128, output_len=16)
    t = e.collective_table["decode"]
    assert t._rows is None and len(t) == 1          # counted without being made
    d = json.loads(json.dumps(e.to_dict()))["collective_table"]["decode"]
    assert d[0]["bytes"] == 4096 * 2 and d[0]["ranks"] == 2 and d[0]["calls"] == 2 * 32 + 1
    back = pickle.loads(pickle.dumps(e))
    assert back.collective_table["decode"] == t and back == e


def test_zero3_weight_gathers_are_in_the_table():
    e = estimate_training("llama-3-8b", "trn1.32xlarge", nodes=2, tp=8, zero=3, sp=False, recompute="none",
                          global_batch=8)
    ag = _one(e.collective_table, "all-gather")
    # every micro-batch gathers the weights before its forward and again before its backward
    assert ag.calls == 2 * e.micro_batches and ag.ranks == e.parallel["dp"]
    assert sum(r.total_ms for r in e.collective_table) == pytest.approx(
        sum(c["seconds"] for c in e.collectives.values()) * 1e3)


def test_chunked_prefill_rows_per_chunk_size():
    # TensorRT-LLM prefills in chunks of 8192 tokens: 20,000 tokens are two full chunks and one of 3,616
    e = estimate_inference("llama-3-8b", "p5.48xlarge", tp=8, batch=1, input_len=20000, output_len=16)
    assert e.framework["prefill_chunk_tokens"] == 8192
    rows = {r.bytes: r.calls for r in e.collective_table["prefill"]}
    # 32 layers x 2 + 1 all-reduces per chunk of tokens x hidden 4096 x 2 bytes
    assert rows == {8192 * 4096 * 2: 2 * 65, 3616 * 4096 * 2: 65}
    assert sum(r.total_ms for r in e.collective_table["prefill"]) == pytest.approx(e.breakdown["prefill_comm_ms"])


def test_moe_dispatch_under_attention_dp_is_an_all_to_all():
    # attention DP 8 x EP 8: no TP all-reduce; each decode token goes to its top-2 experts' ranks and back,
    # 1 token x 2 x 4096 x 2 bytes per call, twice per MoE layer (32)
    e = estimate_inference("mixtral-8x7b", "p5.48xlarge", tp=8, ep=8, batch=8, attention_dp=8, input_len=512,
                           output_len=16)
    (r,) = e.collective_table["decode"]
    assert (r.op, r.bytes, r.ranks, r.calls, r.links) == ("all-to-all", 2 * 4096 * 2, 8, 64, ("NVLink",))


@pytest.mark.parametrize("system, tp, links", [
    ("p5.48xlarge", 16, ("NVLink", "EFA")),                          # two 8-GPU NVLink domains over EFA
    ("trn2.48xlarge", 128, ("intra-chip", "NeuronLink", "EFA")),     # 2 x 16 chips of 4 LNC-2 cores
])
def test_two_instances_name_the_network(system, tp, links):
    e = estimate_inference("llama-3-70b", system, nodes=2, tp=tp, batch=1, input_len=512, output_len=16)
    (r,) = e.collective_table["decode"]
    assert (r.ranks, r.calls, r.links) == (tp, 161, links)
    want = fabric.collective(system, "all-reduce", 16384, tp, instances=2)
    assert r.us_per_call == pytest.approx(want.time_us, rel=1e-12)
