"""The planner's error: bad input to ``plan`` (space, objective, backend) or nothing left to rank."""
from __future__ import annotations

from ..errors import ConfigError


class PlanError(ConfigError):
    """A planner input that cannot be searched, or a search with no configuration left."""
    rule = "plan"
