"""``trnsim`` command line: thin parsing and printing over the library.

Each subcommand lives in its own module exposing ``register(subparsers)``; ``main`` dispatches and
turns any TrnsimError into a one-paragraph message with exit status 2 (never a traceback); with
``--json`` the error is ``{"error": {"rule", "message", "where", ...}}`` on stdout instead.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from ..errors import TrnsimError

# subcommand modules, in the order they appear in --help
SUBCOMMANDS = ("exec_cmd", "run_cmd", "kernel_cmd", "diff_cmd", "hw_cmd", "check_cmd", "collective_cmd", "estimate_cmd", "models_cmd", "plan_cmd",
               "compare_cmd", "evaluate_cmd", "claims_cmd")


class _UsageError(Exception):
    """argparse's complaint about the command line, raised instead of exiting when --json is given."""


def help_width(stream=None) -> int:
    """Width for ``--help``: $COLUMNS, else the terminal's width, else no wrapping when piped."""
    import os
    import shutil
    stream = sys.stdout if stream is None else stream
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return shutil.get_terminal_size().columns
    from .output import PIPE_WIDTH  # the same "never split a line" width the tables use
    return PIPE_WIDTH


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter at ``help_width()`` (argparse alone wraps at 80 columns when piped)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position,
                         help_width() if width is None else width)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors can be reported as JSON (see ``main``)."""

    json_errors = False

    def __init__(self, *args, **kwargs):
        # subcommands that ask for their own formatter keep it; the rest get the width rule above
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # noqa: D401 - argparse's hook
        """Report a usage error: JSON on stdout under --json, argparse's usual text otherwise."""
        message = _suggest_choice(message)
        if _Parser.json_errors:
            raise _UsageError(f"{self.prog}: {message}")
        super().error(message)


def _suggest_choice(message: str) -> str:
    """argparse's "invalid choice: 'ful' (choose from ...)" with the nearest choices suggested."""
    import re
    m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if not m:
        return message
    from ..checks import did_you_mean
    near = did_you_mean(m.group(1), [c.strip().strip("'") for c in m.group(2).split(",")])
    return f"{message}: {near}" if near else message


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


def _report(err: TrnsimError, want_json: bool, code: int = 2, argv: Optional[List[str]] = None) -> int:
    """Print one error: ``{"error": {"rule", "message", "where", ...}}`` on stdout under --json,
    a one-paragraph message on stderr otherwise (the user's own traceback first, when there is one).
    An error that names no place is placed on the command line that caused it."""
    if not err.where and argv is not None:
        err.where = "trnsim " + " ".join(argv)
    tb = getattr(err, "user_traceback", "")
    if want_json:
        from .output import print_json
        body = err.as_dict()
        if tb:
            body["traceback"] = tb
        print_json({"error": body})
        return code
    from rich.markup import escape

    from .output import error_console
    con = error_console()
    if tb:
        con.print(escape(tb.rstrip()), markup=True, highlight=False)
    con.print(f"[bold red]error:[/] {escape(str(err))}", markup=True, highlight=False)
    return code


def _internal(e: BaseException) -> TrnsimError:
    """A fault of trnsim itself (no user frame took part): named as such, with where it happened."""
    import traceback
    last = traceback.extract_tb(e.__traceback__)[-1:] if e.__traceback__ else []
    where = f"{last[0].filename}:{last[0].lineno} in {last[0].name}" if last else None
    return TrnsimError(f"internal error: {type(e).__name__}: {e}", rule="internal", where=where,
                       hint="this is a bug in trnsim, not in your input: please report it with the "
                       "command line (TRNSIM_DEBUG=1 shows the full traceback)")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings as one line on stderr, naming the user's line the warning's text carries."""
    from rich.markup import escape

    from .output import error_console
    error_console().print(f"[bold yellow]warning:[/] {escape(str(message))}", markup=True,
                          highlight=False)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the ``trnsim`` command line; returns the exit status (2 for a user error, 3 for a
    fault of trnsim itself, 130 / 143 when interrupted, 141 when stdout was closed); under --json
    every error is a JSON object on stdout."""
    try:
        return _main(argv)
    except BrokenPipeError:
        return _closed_stdout()


def _main(argv: Optional[List[str]] = None) -> int:
    import os
    import warnings
    argv = sys.argv[1:] if argv is None else list(argv)
    from ..lifetime import Terminated, install_signal_handlers, received_signal
    install_signal_handlers()
    want_json = "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv
    parser = build_parser()
    _Parser.json_errors = want_json
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        return _report(TrnsimError(str(e), rule="usage", where="trnsim " + " ".join(argv)), True)
    finally:
        _Parser.json_errors = False
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    want_json = bool(getattr(args, "json", False)) or want_json
    try:
        from ..validate import check_args
        check_args(args)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            rc = args.func(args)
    except TrnsimError as e:
        return _report(e, want_json, argv=argv)
    except BrokenPipeError:
        return _closed_stdout()
    except KeyboardInterrupt:
        _one_line("interrupted")
        return 130
    except Terminated as e:
        _one_line(str(e))
        return 128 + e.signum
    except Exception as e:  # noqa: BLE001 - the last line of defence: never a raw traceback
        from ..source import user_exception
        err = user_exception(e)
        if err is not None:
            return _report(err, want_json, argv=argv)
        if os.environ.get("TRNSIM_DEBUG"):
            raise
        return _report(_internal(e), want_json, 3, argv)
    sig = received_signal()
    if sig:   # the signal's exception was swallowed in a finalizer: stop as if it had reached us
        _one_line(str(Terminated(sig)))
        return 128 + sig
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _closed_stdout()
    return int(rc or 0)


def _closed_stdout() -> int:
    """The reader of stdout went away (``trnsim ... --json | head``): nothing more to say to it, and no
    traceback when Python flushes stdout at exit.  Exit status 141, as a shell reports SIGPIPE."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141


def _one_line(text: str) -> None:
    """A one-line notice on stderr (an interrupted run); never fails."""
    try:
        sys.stderr.write(f"trnsim: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
