#!/usr/bin/env bash
# `make up`: the Airflow components `airflow standalone` runs (scheduler, dag-processor,
# triggerer, api-server), started one by one with safe defaults.
#  * loopback only: the API server / UI listens on 127.0.0.1 (AIRFLOW__API__HOST; set
#    DOCVERIFY_UP_HOST=0.0.0.0 yourself to expose it, e.g. behind an authenticating proxy); the
#    scheduler and triggerer start no log server (standalone's listen on every interface, ports
#    8793/8794): on one machine the api-server reads the task logs from AIRFLOW_HOME/logs;
#  * `make run` refuses to start while this runs (it would share the metadata database, and the
#    scheduler here would take over its tasks): $AIRFLOW_HOME/up.pid names this script's process;
#  * files it creates are private (umask 077): the generated password file is readable by its
#    owner only (an existing one is chmod-ed to 600);
#  * a clean stop: standalone runs in its own process group (setsid); on SIGINT/SIGTERM/exit the
#    whole group gets SIGTERM, then SIGKILL after a grace period — no scheduler, dag-processor,
#    triggerer, api-server or task process is left behind;
#  * a component that fails (exits non-zero) is started again after DOCVERIFY_UP_RESTART_S seconds
#    (default 5), as a deployment's supervisor would (systemd's Restart=on-failure, Kubernetes):
#    Airflow's scheduler exits on an error in its loop (on SQLite, a backfill whose creation hit a
#    locked database deletes runs the scheduler had loaded), and nothing would be scheduled until
#    someone noticed. It gives up on a component that fails DOCVERIFY_UP_MAX_QUICK_EXITS times in a
#    row (default 5), each within a minute of its start.
set -euo pipefail
: "${AIRFLOW_HOME:?run through make up}"
export AIRFLOW__API__HOST="${DOCVERIFY_UP_HOST:-127.0.0.1}"
# more users of the simple auth manager, kept outside the generated airflow.cfg (which `make clean`
# removes): DOCVERIFY_USERS="sme.anna:user,viewer.bob:viewer" (roles viewer, user, op, admin; an SME
# who answers reviews needs user or above, ADR 0036); admin is always there. Their passwords are
# generated into the password file on first start.
if [ -n "${DOCVERIFY_USERS:-}" ] && [ -z "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-}" ]; then
  IFS=',' read -ra _entries <<< "$DOCVERIFY_USERS"
  for _e in "${_entries[@]}"; do
    _e="${_e// /}"
    if ! [[ "$_e" =~ ^[A-Za-z0-9._-]+:(viewer|user|op|admin)$ ]]; then
      echo "make up: DOCVERIFY_USERS entry '$_e' is not name:role (role viewer, user, op or admin), e.g. DOCVERIFY_USERS=sme.anna:user,viewer.bob:viewer" >&2
      exit 2
    fi
  done
  export AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS="admin:admin,${DOCVERIFY_USERS// /}"
fi
umask 077
PASSWORDS="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
[ -e "$PASSWORDS" ] && chmod 600 "$PASSWORDS"
GRACE_S="${DOCVERIFY_UP_GRACE_S:-20}"

PORT="${DOCVERIFY_UP_PORT:-8080}"
export DOCVERIFY_UP_RESTART_S="${DOCVERIFY_UP_RESTART_S:-5}" DOCVERIFY_UP_MAX_QUICK_EXITS="${DOCVERIFY_UP_MAX_QUICK_EXITS:-5}"
setsid bash -c '
  supervise() {  # airflow <component> [args]: again when it fails, until it keeps failing at once
    local quick=0 started
    while :; do
      started=$SECONDS
      airflow "$@"
      local rc=$?
      (( rc == 0 )) && return 0  # it was asked to stop: as systemd'"'"'s Restart=on-failure
      if (( SECONDS - started < 60 )); then quick=$((quick + 1)); else quick=1; fi
      if (( quick >= DOCVERIFY_UP_MAX_QUICK_EXITS )); then
        echo "make up: airflow $1 failed $quick times in a row, each within a minute of its start (last exit code $rc); not starting it again (its error is in the lines above)" >&2
        return "$rc"
      fi
      echo "make up: airflow $1 exited with $rc; starting it again in ${DOCVERIFY_UP_RESTART_S} s" >&2
      sleep "$DOCVERIFY_UP_RESTART_S"
    done
  }
  supervise scheduler --skip-serve-logs & supervise dag-processor & supervise triggerer --skip-serve-logs &
  supervise api-server --host "$1" --port "$2" & wait' up "$AIRFLOW__API__HOST" "$PORT" &
PGID=$!  # setsid: the child is the leader of a new process group whose id is its pid
echo $$ > "$AIRFLOW_HOME/up.pid"
echo "make up: the Airflow UI at http://$AIRFLOW__API__HOST:$PORT/ (login: $PASSWORDS); Ctrl+C stops everything"
stopping=0
WATCH=""
stop() {
  [ "$stopping" = 1 ] && return
  stopping=1
  rm -f "$AIRFLOW_HOME/up.pid"
  [ -n "$WATCH" ] && kill "$WATCH" 2>/dev/null || true
  kill -TERM -- "-$PGID" 2>/dev/null || true
  for _ in $(seq "$GRACE_S"); do
    kill -0 -- "-$PGID" 2>/dev/null || break
    sleep 1
  done
  kill -KILL -- "-$PGID" 2>/dev/null || true
  wait "$PGID" 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT
# the password file is created once standalone initialises: keep it private whatever the umask did
( for _ in $(seq 120); do [ -e "$PASSWORDS" ] && { chmod 600 "$PASSWORDS"; break; }; sleep 1; done ) &
WATCH=$!
wait "$PGID"
