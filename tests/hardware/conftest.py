"""Helpers for hardware tests: write a user hardware file (TOML) to a fresh path."""
import itertools
import textwrap

import pytest

_count = itertools.count()


@pytest.fixture
def hw_file(tmp_path):
    """Write TOML text to a new file and return its path (a fresh name each call: the catalog caches by path)."""
    def write(text: str) -> str:
        p = tmp_path / f"user_hw_{next(_count)}.toml"
        p.write_text(textwrap.dedent(text))
        return str(p)
    return write
