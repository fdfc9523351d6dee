"""Checks of the arguments the upkeep operations share: counts and points in time."""

from __future__ import annotations

import re
import time
from typing import Any

from ..errors import InvalidOptionError, PaimonError
from ..timepoints import to_epoch_millis


def count_arg(value: Any, name: str, default: int, minimum: int = 1) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        number = int(value)
    else:
        number = None
    if number is None:
        raise InvalidOptionError(f"{name} must be a whole number, not {value!r}")
    if number < minimum:
        raise InvalidOptionError(f"{name} must be at least {minimum}, not {number}")
    return number


def epoch_millis_arg(value: Any, name: str) -> int:
    try:
        return to_epoch_millis(value)
    except (PaimonError, ValueError, TypeError, OverflowError):
        raise InvalidOptionError(
            f"{name}: {value!r} is not a point in time (ISO 8601 such as '2026-11-20' or "
            "'2026-11-20 02:00:00+01:00', a datetime, or epoch milliseconds)") from None


def now_millis(now: Any) -> int:
    return int(time.time() * 1000) if now is None else epoch_millis_arg(now, "now")
