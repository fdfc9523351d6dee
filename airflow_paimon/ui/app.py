"""The tables view: a read-only FastAPI app that the provider's plugin mounts on Airflow's API server.

Every endpoint is a GET and requires a user authenticated by Airflow's auth manager (the UI's ``_token`` cookie or
an ``Authorization: Bearer`` token, checked by Airflow's own ``get_user``); the pages of a connection also require
Airflow's permission to read that connection (``requires_access_connection("GET")``), and the list of tables shows
only the connections the user may read. Airflow's security module is imported when a request comes, not when the
plugin is loaded: schedulers and workers load the plugin too and never serve it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from airflow_paimon.ui.names import UnsafeName, checked_name
from airflow_paimon.ui.urls import URL_PREFIX, connection_path, table_path

if TYPE_CHECKING:
    import jinja2

    from airflow_paimon.format import Table
    from airflow_paimon.ui.connections import PaimonWarehouse

__all__ = ["create_app"]

_TEMPLATES = Path(__file__).parent / "templates"
_bearer = HTTPBearer(auto_error=False)
_MAX_FILES_LISTED = 200
_CHANGE_SNAPSHOTS = 20  # the change feed on a table's page covers at most this many of the page's snapshots


async def authenticated_user(request: Request,
                             credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Any:
    """The user Airflow's auth manager authenticates for this request (401/403 otherwise)."""
    from airflow.api_fastapi.core_api.security import get_user

    return await get_user(request, _oauth_token=None, bearer_credentials=credentials)


async def connection_reader(request: Request, user: Any = Depends(authenticated_user)) -> Any:
    """The user, when Airflow's auth manager lets them read the connection of the path (403 otherwise)."""
    from airflow.api_fastapi.core_api.security import requires_access_connection

    await requires_access_connection("GET")(request, user)
    return user


def _readable_connections(user: Any, conn_ids: list[str]) -> list[str]:
    from airflow.api_fastapi.app import get_auth_manager

    allowed = get_auth_manager().filter_authorized_connections(conn_ids=set(conn_ids), user=user, method="GET")
    return [c for c in conn_ids if c in allowed]


def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined)


def _render(env: jinja2.Environment, name: str, **values: Any) -> HTMLResponse:
    return HTMLResponse(env.get_template(name).render(prefix=URL_PREFIX, **values),
                        headers={"Cache-Control": "no-store"})


def _warehouse(conn_id: str) -> PaimonWarehouse:
    from airflow_paimon.hooks.paimon import PaimonConnectionNotFound
    from airflow_paimon.ui.connections import open_warehouse

    try:
        return open_warehouse(conn_id)
    except PaimonConnectionNotFound:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no connection {conn_id!r}") from None
    except ValueError as exc:  # a connection that names no warehouse
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None


def _table_list(wh: PaimonWarehouse) -> list[tuple[str, str, str]]:
    return [(db, name, table_path(wh.conn_id, db, name))
            for db in sorted(wh.catalog.list_databases()) for name in sorted(wh.catalog.list_tables(db))]


def _open_table(wh: PaimonWarehouse, database: str, table: str) -> Table:
    """The table, once both names are plain names the catalog lists (400 for unsafe names, 404 for others)."""
    try:
        checked_name("database", database)
        checked_name("table", table)
    except UnsafeName as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    if database not in wh.catalog.list_databases() or table not in wh.catalog.list_tables(database):
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no table {database}.{table} in connection {wh.conn_id!r}")
    return wh.catalog.get_table(f"{database}.{table}")


def create_app() -> FastAPI:
    """The app the plugin mounts at ``/paimon``."""
    app = FastAPI(title="Paimon tables", docs_url=None, redoc_url=None, openapi_url=None)
    templates: list[jinja2.Environment] = []

    def env() -> jinja2.Environment:
        if not templates:
            templates.append(_environment())
        return templates[0]

    @app.get("/static/plotly.min.js", dependencies=[Depends(authenticated_user)])
    def plotly_script() -> Response:
        from airflow_paimon.ui.charts import plotly_js

        return Response(plotly_js(), media_type="application/javascript",
                        headers={"Cache-Control": "private, max-age=86400"})

    @app.get("/", response_class=HTMLResponse)
    def index(user: Any = Depends(authenticated_user)) -> HTMLResponse:
        from airflow_paimon.ui.connections import paimon_connection_ids

        conn_ids = paimon_connection_ids()
        readable = _readable_connections(user, conn_ids)
        if conn_ids and not readable:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "Forbidden: you may read none of the paimon connections")
        warehouses = []
        for conn_id in readable:
            try:
                wh = _warehouse(conn_id)
                warehouses.append({"conn_id": conn_id, "shown_uri": wh.shown_uri, "tables": _table_list(wh),
                                   "error": None})
            except HTTPException as exc:
                warehouses.append({"conn_id": conn_id, "shown_uri": "", "tables": [], "error": exc.detail})
        return _render(env(), "index.html", warehouses=warehouses)

    @app.get("/connections/{connection_id}", response_class=HTMLResponse,
             dependencies=[Depends(connection_reader)])
    def connection(connection_id: str) -> HTMLResponse:
        wh = _warehouse(connection_id)
        return _render(env(), "connection.html",
                       wh={"conn_id": wh.conn_id, "shown_uri": wh.shown_uri, "tables": _table_list(wh)})

    @app.get("/connections/{connection_id}/tables/{database}/{table}", response_class=HTMLResponse,
             dependencies=[Depends(connection_reader)])
    def table_page(request: Request, connection_id: str, database: str, table: str, page: int = 1,
                   page_size: int = 50) -> HTMLResponse:
        from airflow_paimon.format.upkeep.expire_policy import ExpirePolicy
        from airflow_paimon.ui import charts, page_data
        from airflow_paimon.ui.runs import RunResolver

        wh = _warehouse(connection_id)
        paimon_table = _open_table(wh, database, table)
        tags = paimon_table.tags.list()
        timeline = page_data.timeline(paimon_table, tags, page, page_size)
        resolver = RunResolver(_ui_base(request))
        runs = {row.id: resolver.link(row.commit_user, row.commit_identifier) for row in timeline.rows}
        tag_rows = page_data.tag_rows(tags)
        tag_runs = {t.name: resolver.link(t.commit_user, t.commit_identifier) for t in tag_rows}
        ids = [r.id for r in timeline.rows]
        end = max(ids) if ids else None
        start = max(min(ids), end - _CHANGE_SNAPSHOTS) if end is not None else None
        changes = page_data.changes_per_day(paimon_table, start, end)
        policy = ExpirePolicy.from_options(paimon_table.options())
        now = dt.datetime.now(dt.timezone.utc)
        threshold = dt.datetime.fromtimestamp(policy.threshold_millis(int(now.timestamp() * 1000)) / 1000,
                                              tz=dt.timezone.utc)
        return _render(
            env(), "table.html", conn_id=connection_id, conn_href=connection_path(connection_id),
            database=database, table=table, timeline=timeline, runs=runs, tags=tag_rows, tag_runs=tag_runs,
            timeline_chart=charts.timeline_chart(timeline.rows) if timeline.rows else "",
            changes=changes, changes_chart=charts.changes_chart(changes) if changes.days else "",
            fields=page_data.schema_fields(paimon_table),
            options=page_data.driving_options(paimon_table.options()), policy=policy, threshold=threshold,
            expiry_href=table_path(connection_id, database, table) + "/expiry")

    @app.get("/connections/{connection_id}/tables/{database}/{table}/expiry", response_class=HTMLResponse,
             dependencies=[Depends(connection_reader)])
    def expiry_page(connection_id: str, database: str, table: str) -> HTMLResponse:
        from airflow_paimon.ui import page_data

        wh = _warehouse(connection_id)
        preview = page_data.expiry_preview(_open_table(wh, database, table))
        return _render(env(), "expiry.html", conn_id=connection_id, conn_href=connection_path(connection_id),
                       database=database, table=table, table_href=table_path(connection_id, database, table),
                       preview=preview, max_files=_MAX_FILES_LISTED)

    return app


def _ui_base(request: Request) -> str:
    """The root of Airflow's UI: the API server's root, above the mount point of this app."""
    root = str(request.scope.get("root_path", ""))
    return root[: -len(URL_PREFIX)] if root.endswith(URL_PREFIX) else ""
