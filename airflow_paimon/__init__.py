"""Apache Paimon table upkeep from Apache Airflow."""

__version__ = "0.1.0"
