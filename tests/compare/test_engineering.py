"""Engineering cost and break-even (step 3 of evaluate), by hand."""
import pytest

from trnsim.compare.engineering import added_costs, load_defaults
from trnsim.errors import ConfigError


def _sys(name, kind, usd_per_mtok, instances=2, usd_per_hour=30.0, tokens=1e12):
    return {"system": name, "kind": kind, "usd_per_mtok": usd_per_mtok, "instances": instances,
            "usd_per_hour": usd_per_hour, "tokens": tokens}


def test_porting_compile_egress_and_break_even_by_hand():
    figs = load_defaults({"rate.usd_per_hour": 100.0, "effort.base_port": 40, "effort.custom_kernel": 80,
                          "effort.cuda_site": 2, "effort.second_path_per_month": 10, "effort.months": 12,
                          "compile.minutes": 30, "compile.recompiles": 4, "egress.usd_per_gb": 0.1,
                          "egress.bytes_per_token": 4, "egress.copies": 1})
    systems = [_sys("p5.48xlarge", "gpu", 2.0), _sys("trn2.48xlarge", "trainium", 1.5)]
    out = added_costs(systems, "p5.48xlarge", custom_ops=2, cuda_sites=3, figs=figs)
    hours = 40 + 2 * 80 + 3 * 2 + 12 * 10                 # 326 h
    compile_usd = 0.5 * 4 * 2 * 30.0                      # 30 min x 4 graphs x 2 instances x $30/h = $120
    egress_usd = 1e12 * 4 / 1e9 * 0.1                     # 4000 GB x $0.1 = $400
    assert out["added_usd"]["trn2.48xlarge"] == pytest.approx(hours * 100 + compile_usd + egress_usd)
    assert out["added_usd"]["p5.48xlarge"] == 0.0
    be = out["break_even"]["trn2.48xlarge"]
    assert be["tokens"] == pytest.approx((hours * 100 + compile_usd + egress_usd) / 0.5 * 1e6)


def test_never_pays_back_when_not_cheaper():
    figs = load_defaults()
    out = added_costs([_sys("p5.48xlarge", "gpu", 1.0), _sys("trn1.32xlarge", "trainium", 1.2)],
                      "p5.48xlarge", 0, 0, figs)
    assert out["break_even"]["trn1.32xlarge"]["pays_back"] is False


def test_unknown_or_negative_figure_is_an_error():
    with pytest.raises(ConfigError):
        load_defaults({"effort.coffee": 3})
    with pytest.raises(ConfigError):
        load_defaults({"rate.usd_per_hour": -5})
