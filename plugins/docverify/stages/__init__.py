"""The nightly DAG's stages, one module per stage (the domain core; no Airflow)."""
