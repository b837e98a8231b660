"""Entity config change notifications (`/config/changes`) in a real ZooKeeper: a broker
applies each change it is notified of, then removes the notifications older than the
expiration (Kafka's 15 minutes; here three seconds, so the test can see it happen)."""

import asyncio
import time
import uuid

from broker.cluster.zk import CONFIG_CHANGES, ZkSession
from broker.quotas.entity import Entity
from broker.quotas.store import ZkQuotaStore
from testkit.procs import wait_until

RATE = "producer_byte_rate"


async def test_config_change_notifications_older_than_the_expiration_are_removed(zookeeper):
    session = ZkSession(f"{zookeeper.connect}/q{uuid.uuid4().hex[:8]}", 10)
    await session.start(10)
    await session.call("ensure_path", CONFIG_CHANGES)
    writer, reader = ZkQuotaStore(change_expiration_ms=3000), ZkQuotaStore()
    stoppers = [*writer.watch(session), *reader.watch(session)]
    first, second = Entity(None, "first"), Entity(None, "second")
    try:
        await writer.apply({first: {RATE: 1000.0}})
        await asyncio.to_thread(
            wait_until, lambda: reader.quotas.get(first) == {RATE: 1000.0}, 10, "first"
        )
        (old,) = await session.call("get_children", CONFIG_CHANGES)
        _, stat = await session.call("get", f"{CONFIG_CHANGES}/{old}")
        await asyncio.sleep(max(0.0, (stat.ctime + 3100) / 1000 - time.time()))  # expired
        await writer.apply({second: {RATE: 2000.0}})
        await asyncio.to_thread(
            wait_until, lambda: reader.quotas.get(second) == {RATE: 2000.0}, 10, "second"
        )

        def purged():
            left = session.client.get_children(CONFIG_CHANGES)
            return left if old not in left else None

        (new,) = await asyncio.to_thread(wait_until, purged, 10, "the expired notification gone")
        assert new > old  # the second's stays until it expires in turn
        assert reader.quotas.get(first) == {RATE: 1000.0}  # a purge changes no config
    finally:
        for stop in stoppers:
            stop()
        await session.close()
