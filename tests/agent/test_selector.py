from agent.api import Ack, Event
from agent.config import SelectorConfig
from agent.selector import Selector


def make(cfg):
    return Selector([("a", "A"), ("b", "B"), ("c", "C")], cfg)


def test_replicating_puts_every_event_everywhere_and_counts_copies():
    settled = []
    ack = Ack(lambda: settled.append(1), copies=2)
    evs = [Event(b"x", ack=ack), Event(b"y", ack=ack)]
    routes, dropped = make(SelectorConfig()).route(evs)
    assert [(ch, len(b)) for ch, b in routes] == [("A", 2), ("B", 2), ("C", 2)]
    for _ in range(5):
        ack.settle()
    assert settled == []  # 6 copies in all
    ack.settle()
    assert settled == [1]


def test_multiplexing_by_header_with_default_and_drop():
    cfg = SelectorConfig(
        type="multiplexing", header="level", mapping={"error": ["a", "b"], "info": ["c"]}
    )
    settled = []
    evs = [
        Event(b"1", {"level": "error"}, ack=Ack(lambda: settled.append("e"))),
        Event(b"2", {"level": "info"}),
        Event(b"3", {"level": "debug"}, ack=Ack(lambda: settled.append("d"))),
    ]
    routes, dropped = make(cfg).route(evs)
    assert {ch: [e.body for e in b] for ch, b in routes} == {"A": [b"1"], "B": [b"1"], "C": [b"2"]}
    assert dropped == 1 and settled == ["d"]  # no default: dropped and settled


def test_multiplexing_by_record_field_falls_back_to_default():
    cfg = SelectorConfig(type="multiplexing", field="status", mapping={"500": ["a"]}, default=["c"])
    evs = [Event(b"1", record={"status": 500}), Event(b"2", record={"status": 200}), Event(b"3")]
    routes, dropped = make(cfg).route(evs)
    assert {ch: [e.body for e in b] for ch, b in routes} == {"A": [b"1"], "C": [b"2", b"3"]}
    assert dropped == 0
