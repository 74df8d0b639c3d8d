"""Eager parameter validation shared by configs, golden models and RTL components.

Every check raises with a message that names the field and the allowed values,
in the style of amaranth-soc: ``"RingFIFO.depth must be an integer >= 1, not 0"``.
"""

import math
import operator

__all__ = ["check_int", "check_choice", "check_float"]


def check_int(owner, field, value, *, min=None, max=None):
    """Return ``value`` as an ``int`` after checking type and range.

    ``bool`` and ``float`` are rejected even when integral, because a ``True`` width
    or a ``16.0`` depth is almost always a bug in the caller.
    """
    bounds = _bounds_text(min, max)
    if isinstance(value, bool):
        raise TypeError(f"{owner}.{field} must be an integer {bounds}, not {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{owner}.{field} must be an integer {bounds}, not {value!r}") from None
    if (min is not None and value < min) or (max is not None and value > max):
        raise ValueError(f"{owner}.{field} must be an integer {bounds}, not {value!r}")
    return value


def check_float(owner, field, value, *, min=None, max=None):
    """Return ``value`` as a finite ``float`` in ``[min, max]``."""
    bounds = _bounds_text(min, max)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{field} must be a finite number {bounds}, not {value!r}")
    value = float(value)
    if not math.isfinite(value) or (min is not None and value < min) or (max is not None and value > max):
        raise ValueError(f"{owner}.{field} must be a finite number {bounds}, not {value!r}")
    return value


def check_choice(owner, field, value, choices):
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{owner}.{field} must be one of {allowed}, not {value!r}")
    return value


def _bounds_text(min, max):
    if min is not None and max is not None:
        return f"in [{min}, {max}]"
    if min is not None:
        return f">= {min}"
    if max is not None:
        return f"<= {max}"
    return ""
