"""The compiler's GEMM against the hand-written reference kernel (model/opcost/data/codegen.toml)."""
import pytest

from trnsim.errors import ConfigError
from trnsim.model.opcost.codegen import codegen_scale


def test_framework_gemm_on_trn2_takes_p226s_compiler_gap():
    # P226 (M=K=N=2048 bf16, one trn2 core): hand-tuned NKI 89.47 % MFU, HLO compiler 83.84 % MFU;
    # same FLOPs, so time ratio = 89.47 / 83.84 = 1.06715
    assert codegen_scale("matmul", "trn2", "framework") == pytest.approx(89.47 / 83.84, abs=1e-4)


def test_hand_written_code_and_unmeasured_cases_run_at_the_kernels_time():
    assert codegen_scale("matmul", "trn2", "nki") == 1.0
    assert codegen_scale("matmul", "trn1", "framework") == 1.0      # no trn1 row states the gap
    assert codegen_scale("attention", "trn2", "framework") == 1.0   # SDPA runs an NKI kernel


def test_unknown_code_generator_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        codegen_scale("matmul", "trn2", "cuda")
    assert e.value.rule == "codegen" and e.value.value == "cuda"


def test_bench_reads_who_wrote_the_code_from_the_row():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "single_ops.py")
    spec = importlib.util.spec_from_file_location("single_ops_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = {r["id"]: r for r in mod.load_rows()}
    assert mod.row_codegen(rows["P226"]) == "nki"          # awslabs/nki-autotune hand-tuned kernel
    assert mod.row_codegen(rows["P259"]) == "framework"    # torch-neuronx eager
    assert mod.row_codegen(rows["P256"]) == "framework"    # torch-xla
    assert mod.row_codegen({"codegen": "nki", "source": "x"}) == "nki"
