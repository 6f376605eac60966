"""Every opcode a real kernel's trace carries is in the registry, on one of its registered engines
(the timing model refuses unregistered opcodes, so a gap here would break timing)."""
import numpy as np

from trnsim.ir.opcodes import OPCODES, lookup


def _kernel():
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def k(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
        bt = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        nisa.dma_copy(dst=bt, src=b)
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=at, moving=bt)
        x = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=x, src=ps)
        y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=y, op=nl.exp, data=x)
        nisa.tensor_tensor(dst=y, data1=x, data2=y, op=nl.add)
        nisa.tensor_scalar(dst=y, data=y, op0=nl.multiply, operand0=0.5)
        r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.maximum, data=y, axis=1)
        z = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0.0)
        i = nl.ndarray((128, 512), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=i, pattern=[[1, 512]], offset=0, channel_multiplier=0)
        nisa.dma_copy(dst=out, src=y)
        return out

    return k


def test_kernel_trace_opcodes_are_registered_on_their_engines():
    import trnsim
    a = np.ones((128, 128), dtype=np.float32)
    b = np.ones((128, 512), dtype=np.float32)
    tr = trnsim.trace(_kernel(), a, b)
    seen = {(ins.opcode, ins.engine) for ins in tr}
    assert {"nc_matmul", "dma_copy", "tensor_copy", "activation", "tensor_tensor", "tensor_scalar",
            "tensor_reduce", "memset", "iota"} <= {op for op, _ in seen}
    for op, eng in seen:
        assert op in OPCODES, op
        assert eng in lookup(op).engines, (op, eng)


def test_a_trace_times_without_unknown_opcodes():
    import trnsim
    from trnsim.timing import estimate
    a = np.ones((128, 128), dtype=np.float32)
    b = np.ones((128, 512), dtype=np.float32)
    tr = trnsim.trace(_kernel(), a, b)
    est = estimate([tr], "trn2")
    assert est.latency_ns > 0
