"""The asyncio network shell: listener, connections, idle sweep, signals, shutdown.

`run(config)` is what `logflume broker` calls. It sets glibc's malloc thresholds
(`allocator.py`: produce buffers reused, not faulted in afresh), starts the `BrokerCore` (logs,
topics, duties), binds every listener in `listeners` (an SSL one is a `tls_accept.TlsListener`, with
the context `tls.server_context` built from its ssl.* settings before anything is
bound), and serves until SIGTERM or SIGINT. Then
it shuts down gracefully: stop accepting, stop reading new requests, answer the
waiting long-poll fetches and acks=all produces with what is there now, let queued
responses drain (within `SHUTDOWN_GRACE_S`), close connections, then flush the logs
and write the clean-shutdown marker (`LogManager.close()`), and exit 0.

Event loop: the stdlib loop is the default, because `loop.sendfile` is zero-copy
only there; `--event-loop uvloop` selects uvloop (measured in bench/RESULTS.md).
Fetch responses first try `os.sendfile` on the socket directly in either case.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time

from broker.config import BrokerConfig, ConfigError
from broker.sasl.settings import server_factories
from broker.server import allocator, tls
from broker.server.connection import Connection
from broker.server.core import BrokerCore
from broker.server.dispatch import load_handlers
from broker.server.principal import parse_rules
from broker.server.tls_accept import TlsListener
from common.prometheus import MetricsServer

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 10.0


class BrokerServer:
    """Listener plus the set of live connections. Event-loop only."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        load_handlers()
        self.core = BrokerCore(config)
        self.connections: set[Connection] = set()
        self.core.metrics.open_connections = self.connections
        self.direct_sendfile = hasattr(os, "sendfile")
        self.loop_sendfile = False
        self.fenced = False
        self.port: int | None = None  # the first listener's bound port
        self._servers: list[asyncio.Server] = []  # the plaintext listeners
        self._tls_listeners: list[TlsListener] = []
        self._contexts = self._tls_contexts()
        self.core.reconfigurables.append(TlsRotation(self))
        self.sasl_factories = {
            name: server_factories(sasl, self._scram_lookup) for name, sasl in config.sasl.items()
        }
        self._sweeper: asyncio.Task | None = None
        self.metrics_server: MetricsServer | None = None

    @property
    def txn_verifier(self):
        """KIP-890's verifier, kept on the core where Produce reads it (see
        broker/server/txn_verification.py); None: transactional writes unverified."""
        return self.core.txn_verifier

    @txn_verifier.setter
    def txn_verifier(self, verifier) -> None:
        self.core.txn_verifier = verifier

    async def start(self) -> None:
        await self.core.start()
        loop = asyncio.get_running_loop()
        self.loop_sendfile = isinstance(loop, asyncio.BaseEventLoop) and hasattr(
            loop, "_sendfile_native"
        )
        if self.config.metrics_listen is not None:
            # Before the listeners: a client that can connect finds /health and
            # /metrics answering (/health says 503 until a listener is bound).
            host, port = self.config.metrics_listen
            self.metrics_server = MetricsServer(self.core.metrics.registry, self.health, host, port)
            await self.metrics_server.start()
            log.info("metrics on http://%s:%d/metrics", host, self.metrics_server.port)
        for listener in self.config.listeners.listeners:
            port = await self._bind(listener)
            self.core.bound_ports[listener.name] = port
            self.port = self.port or port
            adv_host, adv_port = self.core.advertised(listener.name)
            log.info(
                "listener %s (%s) on %s:%d, advertised as %s:%d",
                listener.name,
                listener.protocol,
                listener.host,
                port,
                adv_host,
                adv_port,
            )
        self.core.cluster.fence_listeners.append(self._fenced)
        log.info(
            "serving: broker.id %d, cluster %s, %s loop, inter-broker listener %s",
            self.core.broker_id,
            self.core.cluster_id,
            type(loop).__module__.split(".")[0],
            self.config.listeners.inter_broker,
        )
        idle_ms = self.config["connections.max.idle.ms"]
        if idle_ms > 0:
            self._sweeper = asyncio.create_task(self._sweep_idle(idle_ms / 1000))

    def _tls_contexts(self) -> dict[str, tuple]:
        """(SSLContext, principal mapping rules) per SSL listener; ConfigError before
        anything starts when the TLS material is wrong."""
        out = {}
        for listener in self.config.listeners.listeners:
            if listener.tls:
                settings = self.config.ssl_settings(listener.name)
                try:
                    rules = parse_rules(str(settings["ssl.principal.mapping.rules"]))
                except ValueError as e:
                    raise ConfigError(str(e)) from None
                out[listener.name] = (tls.server_context(settings, listener.name), rules)
        for name in self.config.client_auth_not_applied():
            log.warning(
                "ssl.client.auth applies to SSL listeners only: SASL_SSL listener %s asks "
                "for no client certificate (set listener.name.%s.ssl.client.auth for it)",
                name,
                name.lower(),
            )
        inter = self.config.listeners.inter_broker
        if self.config["zookeeper.connect"] is not None and inter in out:
            # what replica fetchers will use: a configuration error, before anything starts
            tls.client_context(self.config.ssl_settings(inter))
        return out

    async def _bind(self, listener) -> int:
        """Start accepting on `listener`; the port bound."""
        if listener.tls:
            tls_listener = TlsListener(self, listener, *self._contexts[listener.name])
            self._tls_listeners.append(tls_listener)
            return await tls_listener.start()
        server = await asyncio.get_running_loop().create_server(
            lambda: self.make_connection(listener.name),
            listener.host or None,
            listener.port,
            reuse_address=True,
            backlog=1024,
        )
        self._servers.append(server)
        return server.sockets[0].getsockname()[1]

    def _scram_lookup(self, user: str, mechanism: str):
        return self.core.scram.get(user, mechanism)

    def make_connection(self, listener: str, identify=None) -> Connection:
        return Connection(self, listener, identify)

    def health(self) -> tuple[bool, dict]:
        """Ready when serving clients: listening, and in a cluster registered in
        ZooKeeper and not fenced from it."""
        ready = bool(self.core.bound_ports) and not self.fenced and self.core.cluster.registered
        return ready, {
            "broker_id": self.core.broker_id,
            "partitions": len(self.core.replicas.partitions),
            "fenced": self.fenced,
        }

    def _fenced(self, fenced: bool) -> None:
        """A broker fenced from ZooKeeper (broker.cluster.lease) is no use to clients:
        it leads nothing and its view of the cluster is stale. It drops its connections
        (answers already queued, such as NOT_LEADER_OR_FOLLOWER for waiting produces,
        go out first) and resets new ones at once until ZooKeeper answers again, so
        every client asks another broker who leads now. Answering Metadata without
        leaders is not enough: kafkajs retries LEADER_NOT_AVAILABLE on the same broker
        for as long as it gets that answer. (The listener stays open: an asyncio server
        closed while it accepts a connection leaves that connection hanging.)"""
        self.fenced = fenced
        if fenced:
            log.warning("not serving clients until ZooKeeper answers again")
            # Soon, not now: requests being handled (a produce that found the lease run
            # out) and the waiting produces failed by the step-down queue their answers
            # first.
            asyncio.get_running_loop().call_soon(self._drop_clients)
        else:
            log.info("serving clients again")

    def _drop_clients(self) -> None:
        for conn in list(self.connections):
            conn.close("broker fenced from ZooKeeper", graceful=True)

    async def _sweep_idle(self, idle_s: float) -> None:
        period = max(0.05, min(idle_s / 4, 30.0))
        while True:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - idle_s
            for conn in list(self.connections):
                if not conn.busy and conn.last_active < cutoff:
                    conn.close(f"idle for more than {idle_s * 1000:.0f} ms")

    async def shutdown(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        await self.core.controlled_shutdown()
        log.info("shutting down: %d connection(s) open", len(self.connections))
        for server in self._servers:
            server.close()
        for tls_listener in self._tls_listeners:
            tls_listener.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.connections):
            conn.stop_reading()
        self.core.complete_delayed()
        waiters = [c.wait_drained() for c in self.connections if c.busy]
        if waiters:
            await asyncio.wait(waiters, timeout=grace_s)
        for conn in list(self.connections):
            conn.close("broker shutting down", graceful=True)
        await asyncio.sleep(0)
        if self.metrics_server is not None:
            await self.metrics_server.stop()
        await self.core.stop()


class TlsRotation:
    """The SSL listeners as dynamic broker configs change their key material
    (`listener.name.<l>.ssl.keystore.location` ...): the new context is built and
    checked first (broker.server.tls), then new connections get it; established
    connections keep theirs, as in Kafka. `reload` re-reads keystore and truststore
    files rewritten in place when an alter names them again unchanged (Kafka's
    reloadUpdatedFilesWithoutConfigChange)."""

    def __init__(self, server: BrokerServer):
        self.server = server
        self.settings = {name: server.config.ssl_settings(name) for name in server._contexts}
        self.certs = {name: tls.leaf_certificate(s) for name, s in self.settings.items()}
        self.stamps = {name: _stamps(s) for name, s in self.settings.items()}

    def validate(self, new: BrokerConfig) -> None:
        for name, old in self.settings.items():
            settings = new.ssl_settings(name)
            if settings != old:
                tls.server_context(settings, name)
                tls.check_keystore_update(self.certs[name], settings, name)

    def reconfigure(self) -> None:
        for name, old in self.settings.items():
            settings = self.server.config.ssl_settings(name)
            if settings != old:
                self._use(name, settings)

    def reload(self, new: BrokerConfig) -> None:
        for name, old in self.settings.items():
            settings = new.ssl_settings(name)
            if settings == old and _stamps(settings) != self.stamps[name]:
                tls.server_context(settings, name)
                tls.check_keystore_update(self.certs[name], settings, name)
                self._use(name, settings)

    def _use(self, name: str, settings: dict) -> None:
        context = tls.server_context(settings, name)
        _, rules = self.server._contexts[name]
        self.server._contexts[name] = (context, rules)
        for tls_listener in self.server._tls_listeners:
            if tls_listener.listener.name == name:
                tls_listener.context = context
        self.settings[name] = settings
        self.stamps[name] = _stamps(settings)
        self.certs[name] = cert = tls.leaf_certificate(settings)
        log.info(
            "listener %s: new TLS key material for new connections (certificate serial %s)",
            name,
            None if cert is None else format(cert.serial_number, "x"),
        )


def _stamps(settings: dict) -> tuple:
    """When the keystore and truststore files were last written (None: no file)."""
    out = []
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        try:
            out.append(os.stat(str(settings[key])).st_mtime_ns if settings[key] else None)
        except OSError:
            out.append(None)
    return tuple(out)


def run(config: BrokerConfig, event_loop: str = "asyncio") -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code."""
    allocator.tune()

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            server = BrokerServer(config)
        except ConfigError as e:
            log.error("configuration error: %s", e)
            return 2
        try:
            await server.start()
        except OSError as e:
            log.error("cannot start broker: %s", e)
            await server.core.stop()
            return 1
        await stop.wait()
        await server.shutdown()
        log.info("broker stopped")
        return 0

    if event_loop == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())
