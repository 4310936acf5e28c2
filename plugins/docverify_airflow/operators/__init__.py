"""Airflow operators of docverify (provider style)."""
