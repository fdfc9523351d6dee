"""Progress reports of long upkeep operations: a callback type and a terminal progress line."""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

Progress = Callable[[str, int, int], None]


def tty_progress(stream: TextIO | None = None) -> Progress | None:
    """A progress callback writing one updating line to stderr, or None when stderr is not a terminal."""
    out = stream or sys.stderr
    if not getattr(out, "isatty", lambda: False)():
        return None
    last_stage: str | None = None
    last_time = 0.0

    def report(stage: str, done: int, total: int) -> None:
        nonlocal last_stage, last_time
        now = time.monotonic()
        finished = bool(total) and done >= total
        if stage == last_stage and not finished and now - last_time < 0.1:
            return
        last_stage, last_time = stage, now
        text = f"{stage}: {done}/{total}" if total else f"{stage}: {done}"
        out.write("\r\x1b[2K" + text + ("\n" if finished else ""))
        out.flush()

    return report
