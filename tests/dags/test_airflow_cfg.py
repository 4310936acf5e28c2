"""The local Airflow home's airflow.cfg holds the project's folders: with only AIRFLOW_HOME set
(the README's exports), Airflow finds the DAGs and plugins and loads no examples."""

import os
import subprocess
import sys

import pytest
from tests.dags.airflow_env import REPO


@pytest.mark.slow
def test_only_airflow_home_is_needed(tmp_path):
    cfg = tmp_path / "airflow.cfg"
    cfg.write_text("[core]\nload_examples = True\nparallelism = 7\n")  # a file `airflow db migrate` left
    subprocess.run([sys.executable, str(REPO / "scripts" / "write_airflow_cfg.py"), str(cfg)], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    code = ("from airflow.configuration import conf; "
            "print('|'.join(conf.get('core', k) for k in "
            "('dags_folder', 'plugins_folder', 'load_examples', 'parallelism')))")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dags, plugins, examples, parallelism = proc.stdout.strip().splitlines()[-1].split("|")
    assert dags == str(REPO / "dags")
    assert plugins == str(REPO / "plugins")
    assert examples == "False"
    assert parallelism == "7"  # other keys of an existing file are kept
    text = cfg.read_text()
    assert "fernet_key = " in text and "jwt_secret = " in text  # components share these secrets
    assert cfg.stat().st_mode & 0o077 == 0  # owner only
    before = text
    subprocess.run([sys.executable, str(REPO / "scripts" / "write_airflow_cfg.py"), str(cfg)], check=True,
                   capture_output=True)
    assert cfg.read_text() == before  # secrets are kept across runs
