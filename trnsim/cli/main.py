"""``trnsim`` command line: thin parsing and printing over the library.

Each subcommand lives in its own module exposing ``register(subparsers)``; ``main`` dispatches and
turns any TrnsimError into a one-paragraph message with exit status 2 (never a traceback).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from ..errors import TrnsimError

# subcommand modules, in the order they appear in --help
SUBCOMMANDS = ("exec_cmd", "run_cmd", "kernel_cmd", "hw_cmd")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trnsim", description="A software Trainium: run, profile and "
                                "cost NKI kernels and models without Trainium hardware.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as e:  # a subcommand not written yet
            if e.name == f"{__package__}.{name}":
                continue
            raise
        mod.register(sub)
    return p


def _version() -> str:
    from .. import __version__
    return f"trnsim {__version__}"


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        rc = args.func(args)
    except TrnsimError as e:
        from rich.markup import escape

        from .output import error_console
        error_console().print(f"[bold red]error:[/] {escape(str(e))}", markup=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
