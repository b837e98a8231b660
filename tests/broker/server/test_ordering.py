"""Response ordering (broker.server.ordering), without sockets: whatever order
requests complete in, their answers come out in request order, and never before an
earlier request's."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.server.ordering import ResponseOrder


@st.composite
def completions(draw):
    """Requests (answered at once, or later with an answer or None) and the order
    the later ones complete in."""
    kinds = draw(st.lists(st.sampled_from(["now", "later", "later-none"]), max_size=30))
    later = [i for i, kind in enumerate(kinds) if kind != "now"]
    return kinds, draw(st.permutations(later))


@settings(max_examples=300, deadline=None)
@given(completions())
def test_any_completion_order_gives_answers_in_request_order(case):
    kinds, finishing = case
    order = ResponseOrder()
    sequences = {}
    for i, kind in enumerate(kinds):
        if kind == "now":
            order.add(f"answer {i}")
        else:
            sequences[i] = order.expect()
    written = []
    done = {i for i, kind in enumerate(kinds) if kind == "now"}

    def write_ready():
        while (response := order.pop_ready()) is not None:
            written.append(response)
            index = int(response.split()[1])
            # every earlier request is done: nothing is answered ahead of it
            assert all(j in done for j in range(index))

    write_ready()
    for i in finishing:
        done.add(i)
        order.complete(sequences[i], None if kinds[i] == "later-none" else f"answer {i}")
        write_ready()
    expected = [f"answer {i}" for i, kind in enumerate(kinds) if kind != "later-none"]
    assert written == expected
    assert len(order) == 0


def test_a_waiting_request_holds_back_those_after_it():
    order = ResponseOrder()
    fetch = order.expect()
    order.add("metadata")
    assert order.pop_ready() is None
    assert len(order) == 2
    order.complete(fetch, "fetch")
    assert order.pop_ready() == "fetch"
    assert order.pop_ready() == "metadata"
    assert order.pop_ready() is None


def test_full_at_the_in_flight_limit():
    order = ResponseOrder(max_in_flight=2)
    first = order.expect()
    order.add("b")
    assert order.full
    order.complete(first, "a")
    assert order.full  # answered but not yet handed out still counts
    order.pop_ready()
    assert not order.full


def test_completions_after_clear_are_ignored():
    order = ResponseOrder()
    waiting = order.expect()
    order.add("b")
    order.clear()
    order.complete(waiting, "late")
    assert len(order) == 0 and order.pop_ready() is None
    later = order.expect()
    assert later == waiting + 2
    order.complete(later, "next")
    assert order.pop_ready() == "next"


def test_a_request_completes_once():
    order = ResponseOrder()
    sequence = order.expect()
    order.complete(sequence, "a")
    with pytest.raises(ValueError):
        order.complete(sequence, "b")
