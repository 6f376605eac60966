"""Every JSON document trnsim prints parses with a strict reader (no bare NaN / Infinity), errors
included, and ``trnsim ... --json | head`` ends quietly instead of with a BrokenPipeError traceback."""
import json
import math
import os
import subprocess
import sys

import numpy as np

from trnsim.cli.output import print_json
from trnsim.outputs import dumps_strict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _strict(text):
    def refuse(name):
        raise ValueError(f"bare {name} in JSON")
    return json.loads(text, parse_constant=refuse)


def test_nonfinite_numbers_become_null(capsys):
    print_json({"a": math.nan, "b": [np.float64(math.inf), (1, -math.inf)], "c": np.float32(2.5)})
    d = _strict(capsys.readouterr().out)
    assert d == {"a": None, "b": [None, [1, None]], "c": 2.5}


def test_dumps_strict_never_writes_nan():
    assert dumps_strict([float("nan"), 1.0]) == "[null, 1.0]"


def test_pipe_into_head_has_no_traceback():
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run(f"{sys.executable} -m trnsim hw show trn2 --json | head -c 10",
                       shell=True, capture_output=True, text=True, env=env, executable="/bin/bash")
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.stdout.startswith("{")
