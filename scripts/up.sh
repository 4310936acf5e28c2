#!/usr/bin/env bash
# `make up`: airflow standalone with safe defaults.
#  * loopback only: the API server / UI listens on 127.0.0.1 (AIRFLOW__API__HOST; set
#    DOCVERIFY_UP_HOST=0.0.0.0 yourself to expose it, e.g. behind an authenticating proxy);
#  * files it creates are private (umask 077): the generated password file is readable by its
#    owner only (an existing one is chmod-ed to 600);
#  * a clean stop: standalone runs in its own process group (setsid); on SIGINT/SIGTERM/exit the
#    whole group gets SIGTERM, then SIGKILL after a grace period — no scheduler, dag-processor,
#    triggerer, api-server or task process is left behind.
set -euo pipefail
: "${AIRFLOW_HOME:?run through make up}"
export AIRFLOW__API__HOST="${DOCVERIFY_UP_HOST:-127.0.0.1}"
umask 077
PASSWORDS="$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated"
[ -e "$PASSWORDS" ] && chmod 600 "$PASSWORDS"
GRACE_S="${DOCVERIFY_UP_GRACE_S:-20}"

setsid airflow standalone "$@" &
PGID=$!  # setsid: the child is the leader of a new process group whose id is its pid
stopping=0
WATCH=""
stop() {
  [ "$stopping" = 1 ] && return
  stopping=1
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
