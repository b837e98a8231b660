"""Small helpers for agent unit tests."""

import asyncio
import functools
import logging

from agent.api import Ack, Context, Event
from agent.metrics import Registry


def context(tmp_path, name="c", registry=None) -> Context:
    return Context("test", name, registry or Registry(), str(tmp_path), logging.getLogger(name))


def events(n, prefix="e", settled=None, size=10):
    """n events; with `settled` (a list), each event's Ack appends its body when settled."""
    out = []
    for i in range(n):
        body = f"{prefix}{i}".encode().ljust(size, b".")
        ack = Ack(lambda b=body: settled.append(b)) if settled is not None else None
        out.append(Event(body, ack=ack))
    return out


def run_async(fn):
    """Decorator: run an async test function in a fresh event loop."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper
