"""Partition values: their directory names (`k=v/`) and their BinaryRow bytes in manifests.

A partition directory is spelled exactly as Paimon's `InternalRowPartitionComputer` and `PartitionPathUtils` spell
it, because readers find a data file at `<partition dir>/bucket-N/<file name>`: a different spelling of one value
makes the table unreadable for the other side. Two spellings exist, chosen by `partition.legacy-name`:

* `true` (Paimon's default): the Java `toString()` of the internal value. A DATE is its day number since
  1970-01-01 (`20454`), a TIMESTAMP (with or without local time zone) is `LocalDateTime.toString()` of its UTC
  fields (`2026-01-01T02:30`; seconds and fractions only when not zero, the fraction in groups of 3 digits).
* `false`: the value cast to STRING. A DATE is `2026-01-01`, a TIMESTAMP(p) is `2026-01-01 02:30:00` plus the
  fraction, trailing zeros dropped down to p digits; a TIMESTAMP WITH LOCAL TIME ZONE is shown in the local
  time zone of the process (Paimon uses the JVM's default time zone).

Numbers, booleans, decimals and strings read the same either way (Java's `toString`: `1.0E10` for a large DOUBLE,
`1.50` for a DECIMAL(5, 2)). NULL and blank values become `partition.default-name`. Keys and values are then
escaped as Hive escapes path names (`:` is `%3A`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import struct
import time
import unicodedata
from typing import Any, Callable, Sequence

import pyarrow as pa

from .binary_row import deserialize_row, epoch_days, epoch_nanos, serialize_row
from .errors import UnsupportedTableError

# PartitionPathUtils.CHAR_TO_ESCAPE: every control character, DEL, and these.
_ESCAPE = set('"#%\'*/:=?\\\x7f{}[]^') | {chr(c) for c in range(0x20)}
# Characters Java's Character.isWhitespace accepts besides the Unicode space separators (Zs, Zl, Zp) other than
# the no-break spaces.
_JAVA_WHITESPACE = set("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NO_BREAK_SPACES = set("\u00a0\u2007\u202f")
_EPOCH_DATE = dt.date(1970, 1, 1)
_NANOS_PER_DAY = 86_400 * 10**9


POSTPONE_BUCKET = -2


def bucket_folder(bucket: int) -> str:
    """The folder of a bucket inside its partition's, as Paimon's FileStorePathFactory names it: `bucket-N`, and
    `bucket-postpone` for the bucket (-2) where a postpone-bucket table's new rows wait for their compaction."""
    return "bucket-postpone" if bucket == POSTPONE_BUCKET else f"bucket-{bucket}"


def escape_path_name(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


def _java_blank(text: str) -> bool:
    """StringUtils.isNullOrWhitespaceOnly: empty, or Java whitespace only."""
    return all(c in _JAVA_WHITESPACE or (unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in _NO_BREAK_SPACES)
               for c in text)


# ---- Java's toString of numbers ---------------------------------------------------------------------------

def _java_floating(value: float, single: bool) -> str:
    """Float.toString / Double.toString (JDK 19 and later: the shortest digits that read back as the value)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if struct.pack(">d", value)[0] & 0x80 else "0.0"
    if single:
        bits = struct.pack(">f", value)
        value = struct.unpack(">f", bits)[0]
        text = next(t for t in (f"{value:.{p}e}" for p in range(9))
                    if struct.pack(">f", float(t)) == bits)
    else:
        text = repr(value)
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    if not isinstance(exponent, int):  # 'n', 'N' or 'F': NaN and infinities returned above
        raise ValueError(f"{value!r} is not a finite number")
    out = "-" if sign else ""
    digits_text = "".join(map(str, digits))
    point = len(digits_text) + exponent  # the value is 0.<digits> x 10^point
    if -3 < point <= 7:  # 1e-3 <= |value| < 1e7: plain notation
        if point <= 0:
            return f"{out}0.{'0' * -point}{digits_text}"
        whole = digits_text[:point].ljust(point, "0")
        return f"{out}{whole}.{digits_text[point:] or '0'}"
    return f"{out}{digits_text[0]}.{digits_text[1:] or '0'}E{point - 1}"


def _plain_decimal(value: Any, scale: int) -> str:
    """Decimal.toString (BigDecimal.toPlainString at the type's scale)."""
    d = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    return format(d.quantize(decimal.Decimal(1).scaleb(-scale), context=decimal.Context(prec=80)), "f")


# ---- dates and timestamps ---------------------------------------------------------------------------------

def _split_nanos(total_nanos: int) -> tuple[dt.date, int, int, int, int]:
    days, nanos_of_day = divmod(total_nanos, _NANOS_PER_DAY)
    seconds, nanos = divmod(nanos_of_day, 10**9)
    hour, rest = divmod(seconds, 3600)
    minute, second = divmod(rest, 60)
    return _EPOCH_DATE + dt.timedelta(days=days), hour, minute, second, nanos


def _local_date_time_string(total_nanos: int) -> str:
    """java.time.LocalDateTime.toString of these UTC fields."""
    day, hour, minute, second, nanos = _split_nanos(total_nanos)
    text = f"{day.isoformat()}T{hour:02d}:{minute:02d}"
    if second or nanos:
        text += f":{second:02d}"
        if nanos % 1_000_000 == 0 and nanos:
            text += f".{nanos // 1_000_000:03d}"
        elif nanos % 1000 == 0 and nanos:
            text += f".{nanos // 1000:06d}"
        elif nanos:
            text += f".{nanos:09d}"
    return text


def _formatted_timestamp(total_nanos: int, precision: int) -> str:
    """DateTimeUtils.formatTimestamp: `yyyy-MM-dd HH:mm:ss`, then the nanoseconds with trailing zeros dropped
    down to `precision` digits."""
    day, hour, minute, second, nanos = _split_nanos(total_nanos)
    fraction = f"{nanos:09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = f"{day.isoformat()} {hour:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{fraction}" if fraction else text


def _local_wall_clock_nanos(instant_nanos: int) -> int:
    """The instant's wall-clock time in this process's local time zone, as epoch nanoseconds of those fields."""
    return instant_nanos + time.localtime(instant_nanos // 10**9).tm_gmtoff * 10**9


# ---- one column -------------------------------------------------------------------------------------------

_TIMESTAMP_PRECISION = re.compile(r"TIMESTAMP(?:_LTZ)?\s*\((\d)\)")


def _timestamp_precision(paimon_type: str) -> int:
    m = _TIMESTAMP_PRECISION.match(paimon_type.strip().upper())
    return int(m.group(1)) if m else 6


def _value_formatter(name: str, arrow_type: pa.DataType, paimon_type: str, legacy: bool) -> Callable[[Any], str]:
    """A function from a non-null partition value of this column to its text, before escaping."""
    t = arrow_type
    if pa.types.is_boolean(t):
        return lambda v: "true" if v else "false"
    if pa.types.is_integer(t):
        return lambda v: str(int(v))
    if pa.types.is_floating(t):
        single = pa.types.is_float32(t)
        return lambda v: _java_floating(float(v), single)
    if pa.types.is_decimal(t):
        return lambda v: _plain_decimal(v, t.scale)
    if pa.types.is_date32(t):
        if legacy:
            return lambda v: str(epoch_days(v))
        return lambda v: (_EPOCH_DATE + dt.timedelta(days=epoch_days(v))).isoformat()
    if pa.types.is_timestamp(t):
        unit = t.unit
        if legacy:
            return lambda v: _local_date_time_string(epoch_nanos(v, unit))
        precision = _timestamp_precision(paimon_type)
        if t.tz is not None:
            return lambda v: _formatted_timestamp(_local_wall_clock_nanos(epoch_nanos(v, unit)), precision)
        return lambda v: _formatted_timestamp(epoch_nanos(v, unit), precision)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if legacy:
            def refuse(_: Any) -> str:
                raise UnsupportedTableError(
                    f"partition column {name!r} is {paimon_type}: with partition.legacy-name = true Paimon names "
                    "such directories by a Java object identity that cannot be reproduced; set the table option "
                    "partition.legacy-name = false to write or read it here")
            return refuse
        return lambda v: bytes(v).decode("utf-8", errors="replace")
    return str


class PartitionCodec:
    """Converts between partition tuples, the BinaryRow bytes manifests carry and Paimon's directory names."""

    def __init__(self, names: Sequence[str], types: Sequence[pa.DataType], default_name: str,
                 paimon_types: Sequence[str] | None = None, legacy_name: bool = True):
        self.names = list(names)
        self.types = list(types)
        self.default_name = default_name
        self.legacy_name = legacy_name
        spelled = list(paimon_types) if paimon_types is not None else [""] * len(self.names)
        self._formatters = [_value_formatter(n, t, p, legacy_name) for n, t, p in zip(self.names, self.types, spelled)]
        self._escaped_names = [escape_path_name(n) for n in self.names]

    def to_bytes(self, values: Sequence[Any]) -> bytes:
        return serialize_row(list(values), self.types)

    def from_bytes(self, data: bytes) -> tuple:
        if not self.names:
            return ()
        return tuple(deserialize_row(data, self.types))

    def value_texts(self, values: Sequence[Any]) -> list[str]:
        """Each value as Paimon writes it into a directory name, unescaped (`partition.default-name` for NULL)."""
        out = []
        for fmt, v in zip(self._formatters, values):
            text = None if v is None else fmt(v)
            out.append(self.default_name if text is None or _java_blank(text) else text)
        return out

    def path(self, values: Sequence[Any]) -> str:
        """`k1=v1/k2=v2/` (empty for unpartitioned tables)."""
        return "".join(f"{k}={escape_path_name(v)}/" for k, v in zip(self._escaped_names, self.value_texts(values)))

    def as_dict(self, values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.names, values))
