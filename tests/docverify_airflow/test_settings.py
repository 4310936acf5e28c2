"""config.Settings: every Variable read once per task into one frozen object; a missing Variable
takes its documented default, one that cannot be read fails naming it — including the Task SDK's
own path, where the Execution-API secrets backend turns an API-server failure into "no value"; the
storage root is resolved in one place, against the repository."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from tests.dags import airflow_env  # noqa: F401  (sets AIRFLOW_HOME before any Airflow import)


class FakeComms:
    """The task runner's channel to its supervisor: every GetVariable gets ``answer(key)``."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def send(self, msg):
        self.asked.append(getattr(msg, "key", None))
        return self.answer(msg.key)


@pytest.fixture
def in_task(monkeypatch):
    """Run as inside a task: SUPERVISOR_COMMS set, no Variable in the environment."""
    from airflow.sdk.execution_time import task_runner

    from docverify_airflow import config

    for name in config.Settings.variables():
        monkeypatch.delenv(f"AIRFLOW_VAR_{name.upper()}", raising=False)

    def install(answer):
        comms = FakeComms(answer)
        monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", comms, raising=False)
        return comms

    return install


def _api_down(key):
    from airflow.sdk.exceptions import ErrorType
    from airflow.sdk.execution_time.comms import ErrorResponse

    return ErrorResponse(error=ErrorType.API_SERVER_ERROR, detail={"status_code": None, "message": "connect error"})


def _not_found(key):
    from airflow.sdk.exceptions import ErrorType
    from airflow.sdk.execution_time.comms import ErrorResponse

    return ErrorResponse(error=ErrorType.VARIABLE_NOT_FOUND, detail={"key": key})


def test_the_sdk_alone_would_run_on_the_default_when_the_api_server_is_down(in_task):
    """Why config does not trust Variable.get(key, default=…): in Airflow 3.3 it returns the
    default when the Execution API failed (the secrets backend swallows the error)."""
    from airflow.sdk import Variable

    in_task(_api_down)
    assert Variable.get("docverify_storage_root", default="data") == "data"


def test_an_unreachable_api_server_fails_naming_the_variable(in_task):
    from docverify_airflow import config

    comms = in_task(_api_down)
    with pytest.raises(config.ConfigUnavailable,
                       match=r"Variable docverify_storage_root could not be read \(the API server answered "
                             r"API_SERVER_ERROR\).*check the Airflow metadata database"):
        config.Settings.load()
    assert comms.asked == ["docverify_storage_root", "docverify_storage_root"]  # the backend's ask + the check


def test_a_variable_missing_in_the_api_takes_its_default(in_task):
    from docverify_airflow import config

    in_task(_not_found)
    s = config.Settings.load()
    assert (s.storage_root, s.layout, s.judge, s.ocr, s.llm_max_attempts, s.docai_poll_s) == (
        "data", "local", "offline", True, 4, 30.0)
    assert s.root == config.REPO / "data"


def test_a_value_from_the_api_is_used(in_task):
    from airflow.sdk.execution_time.comms import VariableResult

    from docverify_airflow import config

    values = {"docverify_judge": "offline", "docverify_llm_max_attempts": "7", "docverify_layout": "document_ai"}
    in_task(lambda key: VariableResult(key=key, value=values[key]) if key in values else _not_found(key))
    s = config.Settings.load()
    assert (s.llm_max_attempts, s.layout) == (7, "document_ai")


def test_any_error_of_the_sdk_call_fails_naming_the_variable(monkeypatch):
    from airflow.sdk import Variable

    from docverify_airflow import config

    def broken(key, default=None):
        raise ConnectionError("api server unreachable")

    monkeypatch.setattr(Variable, "get", staticmethod(broken))
    with pytest.raises(config.ConfigUnavailable, match="Variable docverify_storage_root could not be read "
                                                        r"\(ConnectionError\)"):
        config.settings()


def test_read_once_per_task_kept_in_its_context_not_in_a_global(monkeypatch, tmp_path):
    from docverify_airflow import config

    calls = []
    real = config.read_variable
    monkeypatch.setattr(config.variables, "read_variable", lambda k, d: calls.append(k) or real(k, d))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path))
    ti = type("TI", (), {"id": "0191-a", "try_number": 1})()
    context = {"ti": ti}
    first = config.settings(context)
    assert config.settings(context) is first and context[config.CONTEXT_KEY] is first
    assert len(calls) == len(config.Settings.model_fields)  # each Variable read once
    assert config.settings({"ti": ti}) is not first  # another task's context reads again: no module memo
    assert config.settings({"ti": ti}) is not config.settings()  # a task never takes the pages' recent read
    assert not [n for n, v in vars(config).items() if isinstance(v, config.Settings)]  # no settings global


def test_outside_a_task_a_page_view_reads_each_variable_once_and_a_change_shows_within_seconds(monkeypatch,
                                                                                                  tmp_path):
    """The api-server's pages call config.artifact_store() without a context, several times a view:
    within RECENT_S seconds the settings read first are reused; after it, every Variable is read again."""
    from docverify_airflow import config

    now = [1000.0]
    monkeypatch.setattr(config._recent, "clock", lambda: now[0])
    calls = []
    real = config.read_variable
    monkeypatch.setattr(config.variables, "read_variable", lambda k, d: calls.append(k) or real(k, d))
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path / "a"))
    first = config.artifact_store()
    now[0] += config.RECENT_S - 0.1
    monkeypatch.setenv("AIRFLOW_VAR_DOCVERIFY_STORAGE_ROOT", str(tmp_path / "b"))
    second = config.artifact_store()
    assert sorted(calls) == sorted(config.Settings.variables())  # two page-like calls: one read per Variable
    assert first.root == second.root == tmp_path / "a"
    now[0] += 0.1  # the window is over: read again, the change takes effect
    assert config.artifact_store().root == tmp_path / "b"
    assert sorted(calls) == sorted(list(config.Settings.variables()) * 2)
    config.forget_settings()
    config.settings()
    assert len(calls) == 3 * len(config.Settings.model_fields)


def test_a_failed_read_outside_a_task_is_not_kept(monkeypatch):
    from airflow.sdk import Variable

    from docverify_airflow import config

    real = Variable.get

    def broken(key, default=None):
        raise ConnectionError("api server unreachable")

    monkeypatch.setattr(Variable, "get", staticmethod(broken))
    with pytest.raises(config.ConfigUnavailable):
        config.settings()
    monkeypatch.setattr(Variable, "get", real)
    assert config.settings().storage_root  # the next call reads again (no failure kept)


def test_every_declared_variable_is_a_field_with_the_declared_default(repo_dir):
    from docverify_airflow import config

    declared = {v["variable_name"]: str(v["variable_value"])
                for v in yaml.safe_load((repo_dir / "airflow_settings.yaml").read_text())["airflow"]["variables"]}
    fields = config.Settings.variables()
    assert set(declared) == set(fields)
    different = {k: (declared[k], fields[k]) for k in declared if declared[k] != fields[k]}
    # the processor's placeholder is declared (a sample to edit); the code has no default processor
    assert different == {"docverify_docai_processor": (declared["docverify_docai_processor"], "")}


@pytest.mark.parametrize(("var", "value", "message"), [
    ("docverify_layout", "cloud", "Variable docverify_layout='cloud' is not a layout: use one of local, document_ai "
                                  r"\(default 'local' when missing or empty\)$"),
    ("docverify_ocr", "maybe", "Variable docverify_ocr='maybe' is not a switch: use on or off "
                               r"\(also true/1/yes or false/0/no\) \(default 'on' when missing or empty\)$"),
    ("docverify_llm_max_attempts", "four", "Variable docverify_llm_max_attempts='four' is not a whole number of "
                                           r"at least 1 \(default '4' when missing or empty\)$"),
    ("docverify_docai_poll_s", "-1", "Variable docverify_docai_poll_s='-1' is not a number of at least 0 "),
    ("docverify_blocker_repair", "maybe", "Variable docverify_blocker_repair='maybe' is not a switch: use on or off"),
    ("docverify_min_primary_confidence", "1.5", "Variable docverify_min_primary_confidence='1.5' is not a number "
                                                r"from 0 to 1 \(default '0.2' when missing or empty\)$"),
    ("docverify_judge", "GPT", "Variable docverify_judge='GPT' is not a judge: use one of offline, llm .*; set it in "
                               "airflow_settings.yaml and re-import the settings$"),
    ("docverify_storage_root", "s3://bucket/x", "Variable docverify_storage_root='s3://bucket/x' is not a storage root: "
                                                "use gs://bucket/prefix, file:///absolute/path or a path"),
])
def test_a_wrong_value_fails_naming_the_variable(monkeypatch, var, value, message):
    from docverify_airflow import config

    monkeypatch.setenv(f"AIRFLOW_VAR_{var.upper()}", value)
    with pytest.raises(ValueError, match=message):
        config.settings()


@pytest.mark.parametrize(("raw", "expected"), [("on", True), ("True", True), ("1", True), ("yes", True),
                                             ("off", False), ("FALSE", False), ("0", False), ("no", False)])
def test_every_switch_takes_one_vocabulary(raw, expected):
    """ADR 0039: every on/off Variable reads on/off, true/false, 1/0 and yes/no alike (there were two
    vocabularies: the policy switches refused 'true' and 'yes')."""
    from docverify_airflow import config

    switches = [name for name, f in config.Settings.model_fields.items() if f.annotation in (bool, "bool")]
    assert len(switches) >= 6, switches
    s = config.Settings.parse({config._extra(config.Settings.model_fields[n])["variable"]: raw for n in switches})
    assert {n: getattr(s, n) for n in switches} == dict.fromkeys(switches, expected)


def test_the_verification_policy_comes_from_its_variables():
    """issue 20: the Variables' defaults are VerifyPolicy's; the tasks pass config.policy(settings)."""
    from docverify.domain.policy import DEFAULT_POLICY, VerifyPolicy
    from docverify_airflow import config

    assert config.policy(config.Settings.parse({})) == DEFAULT_POLICY
    s = config.Settings.parse({"docverify_blocker_repair": "on", "docverify_check_patient_identity": "off",
                               "docverify_min_primary_confidence": "0.5", "docverify_label_text_guard": "off",
                               "docverify_admin_trap_per_segment": "off",
                               "docverify_admin_trap_counts_mentions": "on"})
    assert config.policy(s) == VerifyPolicy(blocker_repair=True, patient_identity=False, min_primary_confidence=0.5,
                                            label_text_guard=False, admin_trap_per_segment=False,
                                            admin_trap_counts_mentions=True)
    # every policy switch has its Variable (ADR 0022): a new VerifyPolicy field needs one
    assert set(config.POLICY_FIELDS.values()) == set(VerifyPolicy.model_fields)
    assert config.Settings.variable("admin_trap_counts_mentions") == "docverify_admin_trap_counts_mentions"


def test_the_processor_is_parsed_by_the_client_helpers():
    from docverify_airflow import config

    s = config.Settings.parse({"docverify_docai_processor": "projects/p/locations/eu/processors/abc/processorVersions/v2"})
    assert s.processor() == {"project": "p", "location": "eu", "processor_id": "abc", "processor_version": "v2"}
    s = config.Settings.parse({"docverify_docai_processor": "projects/p/locations/us/processors/abc"})
    assert s.processor()["processor_version"] is None and s.processor_name().endswith("/abc")
    for bad in ("", "abc", "projects/p/locations/us/processors/a/b"):
        with pytest.raises(ValueError, match="docverify_docai_processor=.* is not a processor resource name"):
            config.Settings.parse({"docverify_docai_processor": bad}).processor()


def test_the_storage_root_is_resolved_once_against_the_repository(monkeypatch, tmp_path):
    from docverify_airflow import config

    monkeypatch.chdir(tmp_path)  # the working directory plays no part
    assert config.resolve_root("data") == config.REPO / "data"
    assert config.resolve_root("file://data") == config.REPO / "data"
    assert config.resolve_root(f"file://{tmp_path}") == tmp_path
    assert config.resolve_root("  ") == config.REPO / config.DEFAULT_STORAGE_ROOT
    # a gs:// root (an ObjectStoragePath on the named connection): test_gcs_store, on the emulator
    assert isinstance(config.Settings.parse({}).root, pathlib.Path)


def test_the_configuration_reference_is_generated_from_settings(repo_dir):
    """docs/configuration.md is scripts/gen_config_docs.py's output: every Variable, its type, default
    and description (regenerate it after changing Settings)."""
    import importlib.util

    from docverify_airflow import config

    spec = importlib.util.spec_from_file_location("gen_config_docs", repo_dir / "scripts" / "gen_config_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = gen.render()
    assert (repo_dir / "docs" / "configuration.md").read_text(encoding="utf-8") == text
    for name in config.Settings.variables():
        assert f"| `{name}` |" in text
    assert all(f.description for f in config.Settings.model_fields.values())


def test_a_bad_value_fails_naming_the_variable():
    from docverify_airflow import config

    for var, raw in (("docverify_llm_rpm", "fast"), ("docverify_min_primary_confidence", "1.5"),
                     ("docverify_blocker_repair", "maybe"), ("docverify_judge", "gpt")):
        with pytest.raises(ValueError, match=f"Variable {var}="):
            config.Settings.parse({var: raw})


# --- the field types: each validates the raw Variable string (accepted and refused values) ---

@pytest.mark.parametrize(("var", "raw", "field", "expected"), [
    ("docverify_ocr", "on", "ocr", True), ("docverify_ocr", " YES ", "ocr", True),
    ("docverify_ocr", "False", "ocr", False), ("docverify_ocr", "0", "ocr", False), ("docverify_ocr", "", "ocr", True),
    ("docverify_v5_second_opinion", "on", "second_opinion", True),
    ("docverify_blocker_repair", "true", "blocker_repair", True),
    ("docverify_layout", " Document_AI ", "layout", "document_ai"), ("docverify_layout", "", "layout", "local"),
    ("docverify_judge", "LLM", "judge", "llm"), ("docverify_jury", "CR_V2", "jury", "cr_v2"),
    ("docverify_llm_mode", "batch", "llm_mode", "batch"), ("docverify_v2_blind_reading", "before", "v2_blind_reading",
                                                           "before"),
    ("docverify_llm_max_attempts", "1", "llm_max_attempts", 1), ("docverify_llm_shards", " 7 ", "llm_shards", 7),
    ("docverify_jury_max_findings", "0", "jury_max_findings", 0), ("docverify_docai_poll_s", "2.5", "docai_poll_s", 2.5),
    ("docverify_llm_rpm", "60", "llm_rpm", 60.0), ("docverify_llm_timeout_s", "0", "llm_timeout_s", 0.0),
    ("docverify_audit_rate", "0", "audit_rate", 0.0), ("docverify_audit_rate", "1", "audit_rate", 1.0),
    ("docverify_min_primary_confidence", "0.5", "min_primary_confidence", 0.5),
    ("docverify_storage_root", "gs://bucket/prefix", "storage_root", "gs://bucket/prefix"),
    ("docverify_storage_root", "gs://bucket", "storage_root", "gs://bucket"),
    ("docverify_storage_root", "file:///srv/data", "storage_root", "file:///srv/data"),
    ("docverify_storage_root", " /srv/data ", "storage_root", "/srv/data"),
    ("docverify_storage_root", "", "storage_root", "data"),
    ("docverify_notify_email", " ops@example.org ", "notify_email", "ops@example.org"),
    ("docverify_llm_conn_id", "  ", "llm_conn_id", "docverify_llm"),
])
def test_each_type_accepts(var, raw, field, expected):
    from docverify_airflow import config

    value = getattr(config.Settings.parse({var: raw}), field)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("var", "raw", "accepts"), [
    *[("docverify_ocr", raw, "a switch: use on or off") for raw in ("maybe", "2", "y", "onn")],
    *[("docverify_layout", raw, "a layout: use one of local, document_ai") for raw in ("cloud", "local2")],
    ("docverify_judge", "gpt", "a judge: use one of offline, llm"),
    ("docverify_jury", "cr_v3", "a jury mode: use one of off, cr_v2, cr_v1"),
    ("docverify_llm_mode", "offline", "an LLM mode: use one of online, batch"),
    ("docverify_v2_blind_reading", "after", "a blind-reading mode: use one of instead, before, off"),
    *[("docverify_llm_max_attempts", raw, "a whole number of at least 1") for raw in ("0", "-1", "1.5", "four")],
    ("docverify_jury_max_findings", "-1", "a whole number of at least 0"),
    *[("docverify_docai_poll_s", raw, "a number of at least 0") for raw in ("-0.1", "nan", "soon")],
    *[("docverify_audit_rate", raw, "a number from 0 to 1") for raw in ("1.01", "-0.01", "nan", "2%")],
    *[("docverify_storage_root", raw, "a storage root") for raw in ("s3://bucket/x", "gs://", "gs:///x", "http://h/x")],
])
def test_each_type_refuses_naming_the_variable_the_value_and_what_it_accepts(var, raw, accepts):
    from docverify_airflow import config

    with pytest.raises(ValueError) as exc:
        config.Settings.parse({var: raw})
    assert str(exc.value).startswith(f"Variable {var}={raw!r} is not {accepts}")
    assert type(exc.value) is ValueError  # not pydantic's ValidationError and its URL


def test_every_refused_variable_is_named_once_per_line():
    from docverify_airflow import config

    with pytest.raises(ValueError) as exc:
        config.Settings.parse({"docverify_ocr": "maybe", "docverify_llm_shards": "0", "docverify_judge": "llm"})
    lines = str(exc.value).splitlines()
    assert [line.split("=")[0] for line in lines] == ["Variable docverify_ocr", "Variable docverify_llm_shards"]


def test_every_typed_variable_refuses_nonsense_and_every_text_variable_takes_it():
    """A field is either typed (its refusal names it and what it accepts) or free text (kept as is)."""
    from docverify_airflow import config

    typed = []
    for name, f in config.Settings.model_fields.items():
        var = config.Settings.variable(name)
        try:
            value = getattr(config.Settings.parse({var: "?!"}), name)
        except ValueError as exc:
            assert str(exc).startswith(f"Variable {var}='?!' is not "), exc
            assert ": use " in str(exc) or " number " in str(exc)
            typed.append(name)
        else:
            assert f.annotation is str and value == "?!", name
    assert len(typed) >= 25, typed


def test_a_secret_variable_is_refused_without_its_value():
    from docverify_airflow import config

    f = config.Settings.model_fields["ocr"]
    assert "hunter2" in config.refusal("docverify_ocr", "hunter2", f)
    for var in ("docverify_llm_api_key", "docverify_notify_token", "docverify_smtp_password"):
        message = config.refusal(var, "hunter2", f)
        assert "hunter2" not in message and message.startswith(f"Variable {var} (its value is not shown")


def test_the_choices_are_the_cores():
    """The blind-reading modes are the LLM judge's (docverify.judging.judges.BLIND_READINGS)."""
    import typing

    from docverify.judging.judges import BLIND_READINGS
    from docverify_airflow import config

    assert typing.get_args(config.Settings.model_fields["v2_blind_reading"].annotation) == BLIND_READINGS
    assert config.LAYOUTS == ("local", "document_ai") and config.JURY_MODES == ("off", "cr_v2", "cr_v1")
