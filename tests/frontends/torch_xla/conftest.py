"""Helpers for the torch_xla shim tests: run a script under `trnsim exec --instance` in a subprocess."""
import json
import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def run_exec(tmp_path):
    """Run `trnsim exec --instance INST [extra] -- CMD`; returns (completed process, summary dict)."""
    def run(cmd, instance="trn1.32xlarge", extra=(), env=None, cache=None):
        summary = tmp_path / f"summary-{len(list(tmp_path.iterdir()))}.json"
        e = dict(os.environ, OMP_NUM_THREADS="1", TRNSIM_XLA_JSON=str(summary),
                 NEURON_COMPILE_CACHE_URL=str(cache or tmp_path / "neuron-cache"), **(env or {}))
        p = subprocess.run([sys.executable, "-m", "trnsim", "exec", "--instance", instance, *extra, "--", *cmd],
                           env=e, capture_output=True, text=True, timeout=300)
        data = json.loads(summary.read_text()) if summary.exists() else None
        return p, data
    return run
