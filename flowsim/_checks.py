"""Argument checks shared across flowsim's modules."""

import numpy as np


def is_whole(value, least: int = 1) -> bool:
    """Whether ``value`` is an integer of at least ``least`` (a bool is not, though Python counts it as one)."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= least
