"""Progress reports of long upkeep operations: a callback type and a terminal progress line."""

from __future__ import annotations

import sys
import time
from typing import Callable

Progress = Callable[[str, int, int], None]


def tty_progress(stream=None) -> Progress | None:
    """A progress callback writing one updating line to stderr, or None when stderr is not a terminal."""
    stream = stream or sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return None
    state = {"stage": None, "last": 0.0}

    def report(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        finished = total and done >= total
        if stage == state["stage"] and not finished and now - state["last"] < 0.1:
            return
        state["stage"], state["last"] = stage, now
        text = f"{stage}: {done}/{total}" if total else f"{stage}: {done}"
        stream.write("\r\x1b[2K" + text + ("\n" if finished else ""))
        stream.flush()

    return report
