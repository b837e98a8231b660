"""Topic and key templates (sinks/kafka/templates.py) and how the kafka sink turns events
into records with them (sinks/kafka/records.py): pure parts, no broker."""

import pytest

from agent.api import Event
from sinks.kafka.records import RecordMaker, config_problems, with_headers
from sinks.kafka.templates import TemplateError, parse


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("nginx-access", ("nginx-access",)),
        ("nginx-{host}", ("nginx-", "host", "")),
        ("{host}", ("", "host", "")),
        ("{a}{b.c}-x-{@timestamp}", ("", "a", "", "b.c", "-x-", "@timestamp", "")),
        ("", ("",)),
    ],
)
def test_parse_alternates_literals_and_names(text, parts):
    template = parse(text)
    assert template.parts == parts
    assert template.constant == (text if len(parts) == 1 else None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nginx-{host", "\"{\" not closed, at column 7 of 'nginx-{host'"),
        ("nginx-host}", '"}" without "{" at column 11 of \'nginx-host}\''),
        ("a{}b", "placeholder {} at column 2 of 'a{}b': a name is letters, digits and _ . - @"),
        ("{ host }", "placeholder { host } at column 1"),
        ("{a{b}", "placeholder {a{b} at column 1"),
    ],
)
def test_malformed_templates_say_what_and_where(text, message):
    with pytest.raises(TemplateError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse(text)


def test_a_name_is_the_records_field_first_then_the_header():
    template = parse("{host}/{status}/{source}")
    parsed = Event(b"x", {"host": "h-header", "source": "tail"}, {"host": "h-field", "status": 404})
    unparsed = Event(b"x", {"host": "h-header", "source": "tail", "status": "s"})
    null_field = Event(b"x", {"host": "h", "status": "503", "source": "s"}, {"host": None})
    assert template.render(parsed) == "h-field/404/tail"
    assert template.render(unparsed) == "h-header/s/tail"
    assert template.render(null_field) == "h/503/s"  # a null field falls back to the header
    assert parse("{ok}-{v}").render(Event(b"", {}, {"ok": True, "v": 1.5})) == "true-1.5"


def test_a_missing_name_renders_as_none_and_is_named():
    template = parse("nginx-{host}-{status}")
    event = Event(b"x", {"host": "web1"}, {"path": "/"})
    assert template.render(event) is None
    assert template.missing(event) == "status"
    assert template.missing(Event(b"x", {"host": "w", "status": "200"})) is None


def test_render_all_shares_a_rendering_between_events_sharing_headers():
    shared = {"host": "web1"}
    events = [Event(b"a", shared), Event(b"b", shared), Event(b"c", {}), Event(b"d", shared)]
    events.append(Event(b"e", shared, {"host": "from-record"}))
    assert parse("{host}").render_all(events) == ["web1", "web1", None, "web1", "from-record"]


# -- events to records ---------------------------------------------------------------


def maker(topic="lines", key=None, headers=("host",)) -> RecordMaker:
    return RecordMaker(parse(topic), parse(key) if key is not None else None, list(headers))


def test_no_key_no_wanted_header_and_a_plain_topic_keep_the_lean_shape():
    events = [Event(b"a", {"source": "tail", "path": "/x"})] * 3
    out = maker().make(events, [e.body for e in events])
    assert out.topic == "lines" and out.keys is None and out.headers is None and out.dead == []
    assert maker(headers=()).make(events, [b""] * 3).headers is None


def test_headers_are_utf8_pairs_shared_by_events_that_share_a_headers_dict():
    web = {"source": "tail", "host": "wéb1", "path": "/var/log/a"}
    other = {"source": "udp"}
    events = [Event(b"a", web), Event(b"b", web), Event(b"c", other), Event(b"d", web)]
    out = maker(headers=("host", "path")).make(events, [e.body for e in events])
    pairs = [("host", "wéb1".encode()), ("path", b"/var/log/a")]
    assert out.headers == [pairs, pairs, None, pairs]
    assert out.headers[0] is out.headers[1]  # encoded once per run of shared headers


def test_templated_topic_and_key_and_the_dead_letters_of_missing_fields():
    events = [
        Event(b"1", {"host": "web1"}, {"status": 200}),
        Event(b"2", {}, {"status": 500}),  # no host: its topic cannot be made
        Event(b"3", {"host": "web2"}, {}),  # no status: its key cannot be made
        Event(b"4", {"host": "bad/name"}, {"status": 200}),  # not a topic name
        Event(b"5", {"host": "web1"}, {"status": 404}),
    ]
    out = maker("nginx-{host}", "{status}").make(events, [e.body for e in events])
    assert out.topic == ["nginx-web1", "nginx-web1"]
    assert out.values == [b"1", b"5"] and out.keys == [b"200", b"404"]
    assert out.headers == [[("host", b"web1")]] * 2
    assert [(d.reason, d.topic, d.value, d.key) for d in out.dead] == [
        ("MISSING_FIELD: host (topic nginx-{host})", "nginx-{host}", b"2", b"500"),
        ("MISSING_FIELD: status (key {status})", "nginx-web2", b"3", None),
        ("INVALID_TOPIC: 'nginx-bad/name' is not a valid topic name", "nginx-{host}", b"4", b"200"),
    ]
    assert out.dead[1].headers == [("host", b"web2")]


def test_failed_records_get_their_headers_back():
    topics, values, keys = ["t", "t", "u"], [b"a", b"b", b"a"], [None, b"k", None]
    headers = [[("host", b"1")], [("host", b"2")], None]
    failed = [("err", "u", b"a", None, None, 1), ("err", "t", b"b", b"k", None, 2)]
    assert with_headers(failed, topics, values, keys, headers) == [
        ("err", "u", b"a", None, None, 1),
        ("err", "t", b"b", b"k", [("host", b"2")], 2),
    ]


@pytest.mark.parametrize(
    ("topic", "key", "dlq", "problems"),
    [
        ("nginx-{host}", "{host}", "nginx.dlq", []),
        ("nginx access", None, None, ["topic: ' ' cannot be in a topic name (letters, digits, . _ -)"]),
        (
            "nginx-{host}",
            None,
            None,
            [
                "topic: a template needs dead_letter_topic (a plain topic name, for the "
                "records whose topic cannot be made)"
            ],
        ),
        ("t", "{host", None, ["key: \"{\" not closed, at column 1 of '{host'"]),
        ("t", None, "dlq-{host}", ["dead_letter_topic: 'dlq-{host}' is not a topic name (letters, "
                                   "digits, . _ -; no placeholders)"]),
    ],
)  # fmt: skip
def test_config_problems_name_the_key(topic, key, dlq, problems):
    assert config_problems(topic, key, dlq) == problems
