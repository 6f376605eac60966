"""Recompilation reporting, the on-disk graph cache, and a torchrun launch with 2 ranks (gloo underneath)."""
import os
import re
import sys

import pytest

from conftest import SCRIPTS, free_port

SHAPES = os.path.join(SCRIPTS, "shape_change_train.py")
GPT = os.path.join(SCRIPTS, "tiny_gpt_train.py")


def test_shape_change_recompiles_every_step_naming_tensor_and_line(run_exec, tmp_path):
    cache = tmp_path / "cache"
    p, s = run_exec([sys.executable, SHAPES], cache=cache)
    assert p.returncode == 0, p.stderr[-3000:]
    assert s["steps"] == 5 and s["graphs_distinct"] == 5 and s["recompiles_every_step"]
    assert "RECOMPILES EVERY STEP" in p.stderr
    # the sequence grows by 4 each step: the `tokens` tensor and its line are named
    for r, (a, b) in zip(s["recompilations"][1:], [(12, 16), (16, 20), (20, 24)]):
        assert f"tensor `tokens` (2, {a}) -> (2, {b})" in r["reason"]
        assert "shape_change_train.py:12" in r["reason"]
    assert s["compiled"] == 5 and s["cache_hits"] == 0
    # a second run finds every graph in NEURON_COMPILE_CACHE_URL, as the Neuron compile cache would
    p2, s2 = run_exec([sys.executable, SHAPES], cache=cache)
    assert p2.returncode == 0
    assert s2["cache_hits"] == 5 and s2["compiled"] == 0
    assert s2["cache_dir"] == str(cache)
    assert len(list(cache.glob("MODULE_*/graph.json"))) == 5
    assert re.search(r"graph 3 \(cache hit\)", p2.stderr)


def test_torchrun_two_ranks_adds_the_data_parallel_all_reduce(run_exec):
    env = {"GPT_STEPS": "3", "GPT_DIM": "64"}
    p1, one = run_exec([sys.executable, GPT], env=env)
    p2, two = run_exec([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                        f"--master_port={free_port()}", GPT], env=env)
    assert p1.returncode == 0 and p2.returncode == 0, p2.stderr[-3000:]
    assert two["world"] == 2 and one["world"] == 1
    assert re.search(r"first [\d.]+ last [\d.]+", p2.stdout)   # rank 0 trained; the script asserts the loss fell
    assert p2.stdout.count("first ") == 1                      # master_print: rank 0 only
    # the gradient all-reduce: every fp32 parameter once (hand count of the GPT's parameters, DIM=64)
    D, V, T, L = 64, 256, 64, 2
    params = V * D + T * D + L * (2 * 2 * D + 3 * D * D + 3 * D + D * D + D + 4 * D * D + 4 * D + 4 * D * D + D) \
        + 2 * D + D * V
    (coll,) = two["collectives"]
    assert coll["op"] == "all-reduce" and coll["bytes"] == 4 * params
    from trnsim.model.context import make_context
    expect = make_context("llama-3-8b", "trn1.32xlarge").comm_s("all-reduce", 4 * params, [0, 1])
    assert coll["seconds"] == pytest.approx(expect, rel=1e-9)
    # issued after the backward pass, before the update that needs it: exposed, on top of the 1-rank step
    assert two["breakdown_s"]["comm_exposed"] == pytest.approx(expect)
    assert two["steady_step_s"] == pytest.approx(one["steady_step_s"] + expect, rel=1e-6)
    assert two["tokens_per_step"] == 2 * one["tokens_per_step"]
    # projected to the whole instance, both runs are the same script over 32 ranks: the 2-rank run's recorded
    # all-reduce and the 1-rank run's gradient bytes are the same buffer
    p1, p2 = one["instance_projection"], two["instance_projection"]
    assert p1["ranks"] == p2["ranks"] == 32 and p1["grad_bytes"] == 4 * params
    assert p2["step_s"] == pytest.approx(p1["step_s"], rel=1e-9)


@pytest.mark.parametrize("instance,ranks", [("trn1.32xlarge", 16 * 2),     # 16 Trainium1 chips x 2 cores
                                            ("trn2.48xlarge", 16 * 8 // 2)])  # 16 Trainium2 x 8 cores at LNC=2
def test_whole_instance_projection_is_one_rank_step_plus_gradient_all_reduce(run_exec, instance, ranks):
    """A one-process run also reports the script data-parallel over every logical core of the instance: the
    one-rank steady step plus the exposed all-reduce of every fp32 gradient over all the instance's ranks."""
    p, s = run_exec([sys.executable, GPT], instance=instance, env={"GPT_STEPS": "3", "GPT_DIM": "64"})
    assert p.returncode == 0, p.stderr[-3000:]
    assert s["world"] == 1 and s["collectives"] == []
    proj = s["instance_projection"]
    D, V, T, L = 64, 256, 64, 2
    params = V * D + T * D + L * (2 * 2 * D + 3 * D * D + 3 * D + D * D + D + 4 * D * D + 4 * D + 4 * D * D + D) \
        + 2 * D + D * V
    assert proj["ranks"] == ranks and proj["grad_bytes"] == 4 * params
    from trnsim.model.context import make_context
    ar = make_context("llama-3-8b", instance).comm_s("all-reduce", 4 * params, list(range(ranks)))
    assert ar > 0
    assert proj["step_s"] == pytest.approx(s["steady_step_s"] + ar, rel=1e-9)
    assert proj["comm_exposed_s"] == pytest.approx(ar, rel=1e-9)
    assert proj["tokens_per_step"] == ranks * 8 * 64
    assert proj["tokens_per_s"] == pytest.approx(ranks * 8 * 64 / (s["steady_step_s"] + ar), rel=1e-9)
    # the same FLOPs per rank over a longer step
    assert proj["mfu"] == pytest.approx(s["mfu"] * s["steady_step_s"] / (s["steady_step_s"] + ar), rel=1e-9)
    assert f"whole {instance}: {ranks} ranks" in p.stderr and "pure data parallelism" in p.stderr
