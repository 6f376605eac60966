"""Cost layer: prices and power as data, pure cost / energy formulas, ranking sensitivity."""
from .economics import SystemEconomics, ranking, system_economics, with_baseline
from .formulas import (BreakEven, EngineeringCost, RunCost, RunEnergy, break_even, engineering_cost,
                       price_performance, run_cost, run_energy)
from .power import PowerModel, SystemPower, load_power_model, system_power
from .prices import PRICE_KINDS, Price, PriceBook, PriceError, parse_price_args, read_price_overrides
from .sensitivity import SensitivityReport, SystemResult, sensitivity

__all__ = ["SystemEconomics", "ranking", "system_economics", "with_baseline", "BreakEven", "EngineeringCost", "RunCost", "RunEnergy", "break_even", "engineering_cost",
           "price_performance", "run_cost", "run_energy", "PowerModel", "SystemPower", "load_power_model",
           "system_power", "PRICE_KINDS", "Price", "PriceBook", "PriceError", "parse_price_args",
           "read_price_overrides", "SensitivityReport", "SystemResult", "sensitivity"]
