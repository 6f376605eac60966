"""Model architectures as data: the zoo (one TOML per model) and Hugging Face ``config.json`` files.

No network and no ``transformers``: a config.json is read as JSON and mapped key by key; a missing or
malformed key is a ConfigError naming it.  The record itself (``ModelConfig``) lives in ``spec``.
"""
from __future__ import annotations

import difflib
import functools
import json
import os
from typing import Dict, List, Optional

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as _toml  # type: ignore

from .hf import from_hf_config
from .spec import ModelConfig, ModelConfigError, from_mapping, validate

ZOO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zoo")


# ------------------------------------------------------------------------------------ the zoo
@functools.lru_cache(maxsize=1)
def zoo() -> Dict[str, ModelConfig]:
    """Every built-in model, by name."""
    out = {}
    for f in sorted(os.listdir(ZOO_DIR)):
        if f.endswith(".toml"):
            path = os.path.join(ZOO_DIR, f)
            with open(path, "rb") as fh:
                cfg = from_mapping(_toml.load(fh), path)
            out[cfg.name] = cfg
    return out


def model_names() -> List[str]:
    """Names of the built-in models, sorted."""
    return sorted(zoo())


def load_model(name_or_path: str) -> ModelConfig:
    """A zoo model by name, or a Hugging Face config.json / zoo-style TOML by path."""
    if os.path.exists(name_or_path) or name_or_path.endswith((".json", ".toml")):
        return load_file(name_or_path)
    models = zoo()
    key = name_or_path.strip().lower()
    if key in models:
        return models[key]
    near = difflib.get_close_matches(key, list(models), n=3, cutoff=0.5)
    raise ModelConfigError(f"unknown model {name_or_path!r}", rule="model-name", limit="trnsim models",
                           value=name_or_path,
                           hint=("did you mean " + ", ".join(near) + "?") if near else
                           "run `trnsim models` for the list, or pass a config.json path")


def load_file(path: str) -> ModelConfig:
    """Read a config.json (Hugging Face) or a zoo-style TOML file."""
    if not os.path.isfile(path):  # a folder is no config file either
        raise ModelConfigError(f"model config file not found: {path}", rule="model-config-file", value=path)
    if path.endswith(".toml"):
        with open(path, "rb") as fh:
            try:
                return from_mapping(_toml.load(fh), path)
            except (_toml.TOMLDecodeError, UnicodeDecodeError, RecursionError) as e:
                raise ModelConfigError(f"{path} is not valid TOML: {e}", rule="model-config-syntax",
                                       value=path) from None
    with open(path, encoding="utf-8") as fh:
        try:
            d = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            raise ModelConfigError(f"{path} is not valid JSON: {e}", rule="model-config-syntax",
                                   value=path) from None
    name = os.path.basename(os.path.dirname(os.path.abspath(path))) or "model"
    return from_hf_config(d, name=name, origin=path)


def suggest(name: str) -> Optional[str]:
    """Nearest zoo name to ``name`` or None."""
    near = difflib.get_close_matches(name.lower(), model_names(), n=1, cutoff=0.5)
    return near[0] if near else None


__all__ = ["ModelConfig", "ModelConfigError", "ZOO_DIR", "from_mapping", "load_file", "load_model", "model_names",
           "suggest", "validate", "zoo"]
