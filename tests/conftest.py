import pytest


@pytest.fixture(autouse=True)
def _trnsim_shims():
    """Tests import the public NKI module names; serve them from trnsim."""
    import trnsim.compat
    trnsim.compat.install()
    yield
