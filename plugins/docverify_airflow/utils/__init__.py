"""Pure helpers of docverify's Airflow boundary (no Airflow or Google imports)."""
