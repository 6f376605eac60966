"""A small kernel file shared by the CLI tests: an exp over [rows, cols] fp32 in 128-row tiles."""
import pytest

ACT_KERNEL = '''\
import neuronxcc.nki.language as nl


def act(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        t = nl.load(a[i * 128:(i + 1) * 128, :])
        e = nl.exp(t)
        nl.store(out[i * 128:(i + 1) * 128, :], value=e)
    return out
'''


@pytest.fixture(scope="module")
def act_kernel_file(tmp_path_factory):
    """``actk.py`` holding ACT_KERNEL (``act`` is its function; line 8 is the exp)."""
    p = tmp_path_factory.mktemp("kern") / "actk.py"
    p.write_text(ACT_KERNEL)
    return p
