"""Graceful shutdown in a cluster: a SIGTERM'd broker, the controller included, exits
by itself with status 0, whatever the cluster is doing at that moment.

The controller used to hang for good now and then: it was SIGTERM'd while still
moving leaders (all brokers leaving at once), and a cancellation that arrived in the
same event loop iteration as a ZooKeeper answer was lost (Python 3.11's
`asyncio.wait_for`), so its event task waited forever and the test harness SIGKILLed
it 30 s later. The race is rare: the deterministic checks of the mechanism are
tests/broker/test_tasks.py and tests/common/test_aio.py; here one round of the
whole-cluster case (every cluster test's teardown is another).

The bound is a correctness bound, not a speed target: the harness SIGKILLs after
30 s, and a graceful exit needs at most the controlled shutdown wait
(`controlled.shutdown.timeout.ms`, 10 s here) plus the drain grace (10 s), and far
less with idle clients.
"""

import signal
import subprocess
import threading

from broker.protocol import ApiKey
from tests.broker.server.wire import WireClient, fetch_body
from tests.cluster.util import create_topic, producer, wait_until

EXIT_BOUND_S = 25.0
PARTITIONS = 12


def _sigterm_and_wait(brokers) -> dict[int, int | None]:
    """SIGTERM every broker of `brokers` at once; the exit code of each (None: still
    running after EXIT_BOUND_S, then SIGKILLed)."""
    for b in brokers.values():
        b.proc.send_signal(signal.SIGTERM)
    codes = {}
    for i, b in brokers.items():
        try:
            codes[i] = b.proc.wait(EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            codes[i] = None
        b.stop(10)  # closes the log file (SIGKILL if it is still running)
    return codes


def _assert_stopped_cleanly(brokers, codes) -> None:
    for i, b in brokers.items():
        text = b.log_text()
        assert codes[i] == 0, f"broker {i} exit code {codes[i]}; log tail:\n{text[-3000:]}"
        assert "did not stop within" not in text, f"broker {i}: a task ignored its cancellation"


def _produce_in_background(cluster, topic: str, stop: threading.Event) -> threading.Thread:
    def loop():
        p = producer(cluster, acks="all", **{"message.timeout.ms": 5000})
        while not stop.is_set():
            try:
                p.produce(topic, b"x" * 100)
            except BufferError:
                pass
            p.poll(0.005)
        p.flush(0)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_sigterm_to_every_broker_at_once_stops_each_gracefully(cluster_factory):
    """As the test fixtures' teardown does: the controller is told to stop while it is
    moving the leaders of all three leaving brokers, with replication and clients busy."""
    cluster = cluster_factory()
    topic = "all-at-once"
    # Many partitions: the controller is still writing their states when it stops.
    create_topic(cluster, topic, partitions=PARTITIONS)
    stop = threading.Event()
    thread = _produce_in_background(cluster, topic, stop)
    idle = [WireClient(b.port) for b in cluster.brokers.values()]
    try:
        codes = _sigterm_and_wait(cluster.brokers)
    finally:
        stop.set()
        thread.join(30)
        for c in idle:
            c.close()
    _assert_stopped_cleanly(cluster.brokers, codes)


def test_sigterm_to_the_controller_with_clients_open_and_a_frozen_peer(cluster_factory):
    """The controller alone: idle client connections and a long-poll fetch open on it,
    and another broker frozen (SIGSTOP) so its fetches and its ZooKeeper session hang."""
    cluster = cluster_factory()
    topic = "controller-stops"
    create_topic(cluster, topic, partitions=3)
    p = producer(cluster, acks="all")
    for i in range(100):
        p.produce(topic, str(i).encode(), partition=i % 3)
    assert p.flush(20) == 0
    controller_id = cluster.zk.controller()
    controller = cluster.brokers[controller_id]
    frozen = cluster.brokers[next(i for i in cluster.brokers if i != controller_id)]
    idle = [WireClient(controller.port) for _ in range(3)]
    # Waiting at the log end of a partition the controller leads (each broker leads
    # the one it is the preferred replica of), answered only by the shutdown.
    led = next(i for i in range(3) if cluster.zk.state(topic, i)["leader"] == controller_id)
    end = len(range(led, 100, 3))
    poller = WireClient(controller.port, timeout=30)
    poller.send(ApiKey.FETCH, 11, fetch_body(topic, end, led, max_wait_ms=30000))
    frozen.proc.send_signal(signal.SIGSTOP)
    try:
        codes = _sigterm_and_wait({controller_id: controller})
    finally:
        frozen.proc.send_signal(signal.SIGCONT)
        for c in (*idle, poller):
            c.close()
    _assert_stopped_cleanly({controller_id: controller}, codes)
    wait_until(lambda: cluster.zk.controller() not in (-1, controller_id), what="a new controller")
