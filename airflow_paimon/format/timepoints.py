"""Points in time as the library accepts them: datetimes, dates, ISO 8601 text or epoch milliseconds."""

from __future__ import annotations

import datetime as dt
from typing import Any

from .errors import InvalidOptionError, PaimonError


def to_epoch_millis(value: Any) -> int:
    """Milliseconds since the epoch of a datetime/pendulum/ISO string (naive means UTC) or a number."""
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("Z", "+00:00")
        try:
            value = dt.datetime.fromisoformat(text) if "T" in text or " " in text else \
                dt.datetime.combine(dt.date.fromisoformat(text), dt.time())
        except ValueError:
            raise InvalidOptionError(f"{value!r} is not a point in time (ISO 8601 such as '2026-11-20' or "
                                     "'2026-11-20 02:00:00+01:00')") from None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return int(dt.datetime.combine(value, dt.time(), tzinfo=dt.timezone.utc).timestamp() * 1000)
    raise PaimonError(f"cannot read {value!r} as a point in time")
