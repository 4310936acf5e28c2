"""The one Airflow plugin of the project: the SME packet pages on the api-server (see
docverify_airflow/web/packets.py), linked from the review form and the Browse menu."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class DocverifyPlugin(AirflowPlugin):
    name = "docverify"

    # a property where AirflowPlugin declares a list: the app is imported when the api-server loads
    # plugins, not in every task process
    @property
    def fastapi_apps(self) -> list[dict[str, object]]:  # type: ignore[override]
        from docverify_airflow.web.packets import app

        return [{"app": app, "url_prefix": "/docverify", "name": "docverify SME packets"}]

    external_views = [{"name": "SME reviews", "href": "/docverify/reviews/", "category": "browse",
                       "url_route": "docverify_reviews"},
                      {"name": "SME packets", "href": "/docverify/packets/", "category": "browse",
                       "url_route": "docverify_packets"},
                      {"name": "Verification trend", "href": "/docverify/trend/", "category": "browse",
                       "url_route": "docverify_trend"},
                      {"name": "Nightly reports", "href": "/docverify/reports/", "category": "browse",
                       "url_route": "docverify_reports"}]
