"""``trnsim`` command line: thin parsing and printing over the library.

Each subcommand lives in its own module exposing ``register(subparsers)``; ``main`` dispatches and
turns any TrnsimError into a one-paragraph message with exit status 2 (never a traceback); with
``--json`` the error is a JSON object with an ``error`` key on stdout instead.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from ..errors import TrnsimError

# subcommand modules, in the order they appear in --help
SUBCOMMANDS = ("exec_cmd", "run_cmd", "kernel_cmd", "hw_cmd", "check_cmd", "collective_cmd", "estimate_cmd", "models_cmd")


class _UsageError(Exception):
    """argparse's complaint about the command line, raised instead of exiting when --json is given."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors can be reported as JSON (see ``main``)."""

    json_errors = False

    def error(self, message: str):  # noqa: D401 - argparse's hook
        """Report a usage error: JSON on stdout under --json, argparse's usual text otherwise."""
        if _Parser.json_errors:
            raise _UsageError(f"{self.prog}: {message}")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``trnsim`` parser with every subcommand of ``SUBCOMMANDS`` registered."""
    p = _Parser(prog="trnsim", description="A software Trainium: run, profile and "
                "cost NKI kernels and models without Trainium hardware.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__package__}.{name}").register(sub)
    return p


def _version() -> str:
    from .. import __version__
    return f"trnsim {__version__}"


def _error_json(message: str, err: Optional[TrnsimError] = None) -> None:
    from .output import print_json
    body = {"error": message}
    if err is not None:
        body.update(rule=err.rule, limit=err.limit, value=err.value, where=err.where, hint=err.hint)
    print_json(body)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the ``trnsim`` command line; returns the exit status (2 for a user error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    want_json = "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv
    parser = build_parser()
    _Parser.json_errors = want_json
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        _error_json(str(e))
        return 2
    finally:
        _Parser.json_errors = False
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        rc = args.func(args)
    except TrnsimError as e:
        if getattr(args, "json", False):
            _error_json(e.message, e)
            return 2
        from rich.markup import escape

        from .output import error_console
        error_console().print(f"[bold red]error:[/] {escape(str(e))}", markup=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
