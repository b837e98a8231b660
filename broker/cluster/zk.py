"""ZooKeeper access for the cluster: Kafka's znode layout and an asyncio bridge to kazoo.

Znodes (Kafka's ZooKeeper-mode layout, JSON as Kafka writes it):

    /cluster/id                                      {"version": "1", "id": ...}
    /controller                      ephemeral       {"version": 1, "brokerid": N, "timestamp": ...}
    /controller_epoch                                "7"
    /brokers/ids/<id>                ephemeral       {"version": 5, "host", "port", "rack", "endpoints", ...}
    /brokers/topics/<topic>                          {"version": 3, "topic_id", "partitions": {"0": [1, 2, 3]},
                                                      "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
    /brokers/topics/<topic>/partitions/<p>/state     {"version": 1, "leader", "leader_epoch", "isr", "controller_epoch"}
    /config/topics/<topic>                           {"version": 1, "config": {...}}
    /config/users/<user>                             {"version": 1, "config": {"SCRAM-SHA-512": ...}}
    /admin/delete_topics/<topic>                     (empty: a deletion request for the controller)
    /admin/controlled_shutdown/<id>  ephemeral       (ours: a broker asking the controller to move its leaders)
    /admin/reassign_partitions                       {"version": 1, "partitions": [{"topic", "partition", "replicas"}]}
                                                     (moves asked by tools before KIP-455: legacy_reassignment.py)

Threads. kazoo runs its own connection and event threads. `ZkSession` never blocks
the event loop: every operation uses kazoo's `*_async` call and hands the result to
an asyncio future with `loop.call_soon_threadsafe`; every await has a timeout (`within`,
not `asyncio.wait_for`, which can lose a cancellation: see `common.aio`). Watch
and session-state callbacks arrive on kazoo's event thread and are re-posted to the
loop the same way, in the order kazoo delivered them, so all cluster logic runs on the
broker's event loop and never needs a lock.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

import orjson
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from broker.listeners import parse_addresses
from common.aio import within

log = logging.getLogger(__name__)

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
CONFIG_CHANGES = "/config/changes"  # Kafka's entity config change notifications
# Kafka's ZkNodeChangeNotificationListener's changeExpirationMs: a change notification
# older than this is deleted by the next broker that processes notifications.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
BASE_PATHS = (
    BROKER_IDS,
    TOPICS,
    CONFIG_TOPICS,
    CONFIG_USERS,
    CONFIG_CLIENTS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    CONTROLLED_SHUTDOWN,
    "/cluster",
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- znode values -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker's registration: its advertised endpoint per listener name."""

    broker_id: int
    endpoints: dict[str, tuple[str, int]]
    rack: str | None = None


def encode_broker(info: BrokerInfo, protocols: dict[str, str]) -> bytes:
    """Kafka's `/brokers/ids/<id>` JSON (version 5): every endpoint as NAME://host:port
    with the listener's security protocol; `host`/`port` are those of the PLAINTEXT
    endpoint, null/-1 without one (what old tools read)."""
    plain = next((a for n, a in info.endpoints.items() if protocols[n] == "PLAINTEXT"), None)
    return orjson.dumps(
        {
            "version": 5,
            "host": plain[0] if plain else None,
            "port": plain[1] if plain else -1,
            "jmx_port": -1,
            "timestamp": _now_ms(),
            "endpoints": [f"{n}://{_host(h)}:{p}" for n, (h, p) in info.endpoints.items()],
            "listener_security_protocol_map": {n: protocols[n] for n in info.endpoints},
            "rack": info.rack,
            "features": {},
        }
    )


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    raw = orjson.loads(data)
    endpoints = raw.get("endpoints")
    if endpoints:
        found = parse_addresses(",".join(endpoints), f"/brokers/ids/{broker_id} endpoints")
    else:  # a registration older than Kafka 0.10
        found = {"PLAINTEXT": (str(raw["host"]), int(raw["port"]))}
    return BrokerInfo(broker_id, found, raw.get("rack"))


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionState:
    """Contents of a partition's state znode; `version` is the znode version (for CAS)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int = 0
    version: int = -1

    def replace(self, **changes) -> PartitionState:
        return dataclasses.replace(self, **changes)


def encode_state(state: PartitionState) -> bytes:
    return orjson.dumps(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_state(data: bytes, version: int) -> PartitionState:
    raw = orjson.loads(data)
    return PartitionState(
        int(raw["leader"]),
        int(raw["leader_epoch"]),
        tuple(int(r) for r in raw["isr"]),
        int(raw.get("controller_epoch", 0)),
        version,
    )


def encode_assignment(
    assignments: list[list[int]],
    topic_id: str,
    reassigning: dict[int, Moving] | None = None,
) -> bytes:
    """Kafka's TopicZNode (version 3); `reassigning` gives the partitions being moved
    (KIP-455): their adding and removing replicas, written only where non-empty."""
    moving = reassigning or {}
    return orjson.dumps(
        {
            "version": 3,
            "topic_id": topic_id,
            "partitions": {str(i): list(r) for i, r in enumerate(assignments)},
            "adding_replicas": {str(p): list(m.adding) for p, m in moving.items() if m.adding},
            "removing_replicas": {
                str(p): list(m.removing) for p, m in moving.items() if m.removing
            },
        }
    )


def decode_assignment(data: bytes) -> tuple[list[list[int]], str]:
    raw = orjson.loads(data)
    parts = raw["partitions"]
    assignments = [[int(b) for b in parts[str(i)]] for i in range(len(parts))]
    return assignments, str(raw.get("topic_id") or "")


@dataclasses.dataclass(frozen=True, slots=True)
class Moving:
    """A partition being reassigned: the replicas being added and being removed (the
    topic znode's `adding_replicas` / `removing_replicas`)."""

    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


def decode_reassigning(data: bytes) -> dict[int, Moving]:
    """The partitions of a topic znode being reassigned (absent fields: none, as a
    topic znode written before KIP-455 has them)."""
    raw = orjson.loads(data)
    adding = raw.get("adding_replicas") or {}
    removing = raw.get("removing_replicas") or {}
    return {
        int(p): Moving(
            tuple(int(b) for b in adding.get(p, ())), tuple(int(b) for b in removing.get(p, ()))
        )
        for p in sorted(set(adding) | set(removing), key=int)
    }


def encode_config(configs: dict[str, str]) -> bytes:
    return orjson.dumps({"version": 1, "config": configs})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in orjson.loads(data).get("config", {}).items()}


def encode_controller(broker_id: int) -> bytes:
    return orjson.dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()})


def decode_controller(data: bytes | None) -> int:
    if not data:
        return -1
    try:
        return int(orjson.loads(data)["brokerid"])
    except (ValueError, KeyError, TypeError):
        return -1


def parse_connect(connect: str) -> tuple[str, str | None]:
    """`host:port[,host:port][/chroot]` -> (hosts, chroot or None)."""
    hosts, sep, chroot = connect.partition("/")
    return hosts, ("/" + chroot.strip("/")) if sep and chroot.strip("/") else None


# -- the session ----------------------------------------------------------------------


async def purge_expired_notifications(
    zk: ZkSession, directory: str, names: list[str], expiration_ms: int
) -> set[str]:
    """Delete, oldest first, the sequential notifications `names` of `directory` created
    more than `expiration_ms` ago, as Kafka's listener does after processing them; stop at
    the first younger one (the rest are newer). Another broker may delete them first.
    Returns the names that are gone."""
    oldest = time.time() * 1000 - expiration_ms
    gone = set()
    for name in sorted(names):
        try:
            stat = await zk.call("exists", f"{directory}/{name}")
            if stat is not None and stat.ctime < oldest:
                await zk.call("delete", f"{directory}/{name}")
                stat = None
        except NoNodeError:
            stat = None
        if stat is not None:
            break
        gone.add(name)
    return gone


class ZkSession:
    """One kazoo client bridged to the broker's event loop.

    Owned by the broker's cluster node. Coroutines and `watch_*` must be called from
    the event loop; callbacks given to them run on the event loop.
    """

    def __init__(self, connect: str, session_timeout_s: float, op_timeout_s: float = 10.0):
        self.connect = connect
        self.op_timeout_s = op_timeout_s
        hosts, self.chroot = parse_connect(connect)
        self.client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0},
            command_retry=None,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[str], None]] = []
        self._closed = False

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return sid[0] if sid else None

    async def start(self, timeout_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.client.add_listener(self._on_state)
        await within(
            self.loop.run_in_executor(None, lambda: self.client.start(timeout=timeout_s)),
            timeout_s + 1,
        )
        if self.chroot:
            await self.call("ensure_path", self.chroot)
            self.client.chroot = self.chroot

    async def close(self) -> None:
        self._closed = True
        await within(asyncio.get_running_loop().run_in_executor(None, self._stop_client), 10)

    def _stop_client(self) -> None:
        self.client.stop()
        self.client.close()

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """`fn(state)` on the loop for "LOST", "SUSPENDED" and "CONNECTED"."""
        self._listeners.append(fn)

    def _on_state(self, state) -> None:
        name = {
            KazooState.LOST: "LOST",
            KazooState.SUSPENDED: "SUSPENDED",
            KazooState.CONNECTED: "CONNECTED",
        }[state]
        self._post(self._deliver_state, name)

    def _deliver_state(self, name: str) -> None:
        for fn in list(self._listeners):
            try:
                fn(name)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _post(self, fn, *args) -> None:
        if self.loop is None or self._closed:
            return
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the broker is exiting
            pass

    async def call(self, op: str, *args, timeout_s: float | None = None, **kwargs):
        """Run kazoo's `<op>_async(*args, **kwargs)`; its result, or its exception."""
        assert self.loop is not None, "ZooKeeper client not started"
        future = self.loop.create_future()

        def settle(value, exc) -> None:
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                future.set_result(value)

        def done(async_result) -> None:
            try:
                value, exc = async_result.get_nowait(), None
            except Exception as e:
                value, exc = None, e
            self._post(settle, value, exc)

        getattr(self.client, op + "_async")(*args, **kwargs).rawlink(done)
        return await within(future, timeout_s or self.op_timeout_s)

    async def blocking(self, fn, *args, timeout_s: float | None = None):
        """A kazoo call that has no async form (e.g. recursive delete), in a thread."""
        assert self.loop is not None, "ZooKeeper client not started"
        return await within(
            self.loop.run_in_executor(None, lambda: fn(*args)), timeout_s or self.op_timeout_s
        )

    def watch_data(self, path: str, fn: Callable[[bytes | None, object], None]) -> Callable:
        """`fn(data, stat)` on the loop now and on every change (None when absent).
        Returns a function that stops the watch."""
        stopped = False

        def on_change(data, stat, *_):
            if stopped:
                return False
            self._post(lambda: None if stopped else fn(data, stat))
            return None

        DataWatch(self.client, path, on_change)

        def stop() -> None:
            nonlocal stopped
            stopped = True

        return stop

    def watch_children(self, path: str, fn: Callable[[list[str]], None]) -> Callable:
        """`fn(children)` on the loop now and on every change. Returns a stopper."""
        stopped = False

        def on_change(children):
            if stopped:
                return False
            self._post(lambda: None if stopped else fn(list(children)))
            return None

        ChildrenWatch(self.client, path, on_change)

        def stop() -> None:
            nonlocal stopped
            stopped = True

        return stop
