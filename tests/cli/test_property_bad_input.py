"""Property: no generated malformed command line ever shows the user a traceback.

Hypothesis builds command lines for every subcommand (read from the parser itself, so a new one is
covered without editing this file): malformed option values, kernel arguments (shapes, dtypes,
names), launch grids, input and output files, and hardware files (bad TOML, out-of-range and
unknown figures).  Each runs in-process through ``main([..., "--json"])``; the result must be exit
0 with JSON, or exit 2 with ``{"error": {"rule", "message", "where"}}`` on stdout -- never exit 3
(trnsim's own fault) and never a Python traceback.  The JSON must be strict (no bare NaN/Infinity).

The Python API gets the same treatment: generated values of every checked parameter (NaN, infinities,
floats and strings where counts are meant, zero, negatives, huge values) either work or raise a
TrnsimError -- never a TypeError, ValueError or ZeroDivisionError -- and a value the API refuses is refused
by the command line with the same rule and message.
"""
import argparse
import itertools
import json
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from trnsim.cli.main import build_parser, main  # noqa: E402

EXAMPLES = int(os.environ.get("TRNSIM_PROPERTY_EXAMPLES", "120"))  # per property; three properties
_count = itertools.count()

KERNEL = '''
import neuronxcc.nki.language as nl

def copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out
'''

# subcommands whose run starts a process or a long search; covered through their argument checks
# only (a malformed value is always given, so they stop before the work)
SLOW = {"exec", "plan", "compare", "check", "estimate"}


def _leaf_parsers():
    """(command words, parser) for every runnable subcommand, nested groups (hw show) included."""
    out = []

    def walk(p, words):
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            out.append((words, p))
            return
        for name, sp in subs[0].choices.items():
            walk(sp, words + [name])
    walk(build_parser(), [])
    return [(w, p) for w, p in out if w]


LEAVES = _leaf_parsers()

junk = st.one_of(
    st.sampled_from(["", "-1", "0", "-0", "1e309", "nan", "inf", "x", "128x", "x128", "::", "a::b",
                     "../", "/", "/nonexistent/dir/f.json", "é", "😀", "9" * 40, "-9" * 10, "1,,2",
                     "trn9", "none", "None", "[1,2]", "{'a': 1}", "'quoted'", "--", "-", "128x128:f8",
                     "0x0", "128x-4:bf16", "a=b=c", " ", "\t", "%s", "{}", "0.0", "-1e-300"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=12),
    st.integers(min_value=-10**12, max_value=10**12).map(str),
)

dims = st.one_of(st.integers(min_value=-3, max_value=300), st.sampled_from([10**6, 10**9, 0]),
                 junk).map(str)
dtypes = st.one_of(st.sampled_from(["bf16", "f16", "f8", "f32", "i32", "float128", "fp8_e4m3", "int64",
                                    "object", "U8", "complex64", "float8_e4m3fn_x4", "tfloat32", ""]), junk)


@st.composite
def arg_specs(draw):
    """A ``--arg`` value: a name, a shape of generated dims and a dtype, or junk."""
    name = draw(st.one_of(st.just("a"), st.just("b"), junk))
    shape = "x".join(draw(st.lists(dims, min_size=0, max_size=4)))
    tail = draw(st.one_of(st.just(""), dtypes.map(lambda d: ":" + d)))
    return draw(st.sampled_from([f"{name}={shape}{tail}", f"{name}{shape}", f"{name}={draw(junk)}"]))


FIGURES = ["cores.v3.clocks|vector_hz", "cores.v3.sbuf|partitions", "cores.v3.psum|bank_bytes",
           "cores.v3.psum|banks", "cores.v3.tile_size|pmax", "cores.v3|dma_queues_per_engine",
           "cores.v3.timing.dma|efficiency", "cores.v3.timing.dma|transpose_hbm_efficiency",
           "chips.trn2|hbm_bytes", "chips.trn2|hbm_bandwidth_bytes_per_s", "cores.v3|lnc",
           'instances."trn2.48xlarge"|chips', "cores.v3.sbuf|nonsense", "nonsense|x", "cores|v3",
           "cores.v9|base", "chips.trn2|core", "cores.v3|targets"]
values = st.one_of(st.integers(min_value=-10, max_value=10**13).map(str),
                   st.sampled_from(["0", "-1", "0.0", "1.5", "1e400", "nan", "inf", "true", '"x"', "[]",
                                    "[0, -1]", '["trn2"]', "[1.5, 2]", "{}", '"v9"', '"v3"']))


@st.composite
def hardware_files(draw, tmp):
    """A user hardware file: a few figures with generated values (sometimes no source), or broken TOML."""
    tables = {}  # one header per table: TOML refuses a table declared twice
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        table, key = draw(st.sampled_from(FIGURES)).split("|")
        v = draw(values)
        src = draw(st.sampled_from([', source = "choice: test"'] * 3 + ["", ', source = ""',
                                                                        ', note = 1, source = "x"']))
        tables.setdefault(table, {})[key] = f"{{ value = {v}{src} }}" if draw(st.booleans()) else v
    text = "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in tables.items())
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        text = text[: draw(st.integers(min_value=0, max_value=max(0, len(text))))] + draw(junk)
    p = os.path.join(tmp, f"hw_{next(_count)}.toml")
    with open(p, "w", encoding="utf-8") as f:
        f.write(text)
    return p


def _value_for(draw, option: str, tmp: str, kfile: str):
    """A malformed (or occasionally valid) value for ``option``, by what the option takes."""
    if option == "--hardware":
        return draw(st.one_of(hardware_files(tmp), junk, st.just(os.path.join(tmp, "missing.toml"))))
    if option == "--arg":
        return draw(arg_specs())
    if option == "--inputs":
        p = os.path.join(tmp, f"in_{next(_count)}.npz")
        with open(p, "wb") as f:
            f.write(draw(st.binary(max_size=64)))
        return draw(st.sampled_from([p, os.path.join(tmp, "none.npz"), tmp]))
    if option in ("--trace", "--html", "--parquet", "--report", "--md", "--csv", "--out"):
        return draw(st.sampled_from([os.path.join(tmp, "no", "dir", "f.out"), tmp, "/proc/x/y"]))
    return draw(junk)


@st.composite
def command_lines(draw, tmp, kfile):
    """One command line: a subcommand, its positionals and at least one malformed option value."""
    words, p = draw(st.sampled_from(LEAVES))
    argv = list(words)
    opts = [a for a in p._actions if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction)]
    for a in p._actions:
        if a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        if a.dest == "target_spec":
            argv.append(draw(st.sampled_from([f"{kfile}::copy", f"{kfile}::nope", "nope.py::f", kfile])))
        elif a.dest == "cmd":
            argv += ["--", "true"]
        else:
            argv.append(draw(junk))
    chosen = draw(st.lists(st.sampled_from(opts), min_size=1, max_size=3)) if opts else []
    for a in chosen:
        argv[len(words):len(words)] = [a.option_strings[0], _value_for(draw, a.option_strings[0], tmp, kfile)]
    # slow commands always get one value they must refuse, so they stop before the work
    if words[0] in SLOW and "--hardware" in [o for a in opts for o in a.option_strings]:
        argv[len(words):len(words)] = ["--hardware", os.path.join(tmp, "missing.toml")]
    elif words[0] in SLOW and words[0] != "exec":
        argv[len(words):len(words)] = ["--model" if any("--model" in a.option_strings for a in opts)
                                       else opts[0].option_strings[0], "no-such-thing-" + draw(junk)]
    return argv


@st.composite
def kernel_lines(draw, tmp, kfile):
    """``trnsim kernel`` with generated arguments, launch options, files and hardware."""
    argv = ["kernel", draw(st.sampled_from([f"{kfile}::copy"] * 4 + [f"{kfile}::nope", "x.py::f", kfile]))]
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        argv += ["--arg", draw(st.one_of(arg_specs(), st.sampled_from(["a=128x128", "a=64x512:bf16"])))]
    argv += draw(st.sampled_from([[], [], ["--arg", "a=128x128"]]))
    for opt, strat in (("--grid", st.one_of(junk, st.sampled_from(["1", "2,1", "0,2", "1,1,1"]))),
                       ("--lnc", st.one_of(junk, st.sampled_from(["1", "2", "0", "-1"]))),
                       ("--target", st.one_of(junk, st.sampled_from(["trn1", "trn2", "trn3", "gen3"]))),
                       ("--trace-limit", st.one_of(junk, st.sampled_from(["-5", "0", "10"]))),
                       ("--seed", st.one_of(junk, st.sampled_from(["-1", "0", "7", str(2**70)])))):
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            argv += [opt, draw(strat)]
    for opt in ("--hardware", "--inputs", "--html", "--trace", "--parquet"):
        if draw(st.integers(min_value=0, max_value=11)) == 0:
            argv += [opt, _value_for(draw, opt, tmp, kfile)]
    if draw(st.booleans()):
        argv.append("--timing-only")
    return argv


@st.composite
def hardware_lines(draw, tmp, kfile):
    """Commands that read the catalog, each with a generated hardware file."""
    hw = draw(hardware_files(tmp))
    return draw(st.sampled_from([["hw", "list"], ["hw", "show", "trn2"], ["hw", "show", "v3"],
                                 ["demo", "--size", "128x128x512"],
                                 ["kernel", f"{kfile}::copy", "--arg", "a=128x128"],
                                 ["collective", "all-reduce", "--system", "trn2.48xlarge", "--size", "1MiB"]])) \
        + ["--hardware", hw]


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("prop"))
    k = os.path.join(tmp, "k.py")
    with open(k, "w") as f:
        f.write(KERNEL)
    return tmp, k


def _run_property(strategy, capsys, examples):
    """Run ``main`` on ``examples`` generated command lines; returns how many it tried."""
    tried = []

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def check(argv):
        tried.append(argv)
        rc = main(argv + ["--json"]) if "--" not in argv else main(argv[:1] + ["--json"] + argv[1:])
        cap = capsys.readouterr()
        assert "Traceback (most recent call last)" not in cap.out + cap.err, argv
        if rc == 0 and not cap.out.strip():
            return  # `exec -- true` ran the command: its output is its own
        body = json.loads(cap.out, parse_constant=_no_constant)   # strict JSON: no NaN / Infinity
        if rc != 0:
            assert rc == 2, (argv, body)
            e = body["error"]
            assert isinstance(e, dict) and {"rule", "message", "where"} <= set(e), (argv, body)
            assert e["rule"] != "internal", (argv, body)
    check()
    return len(tried)


def _no_constant(name):
    raise AssertionError(f"bare {name} in --json output")


def test_every_subcommand_refuses_malformed_values(place, capsys):
    n = _run_property(command_lines(*place), capsys, EXAMPLES)
    assert n >= min(EXAMPLES, 100) and len(LEAVES) >= 10


def test_kernel_command_lines(place, capsys):
    assert _run_property(kernel_lines(*place), capsys, EXAMPLES) >= min(EXAMPLES, 100)


def test_hardware_files(place, capsys):
    assert _run_property(hardware_lines(*place), capsys, EXAMPLES) >= min(EXAMPLES, 100)


# ------------------------------------------------------------------------------------ the Python API
API_VALUES = st.one_of(
    st.sampled_from([0, -1, 1, 2, 1.5, 2.0, float("nan"), float("inf"), -float("inf"), 10 ** 12, 10 ** 30,
                     "2", "x", None, True, [], 1e-300]),
    st.integers(min_value=-10 ** 6, max_value=10 ** 6),
    st.floats(allow_nan=True, allow_infinity=True))
NAMING = ["model", "instance", "precision", "sparsity", "lnc"]   # wrong types must be TrnsimErrors too
TRAIN_PARAMS = ["nodes", "tp", "pp", "dp", "cp", "ep", "vp", "zero", "seq", "global_batch", "micro_batch",
                "recompute"] + NAMING
INFER_PARAMS = ["nodes", "tp", "pp", "ep", "batch", "input_len", "output_len", "rate", "requests", "max_batch",
                "seed"] + NAMING
# the CLI spelling of each parameter, where the command line has it (estimate train / infer)
CLI_OPTION = {"nodes": "--nodes", "tp": "--tp", "pp": "--pp", "dp": "--dp", "cp": "--cp", "ep": "--ep",
              "vp": "--vp", "zero": "--zero", "seq": "--seq", "global_batch": "--global-batch",
              "micro_batch": "--micro-batch", "batch": "--batch", "input_len": "--input", "output_len": "--output",
              "rate": "--rate", "requests": "--requests", "max_batch": "--max-batch", "seed": "--seed"}


@st.composite
def api_calls(draw):
    """(function name, keyword arguments) with one to three generated values."""
    kind = draw(st.sampled_from(["train", "infer", "workload", "power"]))
    names = {"train": TRAIN_PARAMS, "infer": INFER_PARAMS,
             "workload": ["tokens", "seq", "batch_tokens", "deadline_days", "max_instances", "input_len",
                          "output_len", "rate", "slo_tpot_ms", "slo_ttft_ms", "task", "precision"],
             "power": ["pue"]}[kind]
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    return kind, {n: draw(API_VALUES) for n in chosen}


def _call(kind, kw):
    from trnsim.compare.options import make_power, make_workload
    from trnsim.model import estimate_inference, estimate_training
    if kind == "train":
        return estimate_training(**{"model": "llama-3-8b", "instance": "trn1.32xlarge", "tp": 8, "dp": None, **kw})
    if kind == "infer":
        return estimate_inference(**{"model": "llama-3-8b", "instance": "trn2.48xlarge", "requests": 20, **kw})
    if kind == "workload":
        return make_workload(**{"model": "llama-3-8b", "task": "train", "tokens": 1e9, **kw})
    return make_power(**kw)


def _cli_equivalent(kind, kw):
    """The estimate command line for the same values, when every value has a CLI spelling argparse takes."""
    if kind not in ("train", "infer"):
        return None
    argv = ["estimate", kind, "--model", "llama-3-8b", "--instance",
            "trn1.32xlarge" if kind == "train" else "trn2.48xlarge"]
    if kind == "train":
        argv += ["--tp", "8"]
    else:
        argv += ["--requests", "20"]
    for k, v in kw.items():
        if k not in CLI_OPTION or k in NAMING:
            return None
        typed = float if k == "rate" else int
        if v is None or isinstance(v, (bool, list, str)) or (typed is int and not isinstance(v, int)):
            return None   # argparse itself refuses these (a usage error), or the option cannot spell them
        if k in ("tp", "requests"):
            argv = [a for i, a in enumerate(argv) if not (a == CLI_OPTION[k] or (i and argv[i - 1] == CLI_OPTION[k]))]
        # OPTION=VALUE: argparse reads a lone "-1e+16" as an option, not a value
        argv.append(f"{CLI_OPTION[k]}={repr(v) if isinstance(v, float) else v}")
    return argv


def test_python_api_refuses_what_the_cli_refuses(capsys):
    from trnsim.errors import TrnsimError
    tried, compared = [], []

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(api_calls())
    def check(call):
        kind, kw = call
        tried.append(call)
        try:
            _call(kind, kw)
            api_err = None
        except TrnsimError as e:
            api_err = e
        # anything else (TypeError, ValueError, ZeroDivisionError...) fails the test here
        if api_err is None or api_err.rule not in ("option-value", "batch", "plan-count"):
            return
        argv = _cli_equivalent(kind, kw)
        if argv is None:
            return
        compared.append(argv)
        rc = main(argv + ["--json"])
        body = json.loads(capsys.readouterr().out, parse_constant=_no_constant)
        assert rc == 2, (argv, body)
        cli = body["error"]
        assert (cli["rule"], cli["message"]) == (api_err.rule, api_err.message), (argv, cli, api_err.as_dict())
    check()
    assert len(tried) >= min(EXAMPLES, 100) and len(compared) >= min(EXAMPLES, 100) // 10
