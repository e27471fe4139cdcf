"""Argument checks shared across flowsim's modules."""

import numbers

import numpy as np


def is_real_number(value) -> bool:
    """Whether ``value`` is a real number (a Python or NumPy int or float; not a bool, a string or an array)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value, least: int = 1) -> bool:
    """Whether ``value`` is an integer of at least ``least`` (a bool is not, though Python counts it as one)."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= least
