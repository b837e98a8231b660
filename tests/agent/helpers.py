"""Small helpers for agent unit tests."""

import logging

from agent.api import Ack, Context, Event
from agent.metrics import Registry


def context(tmp_path, name="c", registry=None) -> Context:
    return Context("test", name, registry or Registry(), str(tmp_path), logging.getLogger(name))


def metric(component, name: str, **labels: str) -> float | None:
    """The value of `component`'s series `name` (labelled with its name) in its registry."""
    ctx = component.context
    return ctx.metrics.value(name, component=ctx.name, **labels)


def events(n, prefix="e", settled=None, size=10):
    """n events; with `settled` (a list), each event's Ack appends its body when settled."""
    out = []
    for i in range(n):
        body = f"{prefix}{i}".encode().ljust(size, b".")
        ack = Ack(lambda b=body: settled.append(b)) if settled is not None else None
        out.append(Event(body, ack=ack))
    return out
