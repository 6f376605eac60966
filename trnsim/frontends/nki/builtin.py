"""``nki.builtin``: nki-library's simulation harness installs this module as ``builtins.builtin``;
it only needs to exist, so it just names the language and ISA modules."""
from . import isa, language  # noqa: F401
