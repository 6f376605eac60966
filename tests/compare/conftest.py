"""Shared fixtures: a stub configuration chooser so compare's arithmetic can be checked by hand."""
import pytest

from trnsim.compare.search import Choice


def _stub(table):
    """``table``: system key -> (time_s, instances, tokens, busy, band)."""
    def choose(ref, w):
        t, n, tok, busy, band = table[ref.key]
        return Choice(system=ref, config={"tp": 1, "pp": 1}, instances=n, time_s=t, tokens=tok, busy=busy,
                      error_band=band, metrics={"tokens_per_s": tok / t})
    return choose


@pytest.fixture
def stub_chooser():
    """A factory of stub choosers."""
    return _stub
