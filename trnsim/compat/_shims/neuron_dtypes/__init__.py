# trnsim import shim: on import, this package replaces itself by trnsim's implementation.
from trnsim.compat import _replace_self

_replace_self(__name__)
