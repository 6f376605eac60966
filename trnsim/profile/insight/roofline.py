"""Speed of light: achieved FLOPs and HBM bandwidth against the core's peaks (a roofline point)."""
from __future__ import annotations

from ...timing.costs import tensor_peak_flops_per_ns


def speed_of_light(tl, spec, chip) -> dict:
    """One core's roofline point: PE FLOPs over the dense BF16 peak, HBM bytes over the core's
    share of the chip's HBM bandwidth, arithmetic intensity against the ridge point, and HFU."""
    lat_s = (float(tl.end.max()) if len(tl.end) else 0.0) / 1e9
    peak_f = tensor_peak_flops_per_ns(spec) * 1e9            # FLOP/s, dense BF16
    peak_b = chip.hbm_bandwidth_bytes_per_s / chip.cores      # B/s, one core's share
    flops, hbm = float(tl.flops), int(tl.hbm_bytes)
    ai = flops / hbm if hbm else float("inf") if flops else 0.0
    ridge = peak_f / peak_b
    return {"flops": flops, "peak_flops_per_s": peak_f,
            "flops_share": flops / (peak_f * lat_s) if lat_s else 0.0,
            "hbm_bytes": hbm, "peak_hbm_bytes_per_s": peak_b,
            "hbm_share": hbm / (peak_b * lat_s) if lat_s else 0.0,
            "achieved_flops_per_s": flops / lat_s if lat_s else 0.0,
            "achieved_hbm_bytes_per_s": hbm / lat_s if lat_s else 0.0,
            "arithmetic_intensity": ai, "ridge_point": ridge,
            "bound": "compute" if ai >= ridge else "memory",
            "hfu": float(tl.pe_bf16_equiv) / (peak_f * lat_s) if lat_s else 0.0}
