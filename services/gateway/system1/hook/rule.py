"""The routing rule, yours to change: features in, a Claude model tier out.

design or review → opus; otherwise read_only → haiku; otherwise sonnet. `specified` is
recorded but not used yet.
"""

from __future__ import annotations

from collections.abc import Mapping

TIERS = ("haiku", "sonnet", "opus")


def tier(features: Mapping[str, bool]) -> str:
    if features.get("design") or features.get("review"):
        return "opus"
    if features.get("read_only"):
        return "haiku"
    return "sonnet"


def rank(name: str) -> int:
    """haiku < sonnet < opus."""
    return TIERS.index(name)
