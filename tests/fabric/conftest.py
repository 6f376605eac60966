"""Helpers for fabric tests: a user hardware file with [fabric] overrides (a fresh path each call)."""
import itertools
import textwrap

import pytest

_count = itertools.count()


@pytest.fixture
def fabric_file(tmp_path):
    """Write TOML text to a new file and return its path (the catalog caches by path)."""
    def write(text: str) -> str:
        p = tmp_path / f"fabric_hw_{next(_count)}.toml"
        p.write_text(textwrap.dedent(text))
        return str(p)
    return write
