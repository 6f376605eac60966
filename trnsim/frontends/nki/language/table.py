"""The signature table of ``nki.language``: each call's public parameters (as NKI >= 0.2 spells
them), what it calls and its docstring.  ``language/__init__`` builds the wrappers from it
(``frontends/nki/_signature.py``).  ``ops`` names the instruction families of ``trnsim.nki.ops``,
``cmp`` the composed calls of ``language/compose.py``, ``alloc``/``fill`` allocation."""
from __future__ import annotations

from ....nki.ops.activation import UNARY_FUNCTIONS
from .._signature import Row

# elementwise binary calls: name -> ALU token (fmod: C fmod, the sign of the dividend)
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "mod", "fmod",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
          "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
          "right_shift", "logical_shift_right", "arithmetic_shift_right")
# reductions over the trailing free axes: name -> ALU token
REDUCTIONS = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply",
              "all": "logical_and", "any": "logical_or"}
# calls that are also ALU / activation tokens (passing the function to an instruction names it)
TOKENS = {**{n: n for n in BINARY}, **{n: n for n in UNARY_FUNCTIONS}, **REDUCTIONS,
          "copy": "copy", "abs_max": "abs_max"}


def _nl(name, params, call, doc) -> Row:
    return Row(name, params, call, doc, tensors=(), prefix="nl", handle=False)


ROWS = (
    # -- tensor creation
    _nl("ndarray", "shape, dtype, buffer=sbuf, name='', address=None",
        "cmp.alloc(shape, dtype, buffer, name, address)",
        "An uninitialized tensor; the partition dim is always dim 0 (no block dims)."),
    _nl("zeros", "shape, dtype, buffer=sbuf, name=''",
        "fill.filled(shape, dtype, sbuf if buffer is None else buffer, name, 0, conv=cmp.CONV)",
        "A tensor of zeros."),
    _nl("ones", "shape, dtype, buffer=sbuf, name=''",
        "fill.filled(shape, dtype, sbuf if buffer is None else buffer, name, 1, conv=cmp.CONV)",
        "A tensor of ones."),
    _nl("full", "shape, fill_value, dtype, buffer=sbuf, name=''",
        "fill.filled(shape, dtype, sbuf if buffer is None else buffer, name, fill_value, "
        "conv=cmp.CONV)", "A tensor filled with ``fill_value``."),
    _nl("empty_like", "x, dtype=None, buffer=None, name=''",
        "ndarray(x.shape, dtype or x.dtype, cmp.like_buffer(x, buffer), name)",
        "An uninitialized tensor shaped like ``x`` (in ``x``'s buffer unless told)."),
    _nl("zeros_like", "x, dtype=None, buffer=None, name=''",
        "zeros(x.shape, dtype or x.dtype, buffer or sbuf, name)", "Zeros shaped like ``x``."),
    _nl("ones_like", "x, dtype=None, buffer=None, name=''",
        "ones(x.shape, dtype or x.dtype, buffer or sbuf, name)", "Ones shaped like ``x``."),
    _nl("full_like", "x, fill_value, dtype=None, buffer=None, name=''",
        "full(x.shape, fill_value, dtype or x.dtype, buffer or sbuf, name)",
        "``fill_value`` everywhere, shaped like ``x``."),
    _nl("rand", "shape, dtype=dtypes.float32, buffer=sbuf, name=''",
        "cmp.rand(shape, dtype, buffer, name)",
        "Uniform [0, 1) values (seeded by ``nl.random_seed`` / TRNSIM_SEED)."),
    _nl("random_seed", "seed", "ops.random.random_seed(seed)",
        "Seed the random numbers of ``nl.rand`` / ``dropout``."),
    _nl("shared_constant", "constant, dtype=None", "alloc.shared_constant(constant, dtype)",
        "A constant HBM tensor (an array or the path of a .npy file)."),
    _nl("shared_identity_matrix", "n, dtype=dtypes.uint8, dst=None",
        "cmp.shared_identity_matrix(n, dtype, dst)",
        "An n x n identity in SBUF (a constant in HBM, DMA-copied into ``dst`` or a new tile)."),
    # -- memory movement (experimental wrappers)
    _nl("load", "src, dtype=None", "ops.dma.load(src, dtype=dtype)", "HBM -> a new SBUF tile."),
    _nl("store", "dst, value", "ops.dma.store(dst, value)", "An SBUF tile -> HBM."),
    _nl("load_transpose2d", "src, dtype=None", "ops.dma.load_transpose2d(src, dtype=dtype)",
        "HBM -> a new SBUF tile, the two dims swapped by the DMA."),
    _nl("copy", "x, dtype=None", "ops.elementwise.tensor_copy(None, x, dtype=dtype)",
        "A new SBUF tile with the values of ``x``; also the identity activation token."),
    _nl("broadcast_to", "x, shape, dtype=None", "cmp.broadcast_to(x, shape, dtype)",
        "A stride-0 view of ``x`` repeating its size-1 dims (copied when ``dtype`` is given)."),
    _nl("expand_dims", "x, axis", "x.expand_dim(axis)", "A view of ``x`` with a size-1 dim at ``axis``."),
    _nl("transpose", "x, dtype=None", "cmp.transpose(x, dtype)",
        "Swap the partition and (single) free axis of a 2-D tile."),
    _nl("matmul", "x, y, transpose_x=False", "ops.matmul.nl_matmul(x, y, transpose_x=transpose_x)",
        "``x @ y`` (or ``x.T @ y``) into a new PSUM tile (fp32)."),
    _nl("gather_flattened", "data, indices, axis=0, dtype=None",
        "cmp.gather_flattened(data, indices, axis, dtype)",
        "A new tile shaped like ``indices``: per partition, the elements of ``data`` at ``indices``\n"
        "over the free dims from free axis ``axis`` on, flattened (see nki.ops.gather)."),
    # -- elementwise math
    *(_nl(n, "x, y, dtype=None", f"ops.elementwise.binary({n!r}, x, y, dtype=dtype)",
          f"Elementwise {n} with numpy broadcasting; also the ALU token ``nl.{n}``.")
      for n in BINARY),
    *(_nl(n, "x, y, dtype=None", f"cmp.by_magnitude({n!r}, x, y, dtype)",
          f"Elementwise {n}: the signed input of {'larger' if n == 'abs_max' else 'smaller'} "
          "magnitude (y on ties); NeuronCore-v4 (trn3) only.") for n in ("abs_max", "abs_min")),
    *(_nl(n, "x, dtype=None", f"ops.activation.unary({n!r}, x, dtype=dtype)",
          f"Elementwise {n}; also the activation token ``nl.{n}``.") for n in UNARY_FUNCTIONS),
    _nl("where", "condition, x, y, dtype=None",
        "ops.select.select(None, condition, x, y, dtype=dtype)",
        "Per element ``x`` where ``condition`` is nonzero, else ``y`` (tiles or scalars)."),
    _nl("dropout", "x, rate, dtype=None", "ops.random.dropout(None, x, rate, dtype=dtype)",
        "Zero each element with probability ``rate``."),
    # -- reductions
    *(_nl(n, "x, axis, dtype=None, keepdims=False",
          f"ops.reduce.reduce_free(None, {t!r}, x, axis, dtype=dtype, keepdims=keepdims)",
          f"Reduce with {t} over the trailing free axes; also the ALU token ``nl.{n}``.")
      for n, t in REDUCTIONS.items()),
    _nl("mean", "x, axis, dtype=None, keepdims=False",
        "ops.reduce.mean(None, x, axis, dtype=dtype, keepdims=keepdims)",
        "Mean over the trailing free axes ``axis``."),
    _nl("var", "x, axis, dtype=None, keepdims=False", "cmp.var(x, axis, dtype)",
        "Population variance over ``axis`` (result keeps the reduced dims, as documented)."),
    _nl("softmax", "x, axis=-1, dtype=None", "cmp.softmax(x, axis, dtype)",
        "exp(x - max) / sum over the last axis of a 2-D tile."),
    _nl("rms_norm", "x, w, axis, n, epsilon=1e-6, dtype=None, compute_dtype=None",
        "cmp.rms_norm(x, w, axis, n, epsilon, dtype)", "``x / sqrt(sum(x^2)/n + eps) * w``."),
    _nl("device_print", "print_prefix, tensor=None", "common.device_print(print_prefix, tensor)",
        "Print a tensor's values from inside the kernel (stdout)."),
)
