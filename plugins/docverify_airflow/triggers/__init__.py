"""Airflow triggers of docverify (provider style)."""
