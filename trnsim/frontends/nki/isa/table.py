"""The signature table of ``nki.isa``: every instruction's public parameters (names and defaults as
NKI >= 0.2 spells them), the semantics it calls and its docstring.  ``isa/__init__`` builds the
wrappers from it (``frontends/nki/_signature.py``).  ``C`` is ``isa.constants``; ``ops`` names the
instruction families of ``trnsim.nki.ops``; ``chk`` the new-API checks of ``isa/checks.py``."""
from __future__ import annotations

from .._signature import Row

ENUM_PARAMS = {"engine": "C.engine", "oob_mode": "C.oob_mode", "dge_mode": "C.dge_mode",
               "reduce_cmd": "C.reduce_cmd", "perf_mode": "C.matmul_perf_mode",
               "dma_engine": "C.dma_engine"}

ROWS = (
    # -- data movement
    Row("dma_copy", "dst, src, priority=None, oob_mode=C.oob_mode.error, "
        "dge_mode=C.dge_mode.unknown, engine=C.engine.unknown, name=None",
        "chk.dma_copy(dst, src, priority, oob_mode, dge_mode, engine)",
        "dst = src through the DMA engines (HBM/SBUF, element counts equal, casts via fp32)."),
    Row("dma_transpose", "dst, src, axes=None, priority=None, dge_mode=C.dge_mode.unknown, "
        "oob_mode=C.oob_mode.error, name=None",
        "chk.dma_transpose(dst, src, axes, priority, dge_mode)",
        "Transpose through the DMA: axes (1,0), (2,1,0) or (3,1,2,0); dst = permuted src shape."),
    Row("dma_compute", "dst, srcs, reduce_op, scales=None, unique_indices=True, "
        "oob_mode=C.oob_mode.error, name=None",
        "ops.dma.dma_compute(dst, list(srcs), reduce_op, scales=scales)",
        "dst = reduce_op over the (scaled) srcs, computed inside the DMA engines."),
    Row("tensor_copy", "dst, src, engine=C.engine.unknown, name=None",
        "chk.tensor_copy(dst, src, engine)",
        "Copy on Vector/Scalar/GpSimd: bit-exact when dtypes match, else through fp32."),
    Row("tensor_copy_predicated", "dst, src, predicate, reverse_pred=False, name=None",
        "ops.select.copy_predicated(dst, src, predicate, reverse_pred=bool(reverse_pred))",
        "Copy ``src`` (tile or scalar) into ``dst`` where ``predicate`` is nonzero."),
    Row("memset", "dst, value, engine=C.engine.unknown, name=None", "chk.memset(dst, value, engine)",
        "Fill ``dst`` with a constant (int literal for integer dst; only 0 for x4-packed dtypes)."),
    # -- Tensor engine
    Row("nc_matmul", "dst, stationary, moving, is_stationary_onezero=False, "
        "is_moving_onezero=False, is_transpose=False, accumulate=None, tile_position=(), "
        "tile_size=(), perf_mode=C.matmul_perf_mode.none, name=None",
        "chk.nc_matmul(dst, stationary, moving, is_stationary_onezero, is_moving_onezero, "
        "is_transpose, accumulate, tile_position, tile_size, perf_mode)",
        "dst (PSUM) = stationary.T @ moving; accumulate=None overwrites the first write to each PSUM\n"
        "location since allocation and adds afterwards, True/False force add/overwrite."),
    Row("nc_transpose", "dst, data, engine=C.engine.unknown, name=None",
        "chk.nc_transpose(dst, data, engine)",
        "Swap partition and flattened free axes: Tensor engine (<=128x128, into PSUM) or Vector\n"
        "(<=32x32); unknown picks by where ``dst`` lives."),
    Row("nc_matmul_mx", "dst, stationary, moving, stationary_scale, moving_scale, "
        "tile_position=None, tile_size=None, accumulate=None, name=None",
        "ops.mx.nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, "
        "tile_position=tile_position, tile_size=tile_size, accumulate=accumulate)",
        "MXFP8/MXFP4 matmul with dequantization (NeuronCore-v4)."),
    Row("quantize_mx", "dst, src, dst_scale, name=None", "ops.mx.quantize_mx(dst, src, dst_scale)",
        "fp16/bf16 -> MXFP8 data (x4 packed) + e8m0 scales (NeuronCore-v4)."),
    # -- Vector / Scalar / GpSimd
    Row("tensor_tensor", "dst, data1, data2, op, engine=C.engine.unknown, name=None",
        "ops.elementwise.tensor_tensor(dst, data1, data2, op, engine=engine)",
        "dst = data1 op data2 (same partitions and elements per partition)."),
    Row("tensor_scalar", "dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, "
        "reverse1=False, engine=C.engine.unknown, name=None",
        "ops.elementwise.tensor_scalar(dst, data, op0, operand0, bool(reverse0), op1, operand1, "
        "bool(reverse1), engine=engine)",
        "dst = (data op0 operand0) op1 operand1 with scalar or (P, 1) operands."),
    Row("scalar_tensor_tensor", "dst, data, op0, operand0, op1, operand1, reverse0=False, "
        "reverse1=False, name=None",
        "ops.elementwise.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, "
        "bool(reverse0), bool(reverse1))",
        "dst = (data op0 operand0) op1 operand1 with operand1 a tile like data."),
    Row("activation", "dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, "
        "reduce_cmd=C.reduce_cmd.idle, name=None",
        "ops.activation.activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, "
        "reduce_res=reduce_res, reduce_cmd=reduce_cmd)",
        "dst = op(data * scale + bias) on the Scalar engine, with the accumulator registers steered\n"
        "by ``reduce_cmd`` and read out into ``reduce_res``."),
    Row("activation_reduce", "dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, "
        "name=None",
        "ops.activation.activation_reduce(dst, op, data, reduce_op=reduce_op, "
        "reduce_res=reduce_res, bias=bias, scale=scale)",
        "activation + a free-axis reduction into ``reduce_res`` (reduce_cmd reset_reduce)."),
    Row("tensor_reduce", "dst, op, data, axis, negate=False, keepdims=False, name=None",
        "ops.reduce.reduce_free(dst, op, data, axis, negate=bool(negate), "
        "keepdims=bool(keepdims))",
        "Reduce the trailing free axes ``axis`` of ``data`` into ``dst`` (fp32 math)."),
    Row("tensor_partition_reduce", "dst, op, data, name=None",
        "ops.reduce.partition_reduce(dst, op, data)", "Reduce across partitions (GpSimd)."),
    Row("tensor_scalar_reduce", "dst, data, op0, operand0, reduce_op, reduce_res=None, "
        "reverse0=False, reduce_cmd=C.reduce_cmd.reset_reduce, reduce_init=None, "
        "reduce_res_negate=False, name=None",
        "chk.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0, "
        "reduce_cmd, reduce_init, reduce_res_negate)",
        "dst = data op0 operand0, reduced over the free axes into the Vector accumulator."),
    Row("tensor_scalar_cumulative", "dst, src, op0, op1, imm0, imm1=None, "
        "reduce_cmd=C.reduce_cmd.reset_reduce, name=None",
        "ops.scan.tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1, reduce_cmd)",
        "Running ``reg = op1(op0(src[i], imm0), reg)`` per partition; dst[i] = reg."),
    Row("tensor_tensor_scan", "dst, data0, data1, initial, op0, op1, reverse0=False, "
        "reverse1=False, name=None",
        "ops.scan.tensor_tensor_scan(dst, data0, data1, initial, op0, op1, bool(reverse0), "
        "bool(reverse1))",
        "Per partition: r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial."),
    Row("reciprocal", "dst, data, name=None", "ops.elementwise.reciprocal(dst, data)",
        "dst = 1 / data on the Vector engine."),
    Row("max8", "dst, src, name=None", "ops.top8.max8(dst, src)",
        "The 8 largest values per partition, descending."),
    Row("bn_stats", "dst, data, name=None", "ops.reduce.bn_stats(dst, data)",
        "Per-partition mean/variance statistics of ``data`` (batch-norm, Vector engine)."),
    Row("bn_aggr", "dst, data, name=None", "ops.reduce.bn_aggr(dst, data)",
        "Aggregate bn_stats results into per-partition mean and variance."),
    Row("dropout", "dst, data, prob, name=None", "ops.random.dropout(dst, data, prob)",
        "Zero each element of ``data`` with probability ``prob`` (seeded per kernel instance)."),
    Row("iota", "dst, pattern, offset=0, channel_multiplier=0, name=None",
        "ops.gather.iota(dst, chk.iota_values(dst, pattern, offset, channel_multiplier))",
        "dst[p, ...] = offset + p * channel_multiplier + sum(step_i * idx_i) (int32 math)."),
    Row("affine_select", "dst, pattern, channel_multiplier, on_true_tile, on_false_value, "
        "cmp_op=equal, offset=0, name=None",
        "ops.select.affine_select(dst, on_true_tile, on_false_value, "
        "chk.pattern_predicate(pattern, offset, channel_multiplier, cmp_op))",
        "dst = on_true_tile where cmp_op(affine value, 0) holds, else on_false_value."),
    Row("nc_stream_shuffle", "dst, src, shuffle_mask, name=None",
        "ops.gather.stream_shuffle(dst, src, shuffle_mask)",
        "Move partitions within each 32-partition quadrant: dst[i] = src[shuffle_mask[i]]."),
    Row("select_reduce", "dst, predicate, on_true, on_false, reduce_res=None, "
        "reduce_cmd=C.reduce_cmd.idle, reduce_op=maximum, reverse_pred=False, name=None",
        "ops.select.select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd, "
        "reduce_op, bool(reverse_pred))",
        "dst = where(predicate, on_true, on_false) on the Vector engine; optionally the\n"
        "per-partition max of the result goes to the accumulator / ``reduce_res``."),
    Row("range_select", "dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, "
        "reduce_cmd=C.reduce_cmd.reset_reduce, reduce_res=None, reduce_op=maximum, "
        "range_start=0, on_false_value=FP32_MIN, name=None",
        "ops.select.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, "
        "reduce_cmd, reduce_res, reduce_op, range_start, on_false_value)",
        "Keep ``on_true_tile[p, i]`` where both compares of ``range_start + i`` with the bounds\n"
        "hold, else ``on_false_value``; the per-partition max goes to the accumulator (gen3+)."),
    Row("nc_find_index8", "dst, data, vals, name=None", "ops.top8.nc_find_index8(dst, data, vals)",
        "Per partition, the index of the first occurrence of each of the 8 ``vals`` in ``data``."),
    Row("nc_match_replace8", "dst, data, vals, imm, dst_idx=None, name=None",
        "ops.top8.nc_match_replace8(dst, data, vals, imm, dst_idx)",
        "``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``\n"
        "(matched positions into ``dst_idx`` when given)."),
    Row("local_gather", "dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, "
        "name=None",
        "ops.gather.local_gather(dst, src_buffer, index, num_elem_per_idx, num_valid_indices)",
        "GpSimd gather inside each group of 16 partitions (element offsets into each partition)."),
    Row("nc_n_gather", "dst, data, indices, name=None",
        "ops.gather.nc_n_gather(dst, data, indices)",
        "Per partition, ``dst[p, j] = data[p].flat[indices[p, j]]`` (GpSimd, SBUF only)."),
    Row("nonzero_with_count", "dst, src, index_offset=0, padding_val=-1, name=None",
        "ops.gather.nonzero_with_count(dst, src, index_offset, padding_val)",
        "Positions of nonzero elements (+ index_offset), padding, then their count (gen3+)."),
    Row("sequence_bounds", "dst, segment_ids, name=None",
        "ops.gather.sequence_bounds(dst, segment_ids)",
        "Each element's [start, end) segment bounds from segment ids (0 = padding), on GpSimd."),
    # -- cross-core
    Row("core_barrier", "data, cores, engine=C.engine.gpsimd, name=None",
        "chk.core_barrier(data, cores, engine)",
        "Wait until both logical cores of an LNC=2 launch reach this point (gen3+).", tensors=()),
    Row("sendrecv", "src, dst, send_to_rank, recv_from_rank, pipe_id, "
        "dma_engine=C.dma_engine.dma, name=None",
        "chk.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine)",
        "Send ``src`` to the peer core's ``dst`` while receiving the peer's ``src`` into ``dst``.",
        tensors=("src", "dst")),
)
