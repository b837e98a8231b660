"""A broker served in this process, on its own event loop in a background thread,
for tests that must reach its partitions the way broker-internal code does (e.g.
end-transaction markers before the transaction coordinator exists)."""

import asyncio
import threading

from broker.config import BrokerConfig
from broker.server.server import BrokerServer
from common.ports import free_port


class InProcessBroker:
    """A BrokerServer on an event loop in a background thread."""

    def __init__(self, data_dir, settings: dict | None = None):
        self.port = free_port()
        values = {"num.partitions": 2, **(settings or {})}
        config = BrokerConfig.load(
            None,
            [f"{k}={v}" for k, v in values.items()],
            data_dir,
            f"PLAINTEXT://127.0.0.1:{self.port}",
        )
        self.server = BrokerServer(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.server.start())

    @property
    def core(self):
        return self.server.core

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self, fn):
        async def run():
            return fn()

        return self.call(run())

    def marker(self, topic: str, partition: int, pid: int, commit: bool, epoch: int = 0):
        def write():
            p = self.core.replicas.get_partition(topic, partition)
            return p.append_txn_marker(pid, epoch, commit, coordinator_epoch=0)

        return self.on_loop(write)

    def stop(self):
        self.call(self.server.shutdown(grace_s=1.0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
