"""docverify — verification of AI-generated classifications of clinical PDFs (domain core).

This package imports nothing from Airflow: the DAGs, the CLI and the tests call the same
functions (see ``docverify.pipeline.document``).
"""

__version__ = "0.1.0"
