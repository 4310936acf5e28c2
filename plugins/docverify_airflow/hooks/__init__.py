"""Airflow hooks of docverify (provider style)."""
