"""Ids on the packet pages' route (issue 25): a trailing newline (``$`` matches before a final
newline), a lone surrogate or a control character is refused with 400 — never a 500."""

from __future__ import annotations

import pytest
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


@pytest.fixture
def logged_in(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from docverify_airflow.web import packets as packet_app

    (tmp_path / "root").mkdir()
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path / "root"))
    for dep in packet_app.AUTH:
        packet_app.app.dependency_overrides[dep.dependency] = lambda: None
    yield TestClient(packet_app.app, raise_server_exceptions=False)
    packet_app.app.dependency_overrides.clear()


@pytest.mark.parametrize("bad", ["quest_cbc_panel%0A", "quest_cbc_panel%0D", "a%09b", "caf%E9", "%ED%A0%BE",
                                 "x%7F", "a%5Cb"])
def test_an_id_with_a_newline_surrogate_or_control_character_is_400(logged_in, bad):
    assert logged_in.get(f"/packets/{bad}").status_code == 400


def test_an_unknown_safe_id_is_still_404(logged_in):
    assert logged_in.get("/packets/no_such_doc").status_code == 404
