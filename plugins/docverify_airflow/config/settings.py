"""The typed settings (issue 41 item 2, ADR 0055): every declared switch
(:mod:`docverify_airflow.config.switches`) read from its Airflow Variable into one frozen
:class:`Settings` per task, and the values derived from them (the storage root, the connections).

**Read once per task.** :func:`settings` builds a :class:`Settings` from every Variable the code reads
(one read each, :func:`~docverify_airflow.config.variables.read_variable`) and keeps it in the context
of the task instance that asked; the task's other calls reuse it. Outside a task (the api-server's
review and packet pages) a call reuses the settings read in the last :data:`RECENT_S` (5) seconds, else
reads afresh: a page view reads each Variable at most once, and a changed Variable takes effect within
seconds. Nothing else reads them: the factories (:mod:`docverify_airflow.config.factories`) are handed
the settings.

A refused value fails the task with a ``ValueError`` naming the Variable, the value (never a secret's)
and what it accepts (:func:`~docverify_airflow.config.switches.refusal`).

**The storage root** is resolved here and only here (:meth:`Settings.root`): ``gs://…`` → an
``ObjectStoragePath`` on the connection ``docverify_storage_conn_id``; ``file://…`` or a plain path
→ an absolute :class:`pathlib.Path`, a relative one taken relative to the repository
(:data:`ROOT_BASE`, whatever the working directory of the process). The core receives that object,
never a string to resolve again."""

from __future__ import annotations

import functools
import pathlib
import threading
import time
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING

from pydantic import ValidationError

from docverify_airflow.config import variables
from docverify_airflow.config.switches import (
    DEFAULT_LLM_CONN,
    DEFAULT_STORAGE_ROOT,
    Switches,
    _extra,
    refusal,
)

if TYPE_CHECKING:
    from docverify.storage.store import ArtifactStore, StoragePath
    from docverify_airflow.night import TaskContext

REPO = pathlib.Path(__file__).resolve().parents[3]
ROOT_BASE = REPO  # the one base of a relative storage root (airflow_settings.yaml says so)


class Settings(Switches):
    """Every declared switch, parsed (one field each; ``variable(field)`` is its Variable and
    ``variables()`` the documented defaults used when it is missing). Read from Airflow in one place,
    :meth:`load`; a bad value fails naming the Variable. ``scripts/gen_config_docs.py`` renders
    docs/configuration.md from the declarations."""

    @classmethod
    def parse(cls, values: Mapping[str, str]) -> Settings:
        """Settings from raw Variable values (a missing or empty one takes its default); a value its
        type refuses raises ``ValueError`` naming the Variable, the value and what it accepts (every
        refused Variable, one per line)."""
        fields = {_extra(f)["variable"]: f for f in cls.model_fields.values()}
        raw = {var: values[var] for var in fields if var in values}
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            refused = dict.fromkeys(str(e["loc"][0]) for e in exc.errors() if e["loc"])
            raise ValueError("\n".join(
                refusal(var, raw.get(var, _extra(fields[var])["variable_default"]), fields[var])
                for var in refused if var in fields) or str(exc)) from None

    @classmethod
    def load(cls) -> Settings:
        """Read every Variable once (:func:`~docverify_airflow.config.variables.read_variable`) and parse them."""
        return cls.parse({name: variables.read_variable(name, default) for name, default in cls.variables().items()})

    # --- derived values ---

    @functools.cached_property
    def root(self) -> StoragePath:
        """The artifact store root, resolved once: ``gs://`` → ObjectStoragePath on
        ``storage_conn_id``; ``file://`` or a plain path → an absolute pathlib.Path (relative to
        :data:`ROOT_BASE`)."""
        return resolve_root(self.storage_root, self.storage_conn_id)

    @property
    def llm_conn(self) -> str:
        return self.llm_conn_id or DEFAULT_LLM_CONN

    @property
    def judge_conn(self) -> str:
        """The judgments' connection (ADR 0034): ``docverify_judge_conn_id``, else the classifier's."""
        return self.judge_conn_id or self.llm_conn

    def processor(self) -> dict[str, str | None]:
        """The Layout Parser processor of Variable ``docverify_docai_processor`` as its parts
        (``project``, ``location``, ``processor_id``, ``processor_version``), parsed by the
        client library's path helpers (through the Document AI package's hook); a malformed name
        fails naming the Variable."""
        from docverify_documentai.hooks.document_ai import parse_processor_name

        try:
            return parse_processor_name(self.docai_processor)
        except ValueError:
            raise ValueError(
                f"Variable {self.variable('docai_processor')}={self.docai_processor!r} is not a processor resource name: set it "
                f"to projects/<project>/locations/<us|eu>/processors/<processor id> (the Layout Parser processor's "
                f"'Prediction endpoint' in the console, without the ':process' suffix)") from None

    def processor_name(self) -> str:
        """``docverify_docai_processor``, checked (see :meth:`processor`)."""
        self.processor()
        return self.docai_processor

    def jury_conns(self) -> list[str]:
        conns = [c.strip() for c in self.jury_conn_ids.split(",")] if self.jury_conn_ids else [self.judge_conn] * 3
        if len(conns) != 3 or not all(conns):
            raise ValueError(f"Variable {self.variable('jury_conn_ids')}={self.jury_conn_ids!r}: give three connection ids (jurors "
                             f"A, B, C) separated by commas, or leave it empty for {self.variable('judge_conn_id')} (else "
                             f"{self.variable('llm_conn_id')})")
        return conns


def resolve_root(raw: str, conn_id: str = "google_cloud_default") -> StoragePath:
    """The one place a storage root string becomes a path object (see the module docstring)."""
    raw = raw.strip() or DEFAULT_STORAGE_ROOT
    if raw.startswith("file://"):
        raw = raw[len("file://"):]
    if "://" not in raw:
        path = pathlib.Path(raw)
        return path if path.is_absolute() else ROOT_BASE / path
    from airflow.sdk import ObjectStoragePath

    return ObjectStoragePath(raw, conn_id=conn_id)


#: the key under which a task's context carries the settings read for it
CONTEXT_KEY = "docverify_settings"


#: outside a task (the api-server's pages), :func:`settings` keeps what it read this many seconds: a
#: page view reads each Variable at most once, and a changed Variable takes effect within seconds
RECENT_S = 5.0


class _Recent:
    """The settings last read outside a task and when (``clock``, monotonic), for :data:`RECENT_S`
    seconds; one reader at a time (the api-server serves pages from threads), a failed read keeps
    nothing."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clock = time.monotonic
        self.kept: tuple[float, Settings] | None = None

    def get(self) -> Settings:
        with self.lock:
            now = self.clock()
            if self.kept is None or not 0 <= now - self.kept[0] < RECENT_S:
                self.kept = (now, Settings.load())
            return self.kept[1]

    def forget(self) -> None:
        with self.lock:
            self.kept = None


_recent = _Recent()


def settings(context: TaskContext | None = None) -> Settings:
    """The settings of the running task: read once per task (kept in its context under
    :data:`CONTEXT_KEY`, so every step of the task that is handed the same context sees the same
    values, and nothing outlives the task). Without a context (the api-server's pages), the
    settings read in the last :data:`RECENT_S` seconds, else read afresh."""
    if isinstance(context, MutableMapping):
        kept = context.get(CONTEXT_KEY)
        if isinstance(kept, Settings):
            return kept
        s = Settings.load()
        context[CONTEXT_KEY] = s
        return s
    return _recent.get()


def forget_settings() -> None:
    """Drop the settings kept outside a task (the next call reads every Variable again)."""
    _recent.forget()


def artifact_store(context: TaskContext | None = None) -> ArtifactStore:
    """The artifact store on the settings' root: the one the tasks and the plugin's pages read."""
    from docverify.storage.store import ArtifactStore

    return ArtifactStore(settings(context).root)


def storage_root(s: Settings) -> StoragePath:
    """The artifact store root of the settings (see :meth:`Settings.root`)."""
    return s.root


def is_remote(root: StoragePath | str) -> bool:
    return str(root).startswith("gs://")
