"""Pure helpers of the Document AI package (no Airflow or Google client imports)."""
