"""The nightly DAG on a distributed executor: the CeleryExecutor with a Redis broker, PostgreSQL as
the metadata database and Celery result backend, two Celery workers and a ``gs://`` store, all
on 127.0.0.1 (free ports, temporary data directories), proven on a night built from the samples.

    python scripts/celery_stack.py --documents 300      # the night, its checks and figures
    python scripts/celery_stack.py --documents 20 --no-write

Topology (every process in its own process group; stop() ends them all):

* Redis (Debian ``redis-server``): ``--port N --bind 127.0.0.1 --save "" --appendonly no`` and a
  random password — the Celery broker.
* PostgreSQL (Debian ``postgresql``: initdb / postgres from /usr/lib/postgresql/<v>/bin), run as
  the ``postgres`` system user when we are root (it refuses root), data directory and socket in a
  temporary folder that user owns, password (scram) auth on 127.0.0.1:N, ``fsync=off`` (a
  throwaway database) — Airflow's metadata database and the Celery result backend.
* scheduler, dag-processor, triggerer, api-server (scripts/airflow_stack.py) with
  ``AIRFLOW__CORE__EXECUTOR=CeleryExecutor``.
* N Celery workers (``airflow celery worker --concurrency C -H workerK``), each with its own temp
  folder as working directory, ``AIRFLOW_HOME`` (a copy of the deployment's airflow.cfg, its own
  task logs) and ``TMPDIR``. A task instance's ``hostname`` is the worker's name (``[core]
  hostname_callable`` = :func:`worker_hostname`), so the REST API shows where each ran.
* the store: a ``gs://`` root on the GCS emulator (tests/gcs_emulator.py), reached by every
  process through an Airflow connection in the environment.

The proof (:func:`night`): N documents — the sample PDFs (+ companions) repeated under distinct
names — uploaded to ``incoming/<ds>/``, a run triggered through the REST API, and checked: the
run succeeded, every document took its sample's expected route (include/samples/expected_routes.json),
task instances ran on every worker, each worker's local task logs hold exactly the task instances
the REST API says it ran, and no XCom of the run names a local path (``/tmp``, the repository,
a worker's or the Airflow home's folder). Measured: wall (the run's start → end), task instances,
CPU seconds and peak RSS of the Airflow process tree (components + workers), and of Redis +
PostgreSQL, sampled from /proc. Writes docs/benchmarks/celery.md (scripts/benchlib.publish).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import glob
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Any

REPO = pathlib.Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from scripts.airflow_stack import AirflowStack, free_port, tree_pids  # noqa: E402

DAG = "clinical_doc_verification"
SAMPLES = REPO / "include" / "samples"
WORKER_HOSTNAME_ENV = "DOCVERIFY_WORKER_HOSTNAME"


def worker_hostname() -> str:
    """``[core] hostname_callable`` of the Celery workers: the worker's name (set in its
    environment), so task instances of two workers on one machine tell them apart."""
    return os.environ.get(WORKER_HOSTNAME_ENV) or socket.getfqdn()


# ---------------------------------------------------------------------- the two services
def postgres_bindir() -> pathlib.Path | None:
    """The newest /usr/lib/postgresql/<version>/bin that has initdb and postgres."""
    found = [pathlib.Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")
             if os.access(pathlib.Path(p).parent / "postgres", os.X_OK)]
    return max(found, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0)) if found else None


def missing_binaries() -> list[str]:
    """What the topology needs from Debian and cannot find (empty: all there)."""
    missing = [] if shutil.which("redis-server") else ["redis-server (apt-get install redis-server)"]
    if postgres_bindir() is None:
        missing.append("PostgreSQL server (apt-get install postgresql: /usr/lib/postgresql/*/bin/initdb)")
    return missing


def _end_group(proc: subprocess.Popen, sig: int, timeout: float = 30) -> None:
    """``sig`` to the process group of ``proc``, wait, then SIGKILL whatever is left of the group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


class Redis:
    """One redis-server on 127.0.0.1, no persistence, a random password."""

    def __init__(self, workdir: pathlib.Path) -> None:
        self.dir = pathlib.Path(workdir)
        self.port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> Redis:
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "redis.conf"  # the password in a file of ours, not on a command line
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(f'bind 127.0.0.1\nport {self.port}\nsave ""\nappendonly no\ndir {self.dir}\n'
                     f"protected-mode yes\nrequirepass {self.password}\n")
        with (self.dir / "redis.log").open("w") as log:
            self.proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", str(conf)], stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2)
        end = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: "
                                   f"{(self.dir / 'redis.log').read_text()[-2000:]}")
            try:
                if client.ping():
                    return self
            except redis.exceptions.RedisError:
                if time.monotonic() > end:
                    raise
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is not None:
            _end_group(self.proc, signal.SIGTERM)
            self.proc = None


class Postgres:
    """One PostgreSQL cluster in a temporary directory, listening on 127.0.0.1 only, with a
    database ``airflow`` owned by the role ``airflow`` (password auth). As root it runs as the
    ``postgres`` system user (PostgreSQL refuses root), the directory owned by that user."""

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        if self.bindir is None:
            raise RuntimeError("; ".join(missing_binaries()))
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="docverify-pg-"))
        self.port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.proc: subprocess.Popen | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            pg = pwd.getpwnam("postgres")
            os.chown(self.root, pg.pw_uid, pg.pw_gid)
            self._owner = (pg.pw_uid, pg.pw_gid)
            self._as_user = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        else:
            self._owner = (os.getuid(), os.getgid())

    def url(self, scheme: str = "postgresql+psycopg2") -> str:
        return f"{scheme}://airflow:{self.password}@127.0.0.1:{self.port}/airflow"

    def _run(self, *args: str) -> None:
        env = {"PATH": f"{self.bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.root)}
        proc = subprocess.run([*self._as_user, *args], env=env, cwd=self.root, capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{pathlib.Path(args[0]).name} failed: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")

    def start(self, timeout: float = 60) -> Postgres:
        pwfile, sock = self.root / "pw", self.root / "sock"
        pwfile.write_text(self.password + "\n")
        sock.mkdir()
        for p in (pwfile, sock):
            os.chown(p, *self._owner)
        os.chmod(pwfile, 0o600)
        self._run(str(self.bindir / "initdb"), "-D", str(self.root / "data"), "-U", "airflow", "--pwfile", str(pwfile),
                  "--auth=scram-sha-256", "-E", "UTF8", "--no-locale", "--no-sync")
        pwfile.unlink()
        env = {"PATH": f"{self.bindir}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.root)}
        with (self.root / "postgres.log").open("w") as log:
            os.chown(self.root / "postgres.log", *self._owner)
            self.proc = subprocess.Popen(
                [*self._as_user, str(self.bindir / "postgres"), "-D", str(self.root / "data"), "-h", "127.0.0.1",
                 "-p", str(self.port), "-k", str(sock), "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        import psycopg2

        end = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}: "
                                   f"{(self.root / 'postgres.log').read_text()[-2000:]}")
            try:
                conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="airflow", password=self.password,
                                        dbname="postgres", connect_timeout=2)
                break
            except psycopg2.OperationalError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.3)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE airflow")
        conn.close()
        return self

    def stop(self) -> None:
        if self.proc is not None:
            _end_group(self.proc, signal.SIGINT)  # SIGINT = fast shutdown (SIGTERM waits for clients)
            self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------- the stack
class CeleryStack(AirflowStack):
    """:class:`AirflowStack` with the CeleryExecutor: Redis, PostgreSQL and ``workers`` Celery
    workers around the same four components. ``pids()`` is the Airflow process tree (components +
    workers); ``service_pids()`` Redis and PostgreSQL."""

    def __init__(self, home: pathlib.Path, storage_root: str | pathlib.Path, *, workers: int = 2,
                 concurrency: int = 2, env: dict[str, str] | None = None, variables: dict[str, str] | None = None,
                 parallelism: int = 8) -> None:
        self.redis = Redis(pathlib.Path(home) / "redis")
        self.postgres = Postgres()
        self.n_workers, self.concurrency = workers, concurrency
        self.worker_dirs: dict[str, pathlib.Path] = {}
        env = {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url(),
               "AIRFLOW__CELERY__BROKER_URL": self.redis.url,
               "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self.postgres.url("postgresql"),
               "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
               **(env or {})}
        super().__init__(home, storage_root, env=env, variables=variables, parallelism=parallelism,
                         executor="CeleryExecutor")

    @property
    def worker_names(self) -> list[str]:
        return [f"worker{k}" for k in range(1, self.n_workers + 1)]

    def start(self, timeout: float = 240) -> CeleryStack:
        try:
            self.redis.start()
            self.postgres.start()
            super().start(timeout)  # db migrate on PostgreSQL, settings, the four components, ready
            for name in self.worker_names:
                self.start_worker(name)
            self.wait_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, name: str) -> None:
        """One Celery worker in a temp folder of its own: working directory, AIRFLOW_HOME (the
        deployment's airflow.cfg; task logs) and TMPDIR — nothing on disk shared with the others."""
        wdir = pathlib.Path(tempfile.mkdtemp(prefix=f"docverify-{name}-"))
        (wdir / "tmp").mkdir()
        shutil.copy2(self.home / "airflow.cfg", wdir / "airflow.cfg")
        self.worker_dirs[name] = wdir
        env = {**self.env, "AIRFLOW_HOME": str(wdir), "TMPDIR": str(wdir / "tmp"), WORKER_HOSTNAME_ENV: name,
               "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"scripts.celery_stack.{worker_hostname.__name__}"}
        airflow = str(pathlib.Path(sys.executable).parent / "airflow")
        # --skip-serve-logs: a log server per worker would need a port and a resolvable hostname each;
        # the task logs stay in the worker's folder (production: remote logging to the store)
        self.spawn(f"celery-{name}", [airflow, "celery", "worker", "--concurrency", str(self.concurrency),
                                      "-H", name, "--skip-serve-logs", "--pid", str(wdir / "worker.pid")],
                   env=env, cwd=wdir)

    def wait_workers(self, timeout: float) -> None:
        """Until every worker answers a Celery ping through the broker."""
        from celery import Celery

        app = Celery(broker=self.redis.url)
        want = {f"celery@{n}" for n in self.worker_names}
        end, seen = time.monotonic() + timeout, set()
        try:
            while time.monotonic() < end:
                for name, proc in self.procs.items():
                    if proc.poll() is not None:
                        raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
                seen = {k for reply in app.control.ping(timeout=1.0) for k in reply}
                if want <= seen:
                    return
                time.sleep(1)
        finally:
            app.close()
        raise TimeoutError(f"Celery workers not ready after {timeout}s: {sorted(seen)} of {sorted(want)}")

    def service_pids(self) -> list[int]:
        return tree_pids((self.redis.proc, self.postgres.proc))

    def stop(self) -> None:
        try:
            super().stop()  # components and workers (a worker's warm shutdown waits for its tasks)
        finally:
            self.redis.stop()
            self.postgres.stop()
            for wdir in self.worker_dirs.values():
                shutil.rmtree(wdir, ignore_errors=True)
            self.worker_dirs.clear()


# ---------------------------------------------------------------------- the night
def upload_night(emulator: Any, prefix: str, ds: str, n: int) -> list[str]:
    """``n`` documents (the samples repeated under distinct names, companions with their PDF,
    named as scripts/bench_scheduler.fill names them) uploaded to ``<prefix>/incoming/<ds>/``.
    Returns their stems (the file names without .pdf)."""
    from scripts.bench_scheduler import fill

    with tempfile.TemporaryDirectory(prefix="docverify-night-") as tmp:
        fill(pathlib.Path(tmp), ds, n)
        files = sorted((pathlib.Path(tmp) / "incoming" / ds).iterdir())
        for f in files:
            status = emulator._upload(f"{prefix}/incoming/{ds}/{f.name}", f.read_bytes())
            if status != 200:
                raise RuntimeError(f"upload of {f.name} answered {status}")
    return [f.stem for f in files if f.suffix == ".pdf"]


def download(emulator: Any, uri: str) -> bytes:
    bucket, _, name = uri.removeprefix("gs://").partition("/")
    url = f"{emulator.host}/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.read()


def expected_routes() -> dict[str, str]:
    return json.loads((SAMPLES / "expected_routes.json").read_text())["routes"]


def routes_of(report: dict) -> dict[str, str]:
    """doc id → route as expected_routes.json writes it (a retried document: ``AUTO_RETRY→<final>``)."""
    return {d["doc_id"]: ("AUTO_RETRY→" + d["final_decision"]) if d.get("route") == "auto_fix_retry"
            else d["final_decision"] for d in report["per_document"]}


def local_paths_in(value: Any, needles: list[str]) -> list[str]:
    """The needles (local folders) that occur in an XCom value."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return [n for n in needles if n and n in text]


def worker_log_entries(wdir: pathlib.Path, run_id: str) -> set[tuple[str, int]]:
    """(task_id, map_index) of the task logs a worker wrote for ``run_id`` in its own AIRFLOW_HOME."""
    out = set()
    for path in (wdir / "logs").rglob("*.log"):
        parts = dict(p.split("=", 1) for p in path.relative_to(wdir / "logs").parts[:-1] if "=" in p)
        if parts.get("run_id") == run_id and "task_id" in parts:
            out.add((parts["task_id"], int(parts.get("map_index", -1))))
    return out


def store_cpu_seconds(emulator: Any) -> float:
    """CPU seconds of the GCS emulator's server thread (it serves one request at a time, in this
    process): how busy the store was."""
    import psutil

    tid = emulator._server._api.native_id
    return next((t.user_time + t.system_time for t in psutil.Process().threads() if t.id == tid), 0.0)


def measured_night(stack: AirflowStack, emulator: Any, ds: str) -> dict:
    """The night of ``ds`` triggered and measured (scripts/bench_scheduler.under_scheduler), plus
    the store's CPU and the routes of the batch report."""
    from scripts.bench_scheduler import under_scheduler

    store_before = store_cpu_seconds(emulator)
    measured = under_scheduler(stack, ds)
    report = json.loads(download(emulator, f"{stack.storage_root}/reports/{ds}/batch_report.json"))
    return {**measured, "store_cpu_s": store_cpu_seconds(emulator) - store_before, "got_routes": routes_of(report)}


def route_summary(stems: list[str], got: dict[str, str]) -> dict:
    """The night's routes against the samples' (``stems``: the uploaded PDFs' names without .pdf;
    ``got``: routes by doc id, the opaque id of each name, ADR 0050)."""
    from docverify.storage.paths import doc_id_for

    expected = expected_routes()
    want = {doc_id_for(f"{d}.pdf"): expected[d.split("__")[0]] for d in stems}
    doc_ids = list(want)
    return {"documents": len(doc_ids), "reported": len(got),
            "route_mismatches": {d: (want.get(d), got.get(d)) for d in sorted(set(want) | set(got))
                                 if want.get(d) != got.get(d)},
            "routes": {r: sum(v == r for v in got.values()) for r in sorted(set(got.values()))}}


def local_night(emulator: Any, prefix: str, ds: str, n: int, home: pathlib.Path) -> dict:
    """The same night under the LocalExecutor (AirflowStack as the browser test runs it: SQLite,
    one machine) on the same gs:// store, for comparison."""
    stems = upload_night(emulator, prefix, ds, n)
    stack = AirflowStack(home, emulator.root_uri(prefix),
                         env={**emulator.env, "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline"},
                         variables={"docverify_storage_conn_id": emulator.conn_id})
    stack.start()
    try:
        stack.settle(DAG)
        result = measured_night(stack, emulator, ds)
    finally:
        stack.stop()
    return {**result, **route_summary(stems, result.pop("got_routes"))}


def night(stack: CeleryStack, emulator: Any, prefix: str, ds: str, n: int) -> dict:
    """Run an ``n``-document night for ``ds`` on the stack, measure it and collect what the
    checks need (see the module's docstring)."""
    import psutil
    from scripts.bench_scheduler import PeakRSS, cpu_seconds

    stems = upload_night(emulator, prefix, ds, n)
    services_before = cpu_seconds(stack.service_pids())
    services_rss = PeakRSS(stack.service_pids)
    services_rss.start()
    measured = measured_night(stack, emulator, ds)
    services_rss.stop.set()
    services_rss.join()
    run_id = measured["run_id"]
    tis = stack.task_instances(DAG, run_id)
    got = measured.pop("got_routes")
    ran = [ti for ti in tis if ti.get("hostname")]
    by_worker = {name: {(ti["task_id"], ti["map_index"]) for ti in ran if ti["hostname"] == name}
                 for name in stack.worker_names}
    logs = {name: worker_log_entries(stack.worker_dirs[name], run_id) for name in stack.worker_names}
    needles = sorted({"/tmp/", tempfile.gettempdir(), str(REPO), str(stack.home),
                      *map(str, stack.worker_dirs.values())})
    leaks, store_refs = [], 0
    xcoms = stack.xcoms(DAG, run_id)
    for x in xcoms:
        if found := local_paths_in(x.get("value"), needles):
            leaks.append(f"{x['task_id']}[{x['map_index']}] {x['key']}: {found}")
        store_refs += bool(local_paths_in(x.get("value"), [str(stack.storage_root)]))
    cwds = {}
    for name in stack.worker_names:
        with contextlib.suppress(psutil.Error):
            cwds[name] = psutil.Process(stack.procs[f"celery-{name}"].pid).cwd()
    return {**measured, **route_summary(stems, got),
            "hostnames": sorted({ti["hostname"] for ti in ran}),
            "per_worker": {name: len(v) for name, v in by_worker.items()},
            "ran_elsewhere": sorted({ti["hostname"] for ti in ran} - set(stack.worker_names)),
            "log_mismatch": {name: sorted(map(str, by_worker[name] ^ logs[name]))[:10] for name in stack.worker_names
                             if by_worker[name] != logs[name]},
            "worker_cwds": cwds, "xcoms": len(xcoms), "xcom_local_paths": leaks,
            "xcom_store_refs": store_refs,
            "services_cpu_s": cpu_seconds(stack.service_pids()) - services_before,
            "services_peak_rss_mb": services_rss.peak / 2**20}


def checks(result: dict, workers: list[str]) -> list[str]:
    """The failed checks of a night (empty: proven)."""
    failed = []
    if result["state"] != "success":
        failed.append(f"run state {result['state']}")
    if result["reported"] != result["documents"]:
        failed.append(f"{result['reported']} documents in the report, {result['documents']} uploaded")
    if result["route_mismatches"]:
        failed.append(f"routes differ from the samples' expected routes: {list(result['route_mismatches'].items())[:10]}")
    if sorted(result["hostnames"]) != sorted(workers):
        failed.append(f"task instances ran on {result['hostnames']}, not on each of {workers}")
    if result["log_mismatch"]:
        failed.append(f"worker task logs differ from the task instances the API places on them: {result['log_mismatch']}")
    if len(set(result["worker_cwds"].values())) != len(workers):
        failed.append(f"workers share a working directory: {result['worker_cwds']}")
    if result["xcom_local_paths"]:
        failed.append(f"XComs name local paths: {result['xcom_local_paths'][:10]}")
    return failed


def _row(how: str, r: dict) -> str:
    per_worker = ", ".join(f"{k} {v}" for k, v in r["per_worker"].items()) if "per_worker" in r else "–"
    services = (f"{r['services_cpu_s']:.1f} | {r['services_peak_rss_mb']:.0f}" if "services_cpu_s" in r
                else "– | –")
    return (f"| {r['documents']} | {how} | {r['state']} | {r['wall_s']:.1f} | {r['trigger_to_done_s']:.1f} | "
            f"{r['wall_s'] / max(1, r['documents']):.2f} | {r['task_instances']} | {per_worker} | {r['cpu_s']:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {services} | {r['store_cpu_s']:.0f} | {', '.join(r['slowest'])} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=2, help="task slots per Celery worker")
    ap.add_argument("--ds", default="2026-11-02", help="the night's date (incoming/<ds>/)")
    ap.add_argument("--compare-local", action="store_true",
                    help="then the same night under the LocalExecutor on the same gs:// store")
    ap.add_argument("--no-write", action="store_true", help="print only (docs/benchmarks/celery.md untouched)")
    args = ap.parse_args()
    if missing := missing_binaries():
        print("missing: " + "; ".join(missing) + " — `make celery-deps` installs them", file=sys.stderr)
        return 2
    from tests.gcs_emulator import GcsEmulator

    emulator = GcsEmulator().start()
    os.environ.update(emulator.env)
    prefix = f"celery-{secrets.token_hex(4)}"
    home = pathlib.Path(tempfile.mkdtemp(prefix="docverify-celery-"))
    env = {**emulator.env, "AIRFLOW_VAR_DOCVERIFY_JUDGE": "offline"}
    stack = CeleryStack(home / "airflow", emulator.root_uri(prefix), workers=args.workers,
                        concurrency=args.concurrency, env=env,
                        variables={"docverify_storage_conn_id": emulator.conn_id})
    local = None
    t0 = time.monotonic()
    try:
        stack.start()
        up_s = time.monotonic() - t0
        stack.settle(DAG)
        result = night(stack, emulator, prefix, args.ds, args.documents)
        stack.stop()
        if args.compare_local:
            # every write of the emulator re-serialises all its metadata, soft-deleted objects included:
            # wipe it so the second night meets the store as the first did
            emulator.wipe()
            local = local_night(emulator, prefix + "-local", args.ds, args.documents, home / "local")
            print(json.dumps({k: v for k, v in local.items() if k != "route_mismatches"}, indent=1, default=str))
    finally:
        stack.stop()
        emulator.stop()
        shutil.rmtree(home, ignore_errors=True)
    failed = checks(result, stack.worker_names)
    if local is not None and (local["state"] != "success" or local["route_mismatches"]):
        failed.append(f"the LocalExecutor night: {local['state']}, {len(local['route_mismatches'])} routes off")
    print(json.dumps({k: v for k, v in result.items() if k != "route_mismatches"}, indent=1, default=str))
    from scripts.benchlib import publish

    routes = ", ".join(f"{r} {c}" for r, c in result["routes"].items())
    command = f"python scripts/celery_stack.py --documents {args.documents}" + (
        " --compare-local" if args.compare_local else "")
    lines = [
        "# A night on the CeleryExecutor (two workers, Redis, PostgreSQL, gs:// store)", "",
        f"Measured by `{command}` on {os.cpu_count()} cores shared with other jobs, "
        f"{dt.date.today().isoformat()}: Redis (broker) and PostgreSQL (metadata DB and Celery result backend, "
        "fsync off) on 127.0.0.1, scheduler, dag-processor, triggerer and api-server (scripts/airflow_stack.py, "
        f"parallelism {stack.parallelism}), {args.workers} Celery workers × {args.concurrency} slots, each in its "
        "own temp folder; the store a gs:// root on the GCS emulator (tests/gcs_emulator.py: one request at a "
        "time, in the script's process); the embedded default (local parser, offline judgments); fresh store "
        "(nothing cached; the emulator rewrites all its metadata on every write and scans the bucket on every "
        "listing, so its cost per request grows with the night). Wall: the run's start_date → end_date (REST API). CPU and peak RSS: sampled from "
        "/proc for the Airflow process tree (components, workers, task processes) and for Redis + PostgreSQL; "
        "store CPU: the emulator's server thread. "
        f"Stack start-up (migrate on PostgreSQL included): {up_s:.0f} s."
        + (" LocalExecutor row: the same night on a fresh prefix of the same emulator, the four components of "
           "scripts/airflow_stack.py with SQLite, as the browser test runs them (the emulator wiped first)."
           if local else ""), "",
        "| documents | executor | state | run wall (s) | trigger → done (s) | s / document | task instances | "
        "on each worker | CPU Airflow (s) | peak RSS Airflow (MB) | CPU Redis+PostgreSQL (s) | "
        "peak RSS Redis+PostgreSQL (MB) | CPU store (s) | slowest tasks |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        _row(f"Celery, {args.workers} workers", result),
        *([_row("Local", local)] if local else []), "",
        f"Routes: {routes}; {len(result['route_mismatches'])} documents off their sample's expected route"
        + (f" ({len(local['route_mismatches'])} under the LocalExecutor)" if local else "") + ". "
        f"{result['xcoms']} XComs read through the REST API: {len(result['xcom_local_paths'])} name a local "
        f"path, {result['xcom_store_refs']} the gs:// store. Each worker's own task logs match the task instances "
        f"the API places on it: {'yes' if not result['log_mismatch'] else 'NO'}.",
        "", "Checks: " + ("all passed" if not failed else "FAILED: " + "; ".join(failed)),
    ]
    publish(lines, "celery.md", write=not args.no_write and not failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
