"""The package's structure, read from its source with ``ast`` (docs/architecture.md has the picture):
folders import each other only downward (function-level imports count), the layers below the NKI
front end never reach it, no two modules import each other, no module is over 500 lines, every
public definition has a docstring."""
import ast
import os
import re
from collections import defaultdict
from typing import Dict, List, Optional, Set, Tuple

import trnsim

PKG_DIR = os.path.dirname(os.path.abspath(trnsim.__file__))
ROOT = os.path.dirname(PKG_DIR)
MAX_LINES = 500
# folders that sit below the NKI front end and must not reach it, even through another module
BELOW_FRONT_END = ("timing", "fabric", "model", "ir", "des", "hardware")
FRONT_END = ("nki", "frontends", "compat")


def _modules() -> Dict[str, str]:
    """Dotted module name -> file path, for every .py file of the package."""
    mods = {}
    for d, dirs, files in os.walk(PKG_DIR):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                p = os.path.join(d, f)
                name = os.path.relpath(p, ROOT)[:-3].replace(os.sep, ".")
                mods[name.removesuffix(".__init__")] = p
    return mods


MODULES = _modules()
# folders without an __init__.py (namespace packages) still name their layer in an import
FOLDERS = {os.path.relpath(d, ROOT).replace(os.sep, "."): d for d, _, _ in os.walk(PKG_DIR)
           if "__pycache__" not in d}
# compiled extension modules (setup.py): modules with no imports of their own
EXTENSIONS = set(re.findall(r"Extension\(\s*[\"']([\w.]+)[\"']",
                            open(os.path.join(ROOT, "setup.py"), encoding="utf-8").read()))
TREES = {m: ast.parse(open(p, encoding="utf-8").read(), filename=p) for m, p in MODULES.items()}


def node_of(mod: str) -> str:
    """The layer unit a module belongs to: its folder under trnsim/ ('nki/core'), or for a module
    directly in trnsim/ the module itself ('options.py', '__init__.py')."""
    if mod not in MODULES:  # a namespace package: the folder itself
        return os.path.relpath(FOLDERS[mod], PKG_DIR).replace(os.sep, "/")
    rel = os.path.relpath(MODULES[mod], PKG_DIR).replace(os.sep, "/")
    folder, _, fname = rel.rpartition("/")
    return folder if folder else fname


def _resolve(name: str) -> Optional[str]:
    """The package module an import names (``trnsim.hardware.load_catalog`` -> ``trnsim.hardware``)."""
    while name and name not in MODULES and (name not in FOLDERS or name == "trnsim"):
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_imports(tree: ast.Module) -> Set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (annotations only: nothing runs them)."""
    out: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                out.update(id(n) for b in node.body for n in ast.walk(b))
    return out


def imports_of(mod: str) -> List[Tuple[str, int]]:
    """(imported package module, line) for every import in ``mod``, at any depth of the code."""
    path = MODULES[mod]
    base = mod if path.endswith("__init__.py") else mod.rpartition(".")[0]
    out = []
    typing_only = _type_checking_imports(TREES[mod])
    for node in ast.walk(TREES[mod]):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                parts = parts[:len(parts) - (node.level - 1)]
                target = ".".join(parts + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from pkg import sub` imports the submodule when there is one, else pkg itself
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
                     for a in node.names if f"{target}.{a.name}" not in EXTENSIONS]
        else:
            continue
        for n in names:
            got = _resolve(n) if n.startswith("trnsim") else None
            if got:
                out.append((got, node.lineno))
    return out


def _related(a: str, b: str) -> bool:
    """A folder and its own subfolders form one unit (nki/ and nki/core/ may share helpers)."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def folder_graph() -> Dict[str, Dict[str, List[str]]]:
    """node -> imported node -> ['module:line', ...] evidence."""
    g: Dict[str, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
    for mod in MODULES:
        src = node_of(mod)
        for dst_mod, line in imports_of(mod):
            dst = node_of(dst_mod)
            if not _related(src, dst):
                g[src][dst].append(f"{os.path.relpath(MODULES[mod], ROOT)}:{line} -> {dst_mod}")
    return g


def _cycles(g) -> List[List[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    comps = []
    counter = 0
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def test_no_cycles_between_folders():
    g = folder_graph()
    problems = []
    for comp in _cycles(g):
        members = set(comp)
        lines = [f"folders importing each other: {' <-> '.join(comp)}"]
        for a in comp:
            for b, ev in sorted(g[a].items()):
                if b in members:
                    lines.append(f"  {a} -> {b}: {ev[0]}" + (f" (+{len(ev) - 1} more)" if len(ev) > 1 else ""))
        problems.append("\n".join(lines))
    assert not problems, "\n".join(problems)


def test_the_cycle_finder_finds_cycles():
    """The checker itself: a hand-made graph with one cycle and one chain."""
    g = {"a": {"b": []}, "b": {"c": []}, "c": {"a": []}, "d": {"a": []}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"x": {"y": []}, "y": {}}) == []


def test_lower_layers_do_not_reach_the_nki_front_end():
    g = folder_graph()
    problems = []
    for low in BELOW_FRONT_END:
        # everything reachable from the layer, through any chain of imports
        seen, todo, via = {low}, [low], {}
        while todo:
            v = todo.pop()
            for w in g.get(v, {}):
                if w not in seen:
                    seen.add(w)
                    via[w] = v
                    todo.append(w)
        for bad in sorted(seen):
            if bad.split("/")[0] in FRONT_END:
                chain = [bad]
                while chain[-1] != low:
                    chain.append(via[chain[-1]])
                first = chain[-2]
                problems.append(f"{low}/ reaches {bad}/ via {' -> '.join(reversed(chain))}; "
                                f"first step: {g[low][first][0]}")
    assert not problems, "\n".join(problems)


def test_no_module_over_500_lines():
    big = []
    for mod, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            big.append(f"{os.path.relpath(path, ROOT)}: {n} lines")
    assert not big, f"modules over {MAX_LINES} lines:\n" + "\n".join(sorted(big))


def _public_defs(tree: ast.Module):
    """(qualified name, node) of public functions and classes at module and class level."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and not node.name.startswith("_"):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                            and not sub.name.startswith("_"):
                        yield f"{node.name}.{sub.name}", sub


def test_every_public_definition_has_a_docstring():
    missing = []
    for mod, tree in TREES.items():
        for name, node in _public_defs(tree):
            if not ast.get_docstring(node):
                missing.append(f"{os.path.relpath(MODULES[mod], ROOT)}:{node.lineno} {name}")
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(missing)


def test_the_import_walk_sees_function_level_imports():
    """The walk is real: it finds imports inside functions and resolves relative ones."""
    got = dict((m, line) for m, line in imports_of("trnsim.api"))
    assert "trnsim.nki.harness" in got       # imported inside trace()
    assert "trnsim.options" in got           # `from .options import Options`
    assert node_of("trnsim.hardware.catalog") == "hardware"
    assert node_of("trnsim.options") == "options.py"


def module_graph() -> Dict[str, Dict[str, List[str]]]:
    """module -> imported module -> ['file:line', ...]; a module importing itself or its own package's
    ``__init__`` through a submodule path does not count."""
    g: Dict[str, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
    for mod in MODULES:
        for dst, line in imports_of(mod):
            if dst != mod and dst in MODULES:
                g[mod][dst].append(f"{os.path.relpath(MODULES[mod], ROOT)}:{line}")
    return g


def test_no_file_level_import_cycles():
    """Two modules that import each other (function-level imports included) are one room, not two."""
    g = module_graph()
    new = [sorted(c) for c in _cycles(g)]
    lines = []
    for comp in new:
        lines.append("modules importing each other: " + " <-> ".join(comp))
        for a in comp:
            for b, ev in sorted(g[a].items()):
                if b in comp:
                    lines.append(f"  {ev[0]} -> {b}")
    assert not new, "\n".join(lines)
