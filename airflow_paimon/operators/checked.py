"""Argument checks of the provider's operators and sensors, at DAG parse time and again once rendered.

An operator lists its checks in ``check_arguments(rendered)``; :class:`CheckedArguments` runs it at the end of
``__init__`` (``rendered=False``: templates are skipped, anything else must be right, and a mistake is a DAG
import error naming the task and the argument) and again after Airflow rendered the templates, before
``execute`` (``rendered=True``: the task fails without retries, since a retry renders the same value). The
rules are those of :mod:`airflow_paimon.arguments`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException

from airflow_paimon.arguments import ArgumentError, is_template

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import Context

__all__ = ["CheckedArguments", "checkable"]


def checkable(value: Any, rendered: bool) -> bool:
    """Whether ``value`` is given and can be checked now: not None, not a blank rendered template (which means
    "not given"), and not a template still to be rendered."""
    if value is None:
        return False
    if isinstance(value, str) and not value.strip():
        return False
    return rendered or not is_template(value)


class CheckedArguments:
    """Mixin (put it before the Airflow base class) running ``check_arguments`` after rendering."""

    def check_arguments(self, rendered: bool) -> None:
        """Raise :class:`~airflow_paimon.arguments.ArgumentError` for an argument that cannot work."""

    def check_arguments_at_parse_time(self) -> None:
        """The checks of the literal arguments; call it at the end of ``__init__``."""
        try:
            self.check_arguments(rendered=False)
        except ArgumentError as exc:
            raise ArgumentError(f"{type(self).__name__}(task_id={getattr(self, 'task_id', None)!r}): {exc}") from None

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        try:
            self.check_arguments(rendered=True)
        except ArgumentError as exc:
            raise AirflowFailException(f"{type(self).__name__}: {exc}") from None
