"""Which statistics a written file keeps per column: Paimon's `metadata.stats-mode` and the options refining it.

A manifest entry carries, per column of its file, a null count and bounds, which let readers skip the file. How
much of that a column keeps is its mode: nothing (`none`), the null count (`counts`), the null count and bounds
whose strings and bytes are cut to N characters or bytes (`truncate(N)`, Paimon's default `truncate(16)`), or
exact bounds (`full`). Wide tables set `none` or `metadata.stats-keep-first-n-columns` to keep their manifests
small; a column filtered on often may be given `full`.

A column's mode, as Paimon's writers pick it (StatsCollectorFactories, KeyValueFileWriterFactory), the first that
applies: its own `fields.<name>.stats-mode`; `truncate(128)` for the system columns (`_KEY_*`,
`_SEQUENCE_NUMBER`, `_VALUE_KIND`); `none` past the first `metadata.stats-keep-first-n-columns` value columns;
then the file's mode: `changelog-file.stats-mode` for a changelog file when set, for a primary-key table's data
file the mode `metadata.stats-mode.per.level` gives its level, else `metadata.stats-mode` (an append table's files
always take `metadata.stats-mode`). ARRAY, MAP and ROW columns keep nothing under any mode: Paimon reads the
statistics from the Parquet footer by column name, which those columns' leaves do not have. With
`metadata.stats-dense-store` (default true), a file's value statistics leave out the columns that keep nothing
and name the others in its `_VALUE_STATS_COLS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .errors import InvalidOptionError
from .schema import KEY_FIELD_PREFIX
from .values import count, level_map, option_boolean

__all__ = ["ColumnStats", "StatsMode", "StatsPolicy"]

ColumnStats = tuple[Any, Any, "int | None"]
"""A column's (min, max, null count); None where the mode keeps no such statistic."""

# Paimon's system fields (SpecialFields.SYSTEM_FIELD_NAMES), besides the `_KEY_` columns.
_SYSTEM_COLUMNS = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})
_TRUNCATE = re.compile(r"TRUNCATE\((\d+)\)")
_FIELD_MODE = re.compile(r"fields\.(.+)\.stats-mode")


@dataclass(frozen=True)
class StatsMode:
    """One column's statistics mode: `kind` none, counts, truncate (to `length`) or full."""

    kind: str
    length: int = 0

    @classmethod
    def parse(cls, text: str, option: str) -> "StatsMode":
        """Paimon's spelling, in any case (as its SimpleColStatsCollector.from reads it)."""
        upper = str(text).upper()
        if upper in ("NONE", "COUNTS", "FULL"):
            return cls(upper.lower())
        m = _TRUNCATE.fullmatch(upper)
        if m is not None and int(m.group(1)) > 0:
            return cls("truncate", int(m.group(1)))
        raise InvalidOptionError(f"{option}: {text!r} is not a statistics mode; give none, counts, full or "
                                 "truncate(N) with N >= 1 (Paimon's default is truncate(16))")

    def apply(self, low: Any, high: Any, nulls: int | None) -> ColumnStats:
        """What this mode keeps of a column's exact statistics (Paimon's SimpleColStatsCollector.convert)."""
        if self.kind == "none":
            return None, None, None
        if self.kind == "counts":
            return None, None, nulls
        if self.kind == "truncate":
            high = _truncate_max(high, self.length)
            if high is None:   # no upper bound exists (or none was known): Paimon then keeps no bound at all
                return None, None, nulls
            return _truncate_min(low, self.length), high, nulls
        return low, high, nulls


NONE = StatsMode("none")
_DEFAULT = StatsMode("truncate", 16)
_SYSTEM = StatsMode("truncate", 128)


@dataclass(frozen=True)
class StatsPolicy:
    """A table's statistics options (see the module's text)."""

    default: StatsMode = _DEFAULT
    per_level: Mapping[int, StatsMode] = field(default_factory=dict)
    changelog: StatsMode | None = None
    fields: Mapping[str, StatsMode] = field(default_factory=dict)
    keep_first: int = -1
    dense: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "StatsPolicy":
        raw = options.get("metadata.stats-mode")
        default = StatsMode.parse(raw, "metadata.stats-mode") if raw is not None else _DEFAULT
        changelog = options.get("changelog-file.stats-mode")
        keep = count(options.get("metadata.stats-keep-first-n-columns"), "metadata.stats-keep-first-n-columns",
                     minimum=None, default=-1)
        dense = options.get("metadata.stats-dense-store")
        return cls(
            default=default,
            per_level=_per_level(options.get("metadata.stats-mode.per.level", "")),
            changelog=None if changelog is None else StatsMode.parse(changelog, "changelog-file.stats-mode"),
            fields={m.group(1): StatsMode.parse(value, key) for key, value in options.items()
                    if (m := _FIELD_MODE.fullmatch(key))},
            keep_first=keep,
            dense=True if dense is None else option_boolean(dense, "metadata.stats-dense-store"),
        )

    def file_mode(self, level: int | None, changelog: bool = False) -> StatsMode:
        """The mode of a file's columns that set none of their own: `level` None for an append table's file."""
        if changelog and self.changelog is not None:
            return self.changelog
        return self.default if level is None else self.per_level.get(level, self.default)

    def column_modes(self, columns: Sequence[str], mode: StatsMode) -> list[StatsMode]:
        """Per column of a file, in the file's order (system columns included), under the file's `mode`."""
        out = []
        counted = 0   # value columns so far (the system ones do not count toward the first N kept)
        for name in columns:
            own = self.fields.get(name)
            if own is not None:
                out.append(own)
                counted += 1
            elif name.startswith(KEY_FIELD_PREFIX) or name in _SYSTEM_COLUMNS:
                out.append(_SYSTEM)
            else:
                out.append(NONE if 0 <= self.keep_first <= counted else mode)
                counted += 1
        return out


def _per_level(text: str) -> dict[int, StatsMode]:
    """`metadata.stats-mode.per.level`: Paimon's map option, 'level:mode' pairs separated by commas."""
    name = "metadata.stats-mode.per.level"
    return {level: StatsMode.parse(mode, name) for level, mode in level_map(text, name, "'0:none,1:full'").items()}


def _truncate_min(v: Any, length: int) -> Any:
    """A value <= `v`: its first `length` characters (or bytes)."""
    if isinstance(v, (str, bytes)) and len(v) > length:
        return v[:length]
    return v


def _truncate_max(v: Any, length: int) -> Any:
    """A value >= every value beginning with `v`'s first `length` characters (or bytes), or None when none
    exists: the prefix with its last character (byte) that can grow grown by one, as Paimon's."""
    if isinstance(v, str) and len(v) > length:
        head = v[:length]
        for i in range(len(head) - 1, -1, -1):
            c = ord(head[i])
            if c < 0x10FFFF and not (0xD7FF <= c < 0xE000):
                return head[:i] + chr(c + 1)
        return None
    if isinstance(v, bytes) and len(v) > length:
        prefix = bytearray(v[:length])
        for i in range(len(prefix) - 1, -1, -1):
            if prefix[i] < 0xFF:
                prefix[i] += 1
                return bytes(prefix[: i + 1])
        return None
    return v
