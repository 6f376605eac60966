"""Launching a torch_xla script under the shim: the environment ``trnsim exec --instance`` adds to the
shims' (``trnsim.compat.shim_env``).  From Python: ``env = shim_env(); env.update(xla_env("trn1.32xlarge",
json_path="s.json"))`` then run the script with ``env``; the summary lands in ``s.json``."""
from __future__ import annotations

import os
from typing import Dict, Optional

from ...errors import ConfigError
from ..torch.errors import TorchMissingError
from .session import ENV_INSTANCE, ENV_JSON, ENV_REPORT, ENV_TRACE

INSTALL_HINT = "pip install 'trnsim[torch]'  (a CPU build of torch is enough: torch_xla scripts run on the CPU)"


def _check_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise TorchMissingError("trnsim exec --instance runs torch_xla scripts on PyTorch, which is not installed",
                                rule="torch-extra", limit="torch installed", value=f"import torch failed: {e}",
                                hint=INSTALL_HINT) from None


def xla_env(instance: Optional[str], report: Optional[str] = None, trace: Optional[str] = None,
            hardware_file: Optional[str] = None, json_path: Optional[str] = None) -> Dict[str, str]:
    """Environment variables that switch recording on for ``instance`` (checked against the catalog)."""
    if not instance:
        raise ConfigError("--report and --trace need --instance (the instance the steps are estimated on)",
                          rule="exec-instance", limit="--instance NAME", value=None,
                          hint="trnsim exec --instance trn1.32xlarge --report run.html -- python train.py")
    from ...hardware import load_catalog
    cat = load_catalog(hardware_file)
    try:
        cat.instance(instance)
    except Exception as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"unknown instance {instance!r}", rule="instance", value=instance,
                          hint="trnsim hw list shows the catalog") from None
    _check_torch()
    env = {ENV_INSTANCE: instance}
    for key, path in ((ENV_REPORT, report), (ENV_TRACE, trace), (ENV_JSON, json_path)):
        if path:
            env[key] = os.path.abspath(path)
    return env
