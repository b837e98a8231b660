"""`fields` interceptor: drop, rename and mask fields of parsed records."""

from agent.api import Event
from agent.interceptors.fields import Fields
from tests.agent.interceptors.pipelines import FIRST_LINE, WHERE, compile_interceptor
from tests.sources.harness import FakeMetrics, make_context

CHANGED = "logflume_agent_fields_changed_total"


def fields(metrics=None, **config) -> Fields:
    return Fields(Fields.Config(**config), make_context("/nonexistent", "f", metrics))


def access(**over) -> dict:
    record = {
        "client": "203.0.113.57",
        "user": "alice",
        "path": "/login?token=s3cret",
        "status": 200,
        "user_agent": "curl/8.5",
    }
    return {**record, **over}


def test_drop_rename_and_mask_on_parsed_records():
    metrics = FakeMetrics()
    f = fields(metrics, drop=["user_agent"], rename={"client": "client_ip"}, mask={"user": "***"})
    parsed = Event(b"line", record=access())
    out = f.intercept([parsed])
    assert out == [parsed]
    assert parsed.record == {
        "client_ip": "203.0.113.57",
        "user": "***",
        "path": "/login?token=s3cret",
        "status": 200,
    }
    assert parsed.body == b"line"
    assert metrics.value(CHANGED, component="f") == 1


def test_raw_events_and_records_without_the_fields_are_left_alone_and_not_counted():
    metrics = FakeMetrics()
    f = fields(metrics, drop=["user_agent"], rename={"client": "ip"}, mask={"user": "***"})
    raw = Event(b"not parsed", {"parse_error": "nginx: line does not match the format"})
    other = Event(b"{}", record={"status": 500})
    out = f.intercept([raw, other])
    assert out == [raw, other]
    assert raw.record is None and raw.headers == {"parse_error": raw.headers["parse_error"]}
    assert other.record == {"status": 500}
    assert metrics.value(CHANGED, component="f") == 0


def test_each_event_is_counted_once_however_many_of_its_fields_changed():
    metrics = FakeMetrics()
    f = fields(metrics, drop=["user_agent", "status"], mask={"user": "***"})
    events = [Event(b"1", record=access()), Event(b"2", record={"status": 1}), Event(b"3")]
    f.intercept(events)
    assert metrics.value(CHANGED, component="f") == 2


def test_every_key_names_a_field_as_the_record_has_it_before_the_interceptor():
    # renames happen at once: a swap swaps, a chain moves each value one step
    swap = Event(b"", record={"a": 1, "b": 2})
    fields(rename={"a": "b", "b": "a"}).intercept([swap])
    assert swap.record == {"b": 1, "a": 2}
    chain = Event(b"", record={"a": 1, "b": 2})
    fields(rename={"a": "b", "b": "c"}).intercept([chain])
    assert chain.record == {"b": 1, "c": 2}
    # the record's own field of the new name is replaced, dropped or not
    taken = Event(b"", record={"client": "1.2.3.4", "ip": "x", "z": 0})
    fields(rename={"client": "ip"}).intercept([taken])
    assert taken.record == {"ip": "1.2.3.4", "z": 0}
    dropped = Event(b"", record={"client": "1.2.3.4", "ip": "x"})
    fields(rename={"client": "ip"}, drop=["ip"]).intercept([dropped])
    assert dropped.record == {"ip": "1.2.3.4"}
    # a masked field that is renamed arrives masked under its new name
    masked = Event(b"", record={"user": "alice"})
    fields(rename={"user": "login"}, mask={"user": "***"}).intercept([masked])
    assert masked.record == {"login": "***"}


def test_mask_replaces_values_but_leaves_null_and_missing_fields():
    f = fields(mask={"user": "***", "referrer": None, "bytes": 0})
    e = Event(b"", record={"user": None, "referrer": "https://example.com/?q=me", "bytes": 12})
    f.intercept([e])
    assert e.record == {"user": None, "referrer": None, "bytes": 0}
    assert "user_agent" not in e.record


def test_records_are_changed_in_place_and_headers_never():
    shared = {"source": "access", "host": "web-1"}
    events = [Event(b"1", shared, access()), Event(b"2", shared, access())]
    fields(drop=["host", "source"], rename={"path": "host"}).intercept(events)
    assert shared == {"source": "access", "host": "web-1"}
    assert all(e.headers is shared for e in events)
    assert events[0].record["host"] == "/login?token=s3cret"


def test_validate_names_the_key_at_fault():
    assert Fields.validate(Fields.Config()) == ["nothing to change: set drop, rename or mask"]
    assert Fields.validate(Fields.Config(drop=["user"], mask={"user": "x"})) == [
        "drop: 'user' is also masked: drop it or mask it"
    ]
    assert Fields.validate(Fields.Config(drop=["a"], rename={"a": "b"})) == [
        "drop: 'a' is also renamed: drop it or rename it"
    ]
    assert Fields.validate(Fields.Config(rename={"a": "x", "b": "x"})) == [
        "rename.b: 'x' is also the new name of 'a'"
    ]
    assert Fields.validate(Fields.Config(rename={"a": ""})) == ["rename.a: the new name is empty"]
    assert Fields.validate(Fields.Config(rename={"a": "a"})) == ["rename.a: renamed to itself"]


def test_errors_name_file_line_and_key():
    config, errors = compile_interceptor(
        """
        type: fields
        drop: [user_agent]
        rename:
          client: ip
          user: ip
        """
    )
    assert config is None
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 4}:21: {WHERE}.rename.user: "
        "'ip' is also the new name of 'client'"
    ]
    config, errors = compile_interceptor("type: fields\nmask: [user]")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE + 1}:19: {WHERE}.mask: expected mapping of Any, got a list"
    ]
    _, errors = compile_interceptor("type: fields")
    assert errors == [
        f"pipelines.yaml:{FIRST_LINE}:13: {WHERE}: nothing to change: set drop, rename or mask"
    ]
    config, errors = compile_interceptor(
        'type: fields\ndrop: [user_agent]\nrename: {client: client_ip}\nmask: {user: "***"}'
    )
    assert errors == []
    assert (config.drop, config.rename, config.mask) == (
        ["user_agent"],
        {"client": "client_ip"},
        {"user": "***"},
    )
