"""Random heartbeat sequences (hypothesis): whatever members send, the coordinator
answers with an error code rather than an exception, never lets two members hold
one partition, and a member is told only partitions nobody else holds."""

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.groups.consumer.heartbeat import HeartbeatRequest
from broker.groups.coordinator import CoordinatorConfig, GroupCoordinator
from broker.protocol.errors import ErrorCode
from tests.broker.groups.fakes import MemoryStore

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (T1, 5), "b": (T2, 3)}

step = st.tuples(
    st.sampled_from(["m1", "m2", "m3", "m4"]),
    st.sampled_from(["join", "follow", "stale", "leave", "tick"]),
    st.sampled_from([("a",), ("b",), ("a", "b")]),
    st.booleans(),  # report the partitions held (else the last ones told)
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=40))
def test_random_heartbeats_keep_ownership_exclusive(steps):
    asyncio.run(_run(steps))


async def _run(steps):
    coord = GroupCoordinator(
        MemoryStore(), CoordinatorConfig(consumer_session_timeout_ms=50), lambda: TOPICS
    )
    for p in range(coord.config.num_partitions):
        coord.load_partition(p, 0)
    epoch: dict[str, int] = {}
    told: dict[str, dict] = {}
    now = 0
    for member, action, topics, honest in steps:
        now += 10
        if action == "tick":
            await coord.tick(now + 100)
            continue
        if action == "join":
            req = HeartbeatRequest(
                "g", member, 0, rebalance_timeout_ms=1000, subscribed_topic_names=topics, owned={}
            )
        else:
            e = {"follow": epoch.get(member, 1), "stale": epoch.get(member, 1) - 1}.get(action, -1)
            owned = told.get(member, {}) if honest else None
            req = HeartbeatRequest("g", member, e, owned=owned)
        r = await coord.consumer.heartbeat(req, now)
        assert isinstance(r.error, ErrorCode)
        if r.error == ErrorCode.NONE and action != "leave":
            epoch[member] = r.member_epoch
            if r.assignment is not None:
                told[member] = dict(r.assignment)
        elif r.error != ErrorCode.NONE or action == "leave":
            epoch.pop(member, None)
            told.pop(member, None)
        group = coord.consumer_group("g")
        if group is None:
            continue
        held: dict = {}
        for m in group.members.values():
            for part in (m.assignment.assigned, m.assignment.revoking):
                for t, ps in part.items():
                    for p in ps:
                        assert (t, p) not in held, "a partition held by two members"
                        held[(t, p)] = m.member_id
        assert held == {k: v for k, v in group.owners.items()}
