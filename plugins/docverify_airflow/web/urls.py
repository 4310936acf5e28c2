"""The addresses of the plugin's pages on the api-server, relative to its root (they work behind any host
name): what a task writes into a form or a message, without importing the web apps that serve them."""

from __future__ import annotations


def packet_url(doc_id: str) -> str:
    """The packet page of ``doc_id`` (:mod:`docverify_airflow.web.packets`)."""
    return f"/docverify/packets/{doc_id}"


def review_url(review_id: str) -> str:
    """The review workspace of ``review_id`` (:mod:`docverify_airflow.web.review`)."""
    return f"/docverify/reviews/{review_id}"
