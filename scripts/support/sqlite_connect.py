"""The test stack's SQLite metadata database: how long a connection waits for another's write lock.

Python's sqlite3 gives up after 5 s with ``database is locked``. On two busy cores the scheduler, the DAG
processor, the triggerer, the API server and the LocalExecutor's workers all write the one file, and a 5 s
wait ran out in a fresh-clone ``make test``: the scheduler, the triggerer and the DAG processor exited at once
(the stack restarted them) and an SME's answer given in that minute was lost with its task's try. A deployment
runs PostgreSQL (``scripts/celery_stack.py``); only :class:`scripts.airflow_stack.AirflowStack` on SQLite reads
this, through ``[database] sql_alchemy_connect_args``.
"""

#: ``sqlite3.connect`` keyword arguments: wait up to this many seconds for a lock
CONNECT_ARGS = {"timeout": 60}
