"""The change feed: which rows changed between two snapshots, tags or times (see feed.py), in Paimon's modes."""

from .feed import changes, resolve_mode
from .options import MODES, request_from_options
from .ranges import ChangeModeError

__all__ = ["changes", "resolve_mode", "MODES", "request_from_options", "ChangeModeError"]
