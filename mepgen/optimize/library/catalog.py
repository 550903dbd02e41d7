"""The library's transformations, in the order of their usual payoff (structural rewrites first)."""
from __future__ import annotations

from .launch_bounds import LaunchBounds
from .launch_config import LaunchConfig
from .privatize import Privatize
from .restrict import Restrict
from .scalar_replace import ScalarReplace
from .unroll import Unroll
from .warp_row import WarpPerRow


def all_transformations():
    return [WarpPerRow(), Privatize(), ScalarReplace(), LaunchConfig(), Restrict(), Unroll(), LaunchBounds()]
