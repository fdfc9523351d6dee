"""How much randomised work a test does: all of it under ``make test``, a fifth under ``make test-fast``.

``make test-fast`` sets ``PAIMON_TEST_SIZE=fast`` so the quick subset still walks every path of the randomised
tests in a few seconds, while the full suite keeps their reach. A test names its full size once.
"""

from __future__ import annotations

import os

FAST = os.environ.get("PAIMON_TEST_SIZE") == "fast"


def scaled(full: int, least: int = 5) -> int:
    """``full`` in the full suite; a fifth of it (never fewer than ``least``) in the quick subset."""
    return max(least, full // 5) if FAST else full
