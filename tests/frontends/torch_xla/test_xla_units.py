"""The shim's API pieces, its errors, and the cost rules of the training-step ops, each against a hand
calculation."""
import json
import os
import subprocess
import sys

import pytest
import torch

from trnsim.errors import ConfigError
from trnsim.frontends.torch_xla import amp, distributed, xla_model as xm
from trnsim.frontends.torch_xla.cache import cache_dir
from trnsim.frontends.torch_xla.graphs import fused_optimizer_op, graph_ops
from trnsim.frontends.torch_xla.launch import xla_env
from trnsim.frontends.torch_xla.recorder import Recorder


def test_single_process_api(capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert xm.xla_device().type == "cpu"
    assert xm.xrt_world_size() == 1 and xm.world_size() == 1 and xm.get_ordinal() == 0
    xm.master_print("hello")
    assert capsys.readouterr().out == "hello\n"
    t = torch.tensor([2.0, 4.0])
    assert torch.equal(xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5), torch.tensor([1.0, 2.0]))
    monkeypatch.setenv("RANK", "1")
    xm.master_print("not me")
    assert capsys.readouterr().out == ""


def test_autocast_runs_matmuls_in_bf16():
    a = torch.randn(4, 8)
    with amp.autocast(xm.xla_device()):
        assert (a @ a.T).dtype == torch.bfloat16


def test_device_loader_ends_a_step_per_batch(monkeypatch):
    marks = []
    monkeypatch.setattr(xm, "mark_step", lambda *a, **k: marks.append(1))
    assert list(distributed.MpDeviceLoader([1, 2, 3], xm.xla_device())) == [1, 2, 3]
    assert len(marks) == 3          # before batch 2, before batch 3, after the last


def _record(fn):
    rec = Recorder()
    rec.start()
    try:
        fn()
    finally:
        rec.stop()
    return rec.cut()


def test_training_step_op_rules_against_hand_counts():
    q = torch.randn(2, 4, 16, 8, requires_grad=True)
    w = torch.randn(32, 8, requires_grad=True)
    x = torch.randn(2, 4, 16, 8)

    def step():
        y = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        (torch.nn.functional.linear(x, w).sum() + y.sum()).backward()
    g = graph_ops(_record(step))
    attn = [i for i in g.items if i.op.kind == "attention"]
    fwd = 2 * (2 * 4) * 16 * 16 * (8 + 8) * 0.5          # B*H=8 problems, causal half
    assert [a.phase for a in attn] == ["forward", "backward"]
    assert attn[0].op.flops == fwd and attn[1].count * attn[1].op.flops == 2.5 * fwd
    mm = sum(i.count * i.op.flops for i in g.items if i.op.kind == "matmul")
    assert mm == 2 * (2 * 4 * 16) * 8 * 32 * 2          # forward + weight gradient (x needs no grad)
    assert g.unlowered == ()


def test_unlowered_ops_are_listed():
    conv = torch.nn.Conv2d(3, 4, 3)
    g = graph_ops(_record(lambda: conv(torch.randn(1, 3, 8, 8))))
    assert [n for n, _ in g.unlowered] == ["aten::convolution"]
    assert g.unlowered[0][1][0].endswith("test_xla_units.py")


def test_fused_optimizer_is_the_model_layers_adamw():
    op = fused_optimizer_op(1000)
    assert op.kind == "optimizer" and op.bytes == 34 * 1000 and op.flops == 12 * 1000


def test_cache_dir_honours_local_neuron_cache_url(tmp_path):
    assert cache_dir({"NEURON_COMPILE_CACHE_URL": str(tmp_path)})[0] == str(tmp_path)
    assert cache_dir({"NEURON_COMPILE_CACHE_URL": f"file://{tmp_path}"})[0] == str(tmp_path)
    d, note = cache_dir({"NEURON_COMPILE_CACHE_URL": "s3://bucket/cache"})
    assert "s3://" not in d and "not a local path" in note


def test_errors_name_rule_and_value(monkeypatch):
    with pytest.raises(ConfigError) as e:
        xla_env(None, report="run.html")
    assert e.value.rule == "exec-instance"
    with pytest.raises(ConfigError) as e:
        xla_env("trn9.huge")
    assert e.value.value == "trn9.huge"
    monkeypatch.setitem(sys.modules, "torch", None)       # as if torch were not installed
    with pytest.raises(Exception) as e:
        xla_env("trn1.32xlarge")
    assert e.value.rule == "torch-extra" and "pip install" in e.value.hint


def test_cli_report_without_instance_is_a_json_error():
    p = subprocess.run([sys.executable, "-m", "trnsim", "exec", "--report", "x.html", "--", "true"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert p.returncode != 0 and "--instance" in (p.stdout + p.stderr)


def test_real_torch_xla_untouched_outside_exec():
    """Without `trnsim exec`, `import torch_xla` is whatever is installed (here: nothing)."""
    p = subprocess.run([sys.executable, "-c", "import trnsim, trnsim.compat; trnsim.compat.install(); "
                        "import importlib.util as u; print(u.find_spec('torch_xla'))"],
                       capture_output=True, text=True)
    assert p.stdout.strip() == "None", p.stderr


def test_plain_optimizer_step_is_the_fused_optimizer_phase():
    lin = torch.nn.Linear(8, 4)
    opt = torch.optim.AdamW(lin.parameters())

    def step():
        lin(torch.randn(2, 8)).sum().backward()
        opt.step()
    g = graph_ops(_record(step))
    (fused,) = [i for i in g.items if i.phase == "optimizer"]
    assert fused.qualname == "xla::fused_adamw" and fused.op.bytes == 34 * (8 * 4 + 4)
    # the gradients a data-parallel step would all-reduce: 36 fp32 values, issued after the backward ops
    assert g.grad_bytes == 4 * (8 * 4 + 4) and g.grad_at.op == "all-reduce" and g.grad_at.bytes == g.grad_bytes
    assert all(i.phase != "backward" for i in g.items[g.grad_at.after:])


def test_projection_of_a_run_wider_than_the_instance_says_so():
    """A launch already wider than one instance is not projected down to it: the summary says why."""
    from types import SimpleNamespace
    from trnsim.frontends.torch_xla.projection import project_instance
    session = SimpleNamespace(world=64, hardware_file=None)
    graph = SimpleNamespace(est=SimpleNamespace(instance="trn1.32xlarge", lnc=1), calls=[])
    p = project_instance(session, graph)
    assert p["ranks"] == 32 and p["step_s"] is None and "64 ranks" in p["note"] and "32" in p["note"]


def test_projection_without_an_optimizer_step_adds_no_all_reduce():
    """A forward-only graph (evaluation) has no gradients to reduce: the projection adds no collective."""
    from types import SimpleNamespace
    from trnsim.frontends.torch_xla.projection import project_instance
    lin = torch.nn.Linear(64, 64)
    calls = _record(lambda: lin(torch.randn(16, 64)))
    graph = SimpleNamespace(est=SimpleNamespace(instance="trn1.32xlarge", lnc=1), calls=calls)
    p = project_instance(SimpleNamespace(world=1, hardware_file=None), graph)
    assert p["ranks"] == 32 and p["grad_bytes"] == 0 and p["comm_s"] == 0 and p["collectives"] == []
    assert p["step_s"] == p["compute_s"] > 0 and "nothing to all-reduce" in p["note"]
