"""Shared fixtures. The real corpora live outside the repository (../shared/corpora, or
DOCVERIFY_CORPORA); tests that need them fail loudly when they are missing, unless
DOCVERIFY_SKIP_CORPORA=1 is set on purpose."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest
from hypothesis import settings
from tests.gcs_emulator import gcs_emulator, gcs_root  # noqa: F401 - fixtures: a GCS emulator, a gs:// root

REPO = pathlib.Path(__file__).resolve().parents[1]

# Property tests check what holds, not how fast: no per-example deadline (hypothesis's 200 ms default fails an
# example at random when the other pytest-xdist worker loads the machine -- seen once in `make test-fast`).
# Speed is measured by the benchmark scripts.
settings.register_profile("docverify", deadline=None)
settings.load_profile("docverify")


def _corpora() -> pathlib.Path:
    from scripts.support.corpora import default_corpora_dir

    return default_corpora_dir()


@pytest.fixture(scope="session")
def corpora_dir() -> pathlib.Path:
    path = _corpora()
    if not path.is_dir():
        if os.environ.get("DOCVERIFY_SKIP_CORPORA") == "1":
            pytest.skip(f"corpora not found at {path} (DOCVERIFY_SKIP_CORPORA=1)")
        pytest.fail(
            f"the shared corpora are missing at {path}: set DOCVERIFY_CORPORA to their folder, "
            f"or DOCVERIFY_SKIP_CORPORA=1 to skip the corpus tests deliberately"
        )
    return path


@pytest.fixture(scope="session")
def repo_dir() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def _review_night_pristine(tmp_path_factory) -> pathlib.Path:
    """``review_night.run_night`` on its default samples, once per test process (per xdist
    worker): ``<base>/root`` as the stages left it, and ``<base>/pristine``, its copy."""
    from tests.docverify.review_night import run_night

    base = tmp_path_factory.mktemp("review_night")
    run_night(base / "root")
    shutil.copytree(base / "root", base / "pristine", symlinks=True)
    return base


@pytest.fixture
def review_night_root(_review_night_pristine) -> pathlib.Path:
    """The storage root of ``review_night.run_night(root)`` (its default samples), exactly as the
    night left it: the night runs once per test process and its root is restored before each test
    at the same path (its records hold absolute paths), so a test that answers, claims or writes
    finds a fresh night's bytes, without paying the night's stages (~1 s) again."""
    root = _review_night_pristine / "root"
    shutil.rmtree(root)
    shutil.copytree(_review_night_pristine / "pristine", root, symlinks=True)
    return root


@pytest.fixture(autouse=True)
def _fresh_settings():
    """Every test starts without the settings config.settings() keeps outside a task for a few
    seconds (RECENT_S): a Variable a test sets is read, not another test's."""
    import sys

    config = sys.modules.get("docverify_airflow.config")
    if config is not None:
        config.forget_settings()
    yield
