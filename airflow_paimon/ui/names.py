"""Database and table names taken from a URL, checked before they reach the filesystem.

A name is refused when it could leave the warehouse or name something other than one directory: path
separators, ``.``/``..``, a leading dot, percent signs (a second URL decoding), colons (URI schemes, drive
letters), control characters. The pages then also require the name to be listed by the catalog, so only existing
databases and tables are ever opened.
"""

from __future__ import annotations

import re

__all__ = ["UnsafeName", "checked_name"]

_FORBIDDEN = re.compile(r"[/\\%:\x00-\x1f\x7f]")
_MAX_LENGTH = 255


class UnsafeName(ValueError):
    """A database or table name that could escape the warehouse or is not a plain name."""


def checked_name(kind: str, value: str) -> str:
    """``value`` when it is a plain database or table name; else UnsafeName saying what is wrong."""
    if not value or not value.strip():
        raise UnsafeName(f"{kind}: empty name; give the name of an existing {kind}")
    if len(value) > _MAX_LENGTH:
        raise UnsafeName(f"{kind}: longer than {_MAX_LENGTH} characters; give the name of an existing {kind}")
    if value.startswith(".") or value != value.strip():
        raise UnsafeName(f"{kind}: {value!r} starts with a dot or blank; give the name of an existing {kind}")
    found = _FORBIDDEN.search(value)
    if found:
        raise UnsafeName(f"{kind}: {value!r} holds {found.group()!r}, which no {kind} name may hold; "
                         f"give the name of an existing {kind}")
    return value
