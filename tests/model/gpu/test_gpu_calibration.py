"""The GPU calibration: copied rows, the hand FLOP formula against NVIDIA's own counts, fitted factors."""
import csv
import math
import os

import pytest

from trnsim.model.gpu.calibration import (fit_factors, load_models, load_runs, param_count, predict_runs,
                                          train_flops_per_token)
from trnsim.model.gpu.efficiency import load_efficiency

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "trnsim", "model", "gpu", "data")
SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "calibration", "gpus.csv")


def _rows(path):
    with open(path, newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_rows_are_copied_verbatim():
    mine = _rows(os.path.join(DATA, "calibration_rows.csv"))
    assert set(mine) == {"P294", "P301", "P310"}
    if os.path.exists(SHARED):
        theirs = _rows(SHARED)
        for k, r in mine.items():
            assert r == theirs[k]
    # the figures the runs file reads are in the rows as published
    for run in load_runs():
        text = mine[run.row]["value"].replace(",", "")
        if run.row == "P310":
            assert "30624" in text and run.tokens_per_s_per_gpu == pytest.approx(30624)
        else:
            assert f"{run.step_time_s:g}" in text and f"{run.tokens_per_s:.0f}" in text


def test_parameter_counts_match_meta():
    m = load_models()
    assert param_count(m["llama-3.1-8b"]) == pytest.approx(8.03e9, rel=1e-3)
    assert param_count(m["llama-3.1-70b"]) == pytest.approx(70.6e9, rel=1e-3)


def test_non_causal_formula_reproduces_nvidias_model_flops():
    m = load_models()
    # P301 / P294 notes: model flops per sample 4.74E+14 (8B) and 3.94E+15 (70B) at seq 8192
    assert train_flops_per_token(m["llama-3.1-8b"], 8192, causal=False) * 8192 == pytest.approx(4.74e14, rel=2e-3)
    assert train_flops_per_token(m["llama-3.1-70b"], 8192, causal=False) * 8192 == pytest.approx(3.94e15, rel=2e-3)


def test_factors_in_the_file_are_the_fit():
    # by hand: causal FLOPs/token = 6 (N - V d) + 6 L d s
    f8 = 6 * (8.030261248e9 - 128256 * 4096) + 6 * 32 * 4096 * 8192
    f70 = 6 * (70.553706496e9 - 128256 * 8192) + 6 * 80 * 8192 * 8192
    e301 = f8 * 81222 / 8 / 989.4e12
    e294 = f70 * 71235 / 64 / 989.4e12
    bf16 = math.sqrt(e301 * e294)
    attn8 = 6 * 32 * 4096 * 8192
    t_attn = attn8 / (2.25e15 * bf16)
    fp8 = (f8 - attn8) / ((1 / 30624 - t_attn) * 4.5e15)
    fit = fit_factors(load_runs(), load_models())
    assert fit["bf16"] == pytest.approx(bf16, rel=1e-6)
    assert fit["fp8"] == pytest.approx(fp8, rel=1e-6)
    eff = load_efficiency()
    assert eff.matmul["bf16"] == pytest.approx(bf16, abs=1e-4)
    assert eff.matmul["fp8"] == pytest.approx(fp8, abs=1e-4)
    assert "P294" in eff.provenance["matmul.bf16"].source and "P301" in eff.provenance["matmul.bf16"].source
    assert "P310" in eff.provenance["matmul.fp8"].source


def test_predictions_against_published():
    preds = {p.row: p for p in predict_runs(load_runs(), load_models())}
    # the two H100 rows share one factor: each within 5 %; P310 alone sets fp8, so it is exact
    assert abs(preds["P294"].error) < 0.05 and abs(preds["P301"].error) < 0.05
    assert preds["P294"].error < 0 < preds["P301"].error
    assert abs(preds["P310"].error) < 1e-3
