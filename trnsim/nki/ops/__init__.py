"""NKI instruction semantics, one module per instruction family, on top of ``nki.core``.

Importing this package registers the tensor type's subscript, assignment and operator behaviour
(``core.tensor.register_hooks``): ``core`` sits below ``ops`` and never imports it."""
from ..core import subscript as _subscript
from ..core.tensor import register_hooks as _register_hooks
from . import assign as _assign, elementwise as _elementwise

_register_hooks(subscript=_subscript.subscript, assign=_assign.assign, inplace=_assign.inplace,
                operator=_elementwise.operator, unary=_elementwise.unary_operator)
