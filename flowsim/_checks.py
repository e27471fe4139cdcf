"""Argument checks shared across flowsim's modules."""

import numbers

import numpy as np


def is_real_number(value) -> bool:
    """Whether ``value`` is a real number (a Python or NumPy int or float; not a bool, a string or an array)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value, least: int = 1) -> bool:
    """Whether ``value`` is an integer of at least ``least`` (a bool is not, though Python counts it as one)."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= least


def fits_float64(number) -> bool:
    """Whether a (sympy or Python) number is one float64 holds: finite, and not a nonzero that rounds to 0."""
    try:
        value = float(number)
        return bool(np.isfinite(value)) and (value != 0 or number == 0)  # 1e-400 would read as 0
    except (OverflowError, TypeError):
        return False


def refuse_masked(name, values) -> None:
    """A numpy masked array is refused: converting it drops the mask, so the masked entries would be used."""
    if isinstance(values, np.ma.MaskedArray):
        raise ValueError(f"{name} is a numpy masked array, whose mask flowsim would drop (using the masked entries); "
                         f"pass a plain array: drop what is masked, or fill it ({name}.filled(value)).")
