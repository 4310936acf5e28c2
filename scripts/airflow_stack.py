"""The real Airflow components on loopback, in a temporary Airflow home: scheduler,
dag-processor, api-server and triggerer with the LocalExecutor, as `airflow standalone` runs
them, but each started (and stopped) by us with known settings. The browser test and the
scheduler benchmark (scripts/bench_scheduler.py) both drive a night through it; the distributed
topology (scripts/celery_stack.py) extends it with another executor (``executor=``), its own
metadata database (``env``) and more processes (:meth:`AirflowStack.spawn`).

    with AirflowStack(home, storage_root) as stack:
        run_id = stack.trigger("clinical_doc_verification")
        stack.wait_for_run("clinical_doc_verification", run_id)

Everything listens on 127.0.0.1 only; the admin password is set by us (not printed) and the
password file is readable by its owner only. stop() ends every process it started (each in its
own process group) and waits for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_pids(procs) -> list[int]:
    """The pids of these processes (Popen-like, ``None`` skipped) and all their descendants."""
    import psutil

    out = []
    for proc in procs:
        if proc is None:
            continue
        try:
            parent = psutil.Process(proc.pid)
            out += [parent.pid] + [c.pid for c in parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return out


class AirflowStack:
    def __init__(self, home: pathlib.Path, storage_root: pathlib.Path | str, *, port: int | None = None,
                 variables: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 parallelism: int = 8, executor: str = "LocalExecutor",
                 users: dict[str, str] | None = None) -> None:
        self.home = pathlib.Path(home)
        # a local folder, or an object-store URI (gs://bucket/prefix) kept as given
        self.storage_root = storage_root if "://" in str(storage_root) else pathlib.Path(storage_root)
        self.executor = executor
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(12)
        #: more users of the simple auth manager, name → role (viewer, user, op, admin), each with a
        #: generated password in :attr:`passwords`
        self.users = {"admin": "admin", **(users or {})}
        self.passwords = {name: self.password if name == "admin" else secrets.token_urlsafe(12) for name in self.users}
        self.variables = {"docverify_storage_root": str(self.storage_root), **(variables or {})}
        self.extra_env = env or {}
        self.parallelism = parallelism
        self.procs: dict[str, subprocess.Popen] = {}
        self._token: str | None = None
        self._token_at = 0.0

    # ------------------------------------------------------------------ set-up
    @property
    def env(self) -> dict[str, str]:
        bindir = pathlib.Path(sys.executable).parent
        base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        return {**base,
                "AIRFLOW_HOME": str(self.home),
                "PYTHONPATH": f"{REPO / 'plugins'}{os.pathsep}{REPO}",
                "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
                "AIRFLOW__CORE__EXECUTOR": self.executor,
                "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
                "AIRFLOW__CORE__AUTH_MANAGER":
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in self.users.items()),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "DOCVERIFY_DEADLINE_MINUTES": "240",  # the nightly DAG's DeadlineAlert, as in a deployment
                # SQLite (no database of the caller's): wait for a write lock, do not fail after 5 s
                **({} if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in self.extra_env else
                   {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "scripts.support.sqlite_connect.CONNECT_ARGS"}),
                **self.extra_env}

    def airflow(self, *args: str, timeout: int = 300, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(pathlib.Path(sys.executable).parent / "airflow"), *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, cwd=self.home)
        if check and proc.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args[:3])} failed: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        return proc

    def setup(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        if isinstance(self.storage_root, pathlib.Path):
            self.storage_root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(REPO / "scripts" / "write_airflow_cfg.py"), str(self.home / "airflow.cfg")],
                       check=True, capture_output=True)
        pw = self.home / "simple_auth_manager_passwords.json.generated"
        fd = os.open(pw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(self.passwords) + "\n")
        self.airflow("db", "migrate")
        load = subprocess.run([sys.executable, str(REPO / "scripts" / "load_settings.py"),
                               str(REPO / "airflow_settings.yaml")], env=self.env, capture_output=True, text=True,
                              cwd=REPO, timeout=300)
        if load.returncode != 0:
            raise RuntimeError(f"load_settings failed: {load.stdout}\n{load.stderr}")
        variables = self.home / "variables.json"
        variables.write_text(json.dumps(self.variables))
        self.airflow("variables", "import", str(variables), "--action-on-existing-key", "overwrite")

    # ------------------------------------------------------------------ processes
    def start(self, timeout: float = 180) -> AirflowStack:
        self.setup()
        airflow = str(pathlib.Path(sys.executable).parent / "airflow")
        for name in COMPONENTS:
            # as `make up` (scripts/up.sh): no log server on every interface; the api-server reads the logs
            self.spawn(name, [airflow, name] + (["--port", str(self.port), "--host", "127.0.0.1"]
                                                if name == "api-server" else ["--skip-serve-logs"]
                                                if name in ("scheduler", "triggerer") else []))
        self.wait_ready(timeout)
        self._supervise()
        return self

    #: restarted when they exit while the stack runs, as a deployment's supervisor (systemd,
    #: Kubernetes) does. On SQLite a write that collides with another process's (e.g. a backfill
    #: created from the UI while the scheduler commits) can end the scheduler with StaleDataError.
    SUPERVISED = ("scheduler", "dag-processor", "triggerer")

    def _supervise(self) -> None:
        import threading

        self.restarts: dict[str, int] = {}
        self._stopping = threading.Event()
        self._restart_lock = threading.Lock()
        args = {name: list(self.procs[name].args) for name in self.SUPERVISED if name in self.procs}

        def watch() -> None:
            while not self._stopping.wait(2):
                for name, argv in args.items():
                    with self._restart_lock:  # never a restart once stop() began
                        proc = self.procs.get(name)
                        if proc is None or proc.poll() is None or self._stopping.is_set():
                            continue
                        self.restarts[name] = self.restarts.get(name, 0) + 1
                        print(f"airflow {name} exited with {proc.returncode} (restart #{self.restarts[name]}); its "
                              f"log: {self.home / 'component_logs' / (name + '.log')}", file=sys.stderr, flush=True)
                        logs = self.home / "component_logs"
                        (logs / f"{name}.log").rename(logs / f"{name}.{self.restarts[name]}.log")
                        self.spawn(name, argv)
        threading.Thread(target=watch, name="airflow-stack-supervisor", daemon=True).start()

    def spawn(self, name: str, args: list[str], *, env: dict[str, str] | None = None,
              cwd: pathlib.Path | None = None) -> subprocess.Popen:
        """Start one process of the stack in its own process group (stop() ends the group), its
        output in component_logs/<name>.log; wait_ready() and pids() include it."""
        logs = self.home / "component_logs"
        logs.mkdir(parents=True, exist_ok=True)
        with (logs / f"{name}.log").open("w") as out:
            self.procs[name] = subprocess.Popen(args, env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
                                                cwd=cwd or self.home, start_new_session=True)
        return self.procs[name]

    def wait_ready(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"airflow {name} exited with {proc.returncode}: see "
                                       f"{self.home / 'component_logs' / (name + '.log')}\n{self.log_tail(name)}")
            try:
                health = self._get_json("/api/v2/monitor/health", auth=False)
                states = {k: (v or {}).get("status") for k, v in health.items()}
                last = str(states)
                if all(s == "healthy" for s in states.values()):
                    dags = self.api("GET", "/api/v2/dags?limit=100")
                    if {"clinical_doc_verification", "sme_review"} <= {d["dag_id"] for d in dags["dags"]}:
                        return
            except (urllib.error.URLError, ConnectionError, OSError, ValueError) as exc:
                last = repr(exc)
            time.sleep(1)
        raise TimeoutError(f"Airflow not ready after {timeout}s: {last}")

    def log_tail(self, name: str, n: int = 40) -> str:
        path = self.home / "component_logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else ""

    def pids(self) -> list[int]:
        """Every process of the stack (the components and their children)."""
        return tree_pids(self.procs.values())

    def stop(self) -> None:
        if getattr(self, "_stopping", None) is not None:
            with self._restart_lock:
                self._stopping.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        end = time.monotonic() + 30
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, end - time.monotonic()))
        for proc in self.procs.values():  # whatever ignored SIGTERM, and every child of the group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        self.procs.clear()

    def __enter__(self) -> AirflowStack:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ REST API
    def token(self) -> str:
        if self._token is None or time.monotonic() - self._token_at > 600:
            req = urllib.request.Request(f"{self.base_url}/auth/token", method="POST",
                                         data=json.dumps({"username": "admin", "password": self.password}).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                self._token = json.loads(resp.read())["access_token"]
            self._token_at = time.monotonic()
        return self._token

    def _get_json(self, path: str, auth: bool = True) -> Any:
        return self.api("GET", path) if auth else json.loads(urllib.request.urlopen(self.base_url + path,
                                                                                     timeout=30).read())

    def api(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"}
        req = urllib.request.Request(self.base_url + path, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:2000]!r}") from exc
        return json.loads(raw) if raw else None

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, logical_date: str | None = None, conf: dict | None = None) -> str:
        body: dict[str, Any] = {"logical_date": logical_date, "conf": conf or {}}
        return self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)["dag_run_id"]

    def runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=-run_after")["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict:
        from urllib.parse import quote

        return self.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")

    def paged(self, path: str, key: str) -> list[dict]:
        """Every entry of a list endpoint, page by page: the API gives at most ``[api]
        maximum_page_limit`` (100) a request whatever ``limit`` asks (a 10,000-document night has
        more task instances)."""
        out: list[dict] = []
        while True:
            page = self.api("GET", f"{path}?limit=100&offset={len(out)}")
            out += page[key]
            if not page[key] or len(out) >= page["total_entries"]:
                return out

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        from urllib.parse import quote

        return self.paged(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances", "task_instances")

    def xcoms(self, dag_id: str, run_id: str) -> list[dict]:
        """Every XCom of a run with its stored (serialized) value, as the REST API gives it."""
        from urllib.parse import quote, urlencode

        base = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances"
        entries = self.paged(f"{base}/~/xcomEntries", "xcom_entries")
        return [self.api("GET", f"{base}/{quote(e['task_id'], safe='')}/xcomEntries/{quote(e['key'], safe='')}?"
                                + urlencode({"map_index": e["map_index"]}))
                for e in entries]

    def settle(self, dag_id: str, timeout: float = 600) -> None:
        """Unpause ``dag_id`` and wait until every run the scheduler creates for it on unpausing
        (the latest interval's) is done, so a night triggered next does not queue behind it
        (max_active_runs=1)."""
        self.unpause(dag_id)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            runs = self.runs(dag_id)
            if runs and all(r["state"] in ("success", "failed") for r in runs):
                return
            time.sleep(1)
        raise TimeoutError(f"{dag_id}: runs not done {timeout}s after unpausing: {self.runs(dag_id)}")

    def parks_settled(self, dag_id: str) -> bool:
        """Whether the scheduler has taken in the exit of every task of ``dag_id`` that parked
        awaiting input (the LocalExecutor's report of the worker that parked it).

        Airflow 3.3.2 loses a human-in-the-loop answer given before that report is processed: the
        resumed task is *queued* with the same try, the stale report reads as "killed externally",
        the task is retried and its new try opens the form again (ADR 0031). On SQLite under load
        the report came up to 5 s after the park; a clinician reads the packet first. A test that
        answers at machine speed waits for this, as a person's pace would. Read from the
        scheduler's log (the workers' lines are in it): parks and reports counted per task try."""
        import re

        logs = self.home / "component_logs"
        text = "".join(p.read_text(errors="replace") for p in sorted(logs.glob("scheduler*.log")))
        parks: dict[tuple[str, str, str, str], int] = {}
        for line in text.splitlines():
            if "Pausing task as AWAITING_INPUT" in line and f"dag_id={dag_id} " in line:
                f = dict(re.findall(r"(map_index|run_id|task_id|try_number)=(\S+)", line))
                key = (f.get("run_id", ""), f.get("task_id", ""), f.get("map_index", ""), f.get("try_number", ""))
                parks[key] = parks.get(key, 0) + 1
        reports: dict[tuple[str, str, str, str], int] = {}
        for m in re.finditer(r"Received executor event with state \w+ for task instance TaskInstanceKey\("
                             rf"dag_id='{re.escape(dag_id)}', task_id='([^']*)', run_id='([^']*)', "
                             r"try_number=(\d+), map_index=(-?\d+)\)", text):
            key = (m.group(2), m.group(1), m.group(4), m.group(3))
            reports[key] = reports.get(key, 0) + 1
        return all(reports.get(k, 0) >= n for k, n in parks.items())

    def diagnose(self, dag_id: str) -> str:
        """What a failed wait needs to be understood: every run of ``dag_id`` with its task
        instances that are not done, the components restarted, and the scheduler's and
        triggerer's last lines (Airflow's own output: ids and states, no document text)."""
        lines = [f"restarts: {getattr(self, 'restarts', {})}"]
        try:
            for run in self.runs(dag_id):
                tis = self.task_instances(dag_id, run["dag_run_id"])
                waiting = [f"{t['task_id']}[{t.get('rendered_map_index') or t['map_index']}]={t['state']}"
                           f" try {t.get('try_number')}" for t in tis if t["state"] not in ("success", "skipped")]
                lines.append(f"{dag_id} {run['dag_run_id']} {run['state']}: {len(tis)} task(s), not done: {waiting}")
        except Exception as exc:  # the API itself may be what failed
            lines.append(f"the API could not be read: {exc!r}")
        for name in ("scheduler", "triggerer"):
            lines.append(f"--- {name} (last lines)\n{self.log_tail(name, 25)}")
        return "\n".join(lines)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 600, states=("success", "failed")) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            run = self.run(dag_id, run_id)
            if run["state"] in states:
                return run
            time.sleep(1)
        raise TimeoutError(f"{dag_id} {run_id} not done after {timeout}s: {self.run(dag_id, run_id)['state']}")


if __name__ == "__main__":  # a quick manual stack: python scripts/airflow_stack.py /tmp/home /tmp/root
    import tempfile

    home = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="docverify-stack-"))
    root = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else home / "store")
    stack = AirflowStack(home, root, port=int(os.environ.get("PORT", "0")) or None)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    stack.start()
    print(f"up: {stack.base_url} (admin / {stack.password}); home {home}; Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stack.stop()
