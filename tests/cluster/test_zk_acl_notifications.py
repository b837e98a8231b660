"""ACL change notifications in a real ZooKeeper: a broker applies each change it is
notified of, then removes the notifications older than the expiration (Kafka's 15
minutes; here three seconds, so the test can see it happen)."""

import asyncio
import time
import uuid

from broker.cluster.zk import ZkSession
from broker.cluster.zk_acls import LITERAL_CHANGES, ZkAclStore
from broker.security.acl import Entry, Operation, Permission, Resource, ResourceType
from common.aio import within
from testkit.procs import wait_until


def grant(principal: str) -> Entry:
    return Entry(principal, "*", Operation.READ, Permission.ALLOW)


async def test_notifications_older_than_the_expiration_are_removed(zookeeper):
    session = ZkSession(f"{zookeeper.connect}/a{uuid.uuid4().hex[:8]}", 10)
    await session.start(10)
    store = ZkAclStore(session, change_expiration_ms=3000)
    changed = asyncio.Queue()
    store.on_change = lambda r, entries: changed.put_nowait((r.name, len(entries)))
    try:
        await store.load()
        first, second = (Resource(ResourceType.TOPIC, n) for n in ("first", "second"))
        await store.update(first, lambda old: {grant("User:a")})
        assert await within(changed.get(), 10) == ("first", 1)
        (old,) = await session.call("get_children", LITERAL_CHANGES)
        _, stat = await session.call("get", f"{LITERAL_CHANGES}/{old}")
        await asyncio.sleep(max(0.0, (stat.ctime + 3100) / 1000 - time.time()))  # expired
        await store.update(second, lambda old: {grant("User:b")})
        assert await within(changed.get(), 10) == ("second", 1)

        def purged():
            left = session.client.get_children(LITERAL_CHANGES)
            return left if old not in left else None

        (new,) = await asyncio.to_thread(wait_until, purged, 10, "the expired notification gone")
        assert new > old  # the second's stays until it expires in turn
    finally:
        await store.close()
        await session.close()
