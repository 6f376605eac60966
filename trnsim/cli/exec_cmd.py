"""``trnsim exec -- CMD``: run CMD with the NKI import shims active."""
from __future__ import annotations

import os
import subprocess
import sys

from ..lifetime import child_dies_with_parent
from ..errors import ConfigError
from ..hardware import load_catalog
from ..options import canonical_target


def register(sub) -> None:
    """Add ``trnsim exec`` to the command line."""
    p = sub.add_parser("exec", help="run a command with neuronxcc.nki / nki imports served by trnsim",
                       description="Run CMD (e.g. pytest, python my_kernel.py) so that "
                       "`import neuronxcc.nki` and `import nki` resolve to trnsim's simulated "
                       "NeuronCore.  Example: trnsim exec --target trn1 -- pytest tests/")
    p.add_argument("--target", help="trn1 | trn2 | trn3, or a target of $TRNSIM_HARDWARE "
                   "(default: $TRNSIM_TARGET or trn2)")
    p.add_argument("--hardware", metavar="FILE.toml",
                   help="hardware figures merged over the catalog (sets TRNSIM_HARDWARE for CMD)")
    p.add_argument("--strict", action="store_true",
                   help="never-written SBUF/PSUM values reaching an output are errors")
    p.add_argument("--no-fake-dmi", action="store_true",
                   help="do not report the simulated instance type through the DMI product name")
    p.add_argument("--instance", help="torch_xla scripts: estimate each step on this instance "
                   "(e.g. trn1.32xlarge); `import torch_xla` runs on the CPU, recorded per mark_step")
    p.add_argument("--report", metavar="RUN.html", help="with --instance: self-contained HTML report")
    p.add_argument("--trace", metavar="RUN.json", help="with --instance: Perfetto timeline of one step")
    p.add_argument("--json", action="store_true", help="report trnsim's own errors (a bad target or "
                   "hardware file) as a JSON object on stdout; CMD's output is its own")
    p.add_argument("cmd", nargs="+", metavar="CMD", help="the command, after --")
    p.set_defaults(func=run)


def run(args) -> int:
    """Run the command with the shims on its PYTHONPATH; its exit status is ours."""
    from ..compat import shim_env
    hw = os.path.abspath(args.hardware) if args.hardware else None
    if hw:
        load_catalog(hw)  # a bad file is reported here, not as a traceback inside CMD
    target = canonical_target(args.target, hw) if args.target else None
    env = shim_env(target=target, fake_dmi=not args.no_fake_dmi)
    if hw:
        env["TRNSIM_HARDWARE"] = hw
    if args.strict:
        env["TRNSIM_STRICT"] = "1"
    if getattr(args, "instance", None) or getattr(args, "report", None) or getattr(args, "trace", None):
        from ..frontends.torch_xla.launch import xla_env
        env.update(xla_env(args.instance, args.report, args.trace, hw))
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ConfigError("trnsim exec needs a command after --", rule="exec-command")
    try:
        # the command dies with trnsim (SIGTERM on Linux when trnsim itself is killed)
        return subprocess.call(cmd, env=env, preexec_fn=child_dies_with_parent)
    except FileNotFoundError:
        raise ConfigError(f"command not found: {cmd[0]}", rule="exec-command", value=cmd[0]) from None
    except PermissionError:
        raise ConfigError(f"command is not executable: {cmd[0]}", rule="exec-command", value=cmd[0]) from None
