"""The operator's night end to end: the real Airflow components (scheduler, dag-processor,
api-server, triggerer; LocalExecutor) on loopback in a temporary Airflow home, driven by headless
Chromium (Debian's chromium + chromium-driver) through Selenium. Screenshots of every step go to
build/e2e/ (a test artifact; `make screenshots` copies the README's ones to docs/images/)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "e2e"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def browser_binaries():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:  # `make test` installs them (make browser); never a silent skip
        pytest.fail(f"headless Chromium is missing ({', '.join(missing)}): run `make browser` "
                    f"(apt-get install chromium chromium-driver)")
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture(scope="module")
def driver(browser_binaries, tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = browser_binaries
    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    opts.binary_location = chromium
    drv = webdriver.Chrome(options=opts, service=Service(chromedriver))
    drv.implicitly_wait(0)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield drv
    drv.quit()
