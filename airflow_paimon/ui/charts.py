"""The page's charts, drawn by plotly.js from figures built with plotly's Python package.

Plotly's package bundles plotly.js, which the app serves itself (``plotly_js``), so the charts work on a
machine without internet access and no CDN is ever contacted.
"""

from __future__ import annotations

from functools import cache

from airflow_paimon.ui.page_data import CHANGE_TYPES, ChangeCounts, SnapshotRow

__all__ = ["changes_chart", "plotly_js", "timeline_chart"]

_CHANGE_COLOURS = {"insert": "#2e7d32", "update_preimage": "#9e9e9e", "update_postimage": "#1565c0",
                   "delete": "#c62828"}


@cache
def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def _html(figure: object, div_id: str) -> str:
    from plotly.io import to_html

    return str(to_html(figure, full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True}))


def timeline_chart(rows: list[SnapshotRow]) -> str:
    """Records added (up) and deleted (down) per snapshot of the page, tags marked above their snapshot."""
    import plotly.graph_objects as go

    ordered = sorted(rows, key=lambda r: r.id)
    ids = [r.id for r in ordered]
    hover = [f"snapshot {r.id} ({r.commit_kind})<br>{r.commit_time:%Y-%m-%d %H:%M:%S} UTC<br>"
             f"files +{r.added_files} / -{r.deleted_files}<br>bytes +{r.added_bytes} / -{r.deleted_bytes}"
             + (f"<br>tags: {', '.join(r.tags)}" if r.tags else "") for r in ordered]
    figure = go.Figure()
    figure.add_bar(x=ids, y=[r.added_records for r in ordered], name="records added", marker_color="#2e7d32",
                   hovertext=hover, hoverinfo="text+y")
    figure.add_bar(x=ids, y=[-r.deleted_records for r in ordered], name="records deleted",
                   marker_color="#c62828", hovertext=hover, hoverinfo="text+y")
    tagged = [r for r in ordered if r.tags]
    if tagged:
        top = max([r.added_records for r in ordered] + [1])
        figure.add_scatter(x=[r.id for r in tagged], y=[top * 1.1] * len(tagged), mode="markers+text",
                           text=[", ".join(r.tags) for r in tagged], textposition="top center", name="tags",
                           marker={"symbol": "triangle-down", "size": 10, "color": "#6a1b9a"})
    figure.update_layout(barmode="relative", height=320, margin={"l": 40, "r": 10, "t": 30, "b": 40},
                         xaxis_title="snapshot", yaxis_title="records", legend={"orientation": "h"})
    return _html(figure, "timeline-chart")


def changes_chart(changes: ChangeCounts) -> str:
    """Rows of the change feed per day, stacked by ``_change_type``."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for kind in CHANGE_TYPES:
        if kind in changes.counts:
            figure.add_bar(x=changes.days, y=changes.counts[kind], name=kind, marker_color=_CHANGE_COLOURS[kind])
    figure.update_layout(barmode="stack", height=260, margin={"l": 40, "r": 10, "t": 30, "b": 40},
                         xaxis_title="day (UTC)", yaxis_title="rows", legend={"orientation": "h"})
    return _html(figure, "changes-chart")
