"""The tables view as an ASGI app that builds itself on its first request.

Every Airflow component loads the provider's plugin (schedulers, DAG processors and workers too), but only the API
server serves the view: building the FastAPI app (and importing FastAPI) waits for the first request.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LazyTablesApp"]


class LazyTablesApp:
    """An ASGI app that delegates to ``airflow_paimon.ui.app.create_app()``, created on the first call."""

    def __init__(self) -> None:
        self._app: Any = None

    def __repr__(self) -> str:
        return "airflow_paimon.ui.app:create_app()"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_paimon.ui.app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)
