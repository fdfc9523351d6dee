"""Airflow hooks of the Paimon provider."""
