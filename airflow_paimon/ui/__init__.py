"""The "Paimon tables" view of the Airflow UI: a read-only FastAPI app that the provider's plugin mounts on the
API server (``/paimon``), with the operators' extra link to a table's page.

Pure parts (name checks, page data, charts) do not import Airflow, so they are tested without a server.
"""
