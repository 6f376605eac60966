"""Legacy NKI index expressions: ``nl.arange``, ``nl.mgrid``, affine expressions, masks, ``nl.ds``.

An index expression is affine in the *axes* of an iteration space: ``const + sum(coef[a] * i_a)``.
Axes are positions, as in numpy broadcasting, so ``nl.arange(128)[:, None]`` used twice denotes the
same axis.  Keeping the affine form lets a subscript with one axis per tensor dimension become a
strided numpy view (no copy), and lets masks and ``affine_select`` predicates be evaluated over the
instruction's iteration space.  Non-affine arithmetic (``%``, ``//``, products of two axes) falls
back to an explicit integer array (``IndexArray``).
"""
from __future__ import annotations

import operator
from typing import Any, Optional, Tuple

import numpy as np

from ...errors import IndexingError


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _bshape(a: Tuple[int, ...], b: Tuple[int, ...]) -> Tuple[int, ...]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise IndexingError(f"index expressions of shapes {a} and {b} do not broadcast",
                                rule="index-broadcast", value=(a, b))
    return tuple(out)


class _IndexBase:
    """Shared operators of affine expressions and explicit index arrays."""
    __array_ufunc__ = None  # numpy scalars defer to our reflected operators
    __slots__ = ()

    shape: Tuple[int, ...]

    def values(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dense(self) -> np.ndarray:
        """Values broadcast to the full shape."""
        return np.broadcast_to(self.values(), self.shape)

    # comparisons build predicates (masks, affine_select)
    def _cmp(self, other, op, sym):
        return Predicate.compare(self, other, op, sym)

    def __lt__(self, o): return self._cmp(o, np.less, "<")
    def __le__(self, o): return self._cmp(o, np.less_equal, "<=")
    def __gt__(self, o): return self._cmp(o, np.greater, ">")
    def __ge__(self, o): return self._cmp(o, np.greater_equal, ">=")
    def __eq__(self, o): return self._cmp(o, np.equal, "==")  # type: ignore[override]
    def __ne__(self, o): return self._cmp(o, np.not_equal, "!=")  # type: ignore[override]
    __hash__ = object.__hash__

    def __bool__(self):
        raise IndexingError("control flow cannot depend on an index expression (nl.arange/mgrid); "
                            "use a mask= or affine_select instead",
                            rule="err_control_flow_condition_depending_on_arange")

    def __index__(self):
        raise IndexingError("an index expression cannot be used where a Python integer is needed",
                            rule="err_control_flow_condition_depending_on_arange")

    # non-affine arithmetic -> explicit arrays
    def _arr_op(self, other, op, reverse=False):
        a = self.values()
        b = other.values() if isinstance(other, _IndexBase) else other
        if not (isinstance(other, _IndexBase) or _is_int(other)):
            return NotImplemented
        shape = _bshape(self.shape, other.shape) if isinstance(other, _IndexBase) else self.shape
        r = op(b, a) if reverse else op(a, b)
        return IndexArray(r, shape)

    def __floordiv__(self, o): return self._arr_op(o, operator.floordiv)
    def __rfloordiv__(self, o): return self._arr_op(o, operator.floordiv, True)
    def __mod__(self, o): return self._arr_op(o, operator.mod)
    def __rmod__(self, o): return self._arr_op(o, operator.mod, True)


class IndexExpr(_IndexBase):
    """``const + sum(coefs[a] * i_a)`` over axes ``a`` of an iteration space of ``shape``."""
    __slots__ = ("const", "coefs", "shape")

    def __init__(self, const: int, coefs: Tuple[int, ...], shape: Tuple[int, ...]):
        self.const = int(const)
        self.coefs = tuple(int(c) for c in coefs)
        self.shape = tuple(int(s) for s in shape)

    def __repr__(self):
        terms = [f"{c}*i{a}[{self.shape[a]}]" for a, c in enumerate(self.coefs) if c]
        return "IndexExpr(" + " + ".join([str(self.const)] + terms) + ")"

    @property
    def axes(self) -> Tuple[int, ...]:
        """The iteration-space axes the expression varies along."""
        return tuple(a for a, c in enumerate(self.coefs) if c)

    def values(self) -> np.ndarray:
        """The integer values over the iteration space (broadcastable to ``shape``)."""
        nd = len(self.shape)
        v = np.asarray(self.const, dtype=np.int64)
        for a, c in enumerate(self.coefs):
            if c:
                s = [1] * nd
                s[a] = self.shape[a]
                v = v + c * np.arange(self.shape[a], dtype=np.int64).reshape(s)
        if v.ndim < nd:
            v = v.reshape((1,) * (nd - v.ndim) + v.shape)
        return v

    def bounds(self) -> Tuple[int, int]:
        """(lowest, highest) value the expression takes."""
        lo = hi = self.const
        for a, c in enumerate(self.coefs):
            if c:
                span = c * (self.shape[a] - 1)
                lo += min(0, span)
                hi += max(0, span)
        return lo, hi

    def _padded(self, nd: int):
        k = nd - len(self.shape)
        return (0,) * k + self.coefs, (1,) * k + self.shape

    def _combine(self, other, sign: int):
        if _is_int(other):
            return IndexExpr(self.const + sign * int(other), self.coefs, self.shape)
        if isinstance(other, IndexExpr):
            shape = _bshape(self.shape, other.shape)
            nd = len(shape)
            ca, _ = self._padded(nd)
            cb, _ = other._padded(nd)
            return IndexExpr(self.const + sign * other.const,
                             tuple(x + sign * y for x, y in zip(ca, cb)), shape)
        if isinstance(other, IndexArray):
            return IndexArray(self.values() + sign * other.values(), _bshape(self.shape, other.shape))
        return NotImplemented

    def __add__(self, o): return self._combine(o, 1)
    def __radd__(self, o): return self._combine(o, 1)
    def __sub__(self, o): return self._combine(o, -1)

    def __rsub__(self, o):
        r = self._combine(o, -1)
        if r is NotImplemented:
            return r
        return -r

    def __neg__(self):
        return IndexExpr(-self.const, tuple(-c for c in self.coefs), self.shape)

    def __pos__(self):
        return self

    def __mul__(self, o):
        if _is_int(o):
            o = int(o)
            return IndexExpr(self.const * o, tuple(c * o for c in self.coefs), self.shape)
        if isinstance(o, IndexExpr) and not o.axes:
            return self * o.const
        if isinstance(o, _IndexBase):
            if not self.axes:
                return o * self.const
            return IndexArray(self.values() * o.values(), _bshape(self.shape, o.shape))
        return NotImplemented

    __rmul__ = __mul__

    def __getitem__(self, key):
        """Lift a 1-D arange into an axis of a larger space: ``a[:, None]``, ``a[None, :]``."""
        if not isinstance(key, tuple):
            key = (key,)
        coefs, shape = [], []
        src = 0
        for k in key:
            if k is None:
                coefs.append(0)
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                coefs.append(self.coefs[src])
                shape.append(self.shape[src])
                src += 1
            else:
                raise IndexingError("an nl.arange can only be lifted with ':' and 'None' "
                                    "(e.g. nl.arange(128)[:, None])", rule="index-lift", value=key)
        if src != len(self.shape):
            raise IndexingError("lifting must keep every axis of the index", rule="index-lift",
                                value=key)
        return IndexExpr(self.const, tuple(coefs), tuple(shape))


class IndexArray(_IndexBase):
    """An index that is not affine: explicit integer values broadcastable to ``shape``."""
    __slots__ = ("arr", "shape")

    def __init__(self, arr: np.ndarray, shape: Tuple[int, ...]):
        self.arr = np.asarray(arr, dtype=np.int64)
        self.shape = tuple(shape)

    def values(self) -> np.ndarray:
        """The integer values, padded to the rank of ``shape``."""
        v = self.arr
        if v.ndim < len(self.shape):
            v = v.reshape((1,) * (len(self.shape) - v.ndim) + v.shape)
        return v

    def bounds(self) -> Tuple[int, int]:
        """(lowest, highest) index value."""
        return int(self.arr.min()), int(self.arr.max())

    def _lin(self, o, f):
        if _is_int(o):
            return IndexArray(f(self.arr, int(o)), self.shape)
        if isinstance(o, _IndexBase):
            return IndexArray(f(self.values(), o.values()), _bshape(self.shape, o.shape))
        return NotImplemented

    def __add__(self, o): return self._lin(o, operator.add)
    __radd__ = __add__
    def __sub__(self, o): return self._lin(o, operator.sub)
    def __rsub__(self, o): return self._lin(o, lambda a, b: b - a)
    def __mul__(self, o): return self._lin(o, operator.mul)
    __rmul__ = __mul__
    def __neg__(self): return IndexArray(-self.arr, self.shape)


class Predicate:
    """A mask or select condition over index axes; evaluates to a broadcastable bool array."""
    __array_ufunc__ = None
    __slots__ = ("fn", "shape", "text", "_val")

    def __init__(self, fn, shape, text):
        self.fn = fn
        self.shape = tuple(shape)
        self.text = text
        self._val = None

    @staticmethod
    def compare(lhs, rhs, op, sym) -> "Predicate":
        """The predicate ``lhs <op> rhs`` over index expressions (NotImplemented otherwise)."""
        if isinstance(rhs, _IndexBase):
            shape = _bshape(lhs.shape, rhs.shape)
            return Predicate(lambda: op(lhs.values(), rhs.values()), shape, f"({lhs!r} {sym} {rhs!r})")
        if _is_int(rhs) or isinstance(rhs, (float, np.floating)):
            return Predicate(lambda: op(lhs.values(), rhs), lhs.shape, f"({lhs!r} {sym} {rhs})")
        return NotImplemented

    def values(self) -> np.ndarray:
        """The bool values over the iteration space (computed once)."""
        if self._val is None:
            v = np.asarray(self.fn(), dtype=bool)
            if v.ndim < len(self.shape):
                v = v.reshape((1,) * (len(self.shape) - v.ndim) + v.shape)
            self._val = v
        return self._val

    def _join(self, other, op, sym):
        if isinstance(other, (bool, np.bool_)):
            if op is np.logical_and:
                return self if other else False
            return True if other else self
        if isinstance(other, Predicate):
            return Predicate(lambda: op(self.values(), other.values()),
                             _bshape(self.shape, other.shape), f"({self.text} {sym} {other.text})")
        return NotImplemented

    def __and__(self, o): return self._join(o, np.logical_and, "&")
    __rand__ = __and__
    def __or__(self, o): return self._join(o, np.logical_or, "|")
    __ror__ = __or__

    def __invert__(self):
        return Predicate(lambda: ~self.values(), self.shape, f"~{self.text}")

    def __bool__(self):
        if _in_control_flow():
            raise IndexingError("control flow cannot depend on an index expression (nl.arange/mgrid); "
                                "use a mask= or affine_select instead",
                                rule="err_control_flow_condition_depending_on_arange",
                                limit="compile-time Python values only", value=self.text)
        raise IndexingError("'and'/'or'/'not' cannot combine mask predicates; join them with & and |",
                            rule="err_unsupported_expression_in_mask", limit="& and | of comparisons",
                            value=self.text)

    def __repr__(self):
        return f"Predicate{self.text}"


def _in_control_flow() -> bool:
    """Whether the user statement converting a predicate to bool is an if/elif/while/assert
    (legacy: control flow on arange values) rather than an and/or/not inside a mask."""
    import linecache
    from ...source import user_frame
    f = user_frame(3)
    if f is None:
        return False
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).lstrip()
    return line.startswith(("if ", "if(", "elif ", "elif(", "while ", "while(", "assert "))


def arange(start, stop=None, step: int = 1) -> IndexExpr:
    """``nl.arange(stop)`` / ``nl.arange(start, stop)``: a 1-D index to be lifted with [:, None]."""
    if stop is None:
        start, stop = 0, start
    if not (_is_int(start) and _is_int(stop) and _is_int(step)) or step == 0:
        raise IndexingError("nl.arange takes integer start, stop and a non-zero step",
                            rule="index-arange", value=(start, stop, step))
    n = len(range(int(start), int(stop), int(step)))
    return IndexExpr(int(start), (int(step),), (n,))


class MGridResult(tuple):
    """Components of ``nl.mgrid[...]``; also reachable as ``.p``, ``.x``, ``.y``, ``.z``."""

    @property
    def p(self):
        """The partition component."""
        return self[0]
    @property
    def x(self):
        """The first free component."""
        return self[1]
    @property
    def y(self):
        """The second free component."""
        return self[2]
    @property
    def z(self):
        """The third free component."""
        return self[3]


class _MGrid:
    def __getitem__(self, key) -> MGridResult:
        if not isinstance(key, tuple):
            key = (key,)
        ranges = []
        for k in key:
            if not isinstance(k, slice):
                raise IndexingError("nl.mgrid takes slices like nl.mgrid[0:128, 0:512]",
                                    rule="index-mgrid", value=k)
            start = 0 if k.start is None else k.start
            step = 1 if k.step is None else k.step
            if k.stop is None or not (_is_int(start) and _is_int(k.stop) and _is_int(step)):
                raise IndexingError("nl.mgrid slices need integer bounds", rule="index-mgrid",
                                    value=k)
            ranges.append((int(start), int(step), len(range(int(start), int(k.stop), int(step)))))
        shape = tuple(r[2] for r in ranges)
        comps = []
        for a, (start, step, n) in enumerate(ranges):
            coefs = [0] * len(ranges)
            coefs[a] = step
            comps.append(IndexExpr(start, tuple(coefs), shape))
        return MGridResult(comps)


mgrid = _MGrid()


class DynSlice:
    """``nl.ds(start, size)``: the slice ``start:start+size``."""
    __slots__ = ("start", "size", "step")

    def __init__(self, start, size, step: int = 1):
        self.start = start
        self.size = size
        self.step = step

    def __repr__(self):
        return f"ds({self.start}, {self.size})"

    def to_slice(self) -> slice:
        """The Python slice (a register start reads its current value)."""
        s = self.start
        if isinstance(s, IndexExpr) and not s.axes:
            s = s.const
        reg = getattr(s, "_trnsim_register_value", None)
        if reg is not None:  # a runtime register (new API): its current value
            s = reg()
        if not _is_int(s) or not _is_int(self.size):
            raise IndexingError("nl.ds needs an integer start and size here (a runtime register "
                                "start needs .ap(scalar_offset=...))", rule="index-ds",
                                value=(self.start, self.size))
        s = int(s)
        return slice(s, s + int(self.size) * self.step, self.step)


def ds(start, size, step: int = 1) -> DynSlice:
    """``nl.ds(start, size)``: the slice ``start:start+size``."""
    return DynSlice(start, size, step)


class ParDim(int):
    """``nl.par_dim(n)``: marks the partition dimension in a legacy shape tuple."""

    def __new__(cls, n):
        if not _is_int(n):
            raise IndexingError("par_dim takes an integer size", rule="par-dim", value=n)
        return super().__new__(cls, int(n))

    def __repr__(self):
        return f"par_dim({int(self)})"


def par_dim(n) -> ParDim:
    """``nl.par_dim(n)``: mark the partition dim of a legacy shape."""
    return ParDim(n)


def mask_values(mask, shape: Tuple[int, ...]):
    """Normalize a ``mask=`` argument: None/True -> None (all), False -> False, else a bool array
    broadcast to ``shape`` (masks align with the leading axes of the iteration space)."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return None if mask else False
    if isinstance(mask, Predicate):
        v = mask.values()
        return _align(v, shape)
    if isinstance(mask, np.ndarray) and mask.dtype == bool:
        return _align(mask, shape)
    raise IndexingError("mask= must be a comparison of index expressions (joined with &) or a bool",
                        rule="err_unsupported_expression_in_mask", value=repr(mask))


def _align(v: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    if v.ndim > len(shape):
        # extra trailing size-1 axes are harmless
        while v.ndim > len(shape) and v.shape[-1] == 1:
            v = v.reshape(v.shape[:-1])
    if v.ndim < len(shape):
        v = v.reshape(v.shape + (1,) * (len(shape) - v.ndim))
    try:
        m = np.broadcast_to(v, shape)
    except ValueError:
        raise IndexingError(f"mask of shape {v.shape} does not match the instruction's iteration "
                            f"space {shape}", rule="mask-shape", value=v.shape, limit=shape) from None
    if m.all():
        return None
    if not m.any():
        return False
    return m
