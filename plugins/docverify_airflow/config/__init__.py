"""Configuration from Airflow (issue 41 item 2, ADR 0055): being split into modules; for now the
one module :mod:`docverify_airflow.config.settings`, every name of which is re-exported here."""

from docverify_airflow.config import settings as _settings
from docverify_airflow.config.settings import *  # noqa: F403

globals().update({k: v for k, v in vars(_settings).items() if not k.startswith("__")})
