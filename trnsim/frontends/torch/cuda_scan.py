"""Find hard-coded CUDA use in model source with ``ast`` (no execution): ``.cuda()``, ``device="cuda"``,
``.to("cuda")``, ``torch.device("cuda")``, ``torch.cuda.*``, and imports of GPU-only packages."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional

# packages whose kernels run only on NVIDIA GPUs (each needs an NKI or XLA replacement on Trainium)
GPU_ONLY_PACKAGES = ("flash_attn", "xformers", "apex", "triton", "bitsandbytes", "transformer_engine",
                     "cupy", "pycuda", "deepspeed.ops", "torch.utils.cpp_extension", "mamba_ssm", "causal_conv1d")


@dataclass(frozen=True)
class CudaFinding:
    """One place in the source that ties the model to CUDA."""
    file: str
    line: int
    kind: str      # "cuda-call" | "cuda-device" | "torch.cuda" | "gpu-import"
    text: str      # the source line, stripped

    def to_dict(self) -> dict:
        """Plain JSON-able fields."""
        return {"file": self.file, "line": self.line, "kind": self.kind, "text": self.text}


def _is_cuda_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def _dotted(node: ast.AST) -> Optional[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self):
        self.hits: List[tuple] = []  # (line, kind)

    def visit_Call(self, node: ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "cuda":
            self.hits.append((node.lineno, "cuda-call"))
        elif isinstance(f, ast.Attribute) and f.attr == "to" and any(_is_cuda_str(a) for a in node.args):
            self.hits.append((node.lineno, "cuda-device"))
        elif _dotted(f) in ("torch.device", "device") and node.args and _is_cuda_str(node.args[0]):
            self.hits.append((node.lineno, "cuda-device"))
        if any(k.arg == "device" and _is_cuda_str(k.value) for k in node.keywords):
            self.hits.append((node.lineno, "cuda-device"))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        name = _dotted(node)
        if name and (name.startswith("torch.cuda.") or name.startswith("torch.backends.cudnn.")):
            self.hits.append((node.lineno, "torch.cuda"))
            return  # one hit per chain, not one per prefix
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import):
        for a in node.names:
            if _gpu_only(a.name):
                self.hits.append((node.lineno, "gpu-import"))

    def visit_ImportFrom(self, node: ast.ImportFrom):
        mod = node.module or ""
        if _gpu_only(mod) or any(_gpu_only(f"{mod}.{a.name}") for a in node.names):
            self.hits.append((node.lineno, "gpu-import"))


def _gpu_only(name: str) -> bool:
    """Whether a module name is (inside) a GPU-only package."""
    return any(name == p or name.startswith(p + ".") for p in GPU_ONLY_PACKAGES)


def scan_source(text: str, file: str = "<string>") -> List[CudaFinding]:
    """Every CUDA tie in ``text``, one finding per (line, kind), in line order."""
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError:
        return []  # the import step reports syntax errors with their line
    v = _Visitor()
    v.visit(tree)
    lines = text.splitlines()
    seen = sorted(set(v.hits))
    return [CudaFinding(file, ln, kind, lines[ln - 1].strip() if 0 < ln <= len(lines) else "") for ln, kind in seen]


def scan_file(path: str) -> List[CudaFinding]:
    """``scan_source`` of a file (an unreadable file has no findings)."""
    try:
        with open(path, encoding="utf-8") as f:
            return scan_source(f.read(), path)
    except OSError:
        return []
