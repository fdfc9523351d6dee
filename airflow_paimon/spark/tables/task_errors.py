"""The format library's errors raised inside Spark tasks, recovered on the driver.

Spark reports a Python task's exception as text inside its own (JVM) exception; the driver turns that text back
into the library's error, so that a caller (and the applications' exit codes) see a DuplicateKeyError or a
SchemaMismatchError rather than a Py4J error.
"""

from __future__ import annotations

import importlib
import re
from contextlib import contextmanager
from typing import Iterator

from airflow_paimon.format.errors import DuplicateKeyError, PaimonError

__all__ = ["DUPLICATE_MARKER", "unwrap_task_error", "task_errors"]

# Starts the text of a DuplicateKeyError a task raises, so that the driver finds it in Spark's exception.
DUPLICATE_MARKER = "PAIMON_DUPLICATE_KEY"

_TASK_ERROR = re.compile(r"^(airflow_paimon\.[\w.]+)\.(\w+Error): (.+)$", re.MULTILINE)


def unwrap_task_error(exc: BaseException) -> BaseException:
    """The format library's error a Spark task raised, recovered from the JVM exception text when possible
    (else `exc` itself)."""
    text = str(exc)
    if DUPLICATE_MARKER in text:
        start = text.index(DUPLICATE_MARKER) + len(DUPLICATE_MARKER) + 1
        line = text[start:].splitlines()[0].strip() if text[start:] else ""
        return DuplicateKeyError(line or text)
    found = _TASK_ERROR.findall(text)
    if found:
        module, name, message = found[-1]
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return exc
        if isinstance(cls, type) and issubclass(cls, PaimonError):
            return cls(message.strip())
    return exc


@contextmanager
def task_errors() -> Iterator[None]:
    """Run a Spark job; an error its tasks raised comes out as the library's error (`unwrap_task_error`)."""
    try:
        yield
    except DuplicateKeyError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark wraps task errors in JVM exceptions
        err = unwrap_task_error(e)
        if err is e:
            raise
        raise err from None
