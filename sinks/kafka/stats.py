"""Gauges of the kafka sink that explain a stalled sink, from librdkafka's statistics."""

from __future__ import annotations

import logging

import orjson

from agent.api import Metrics


class ProducerStats:
    """Gauges of one sink from librdkafka's statistics JSON (its STATISTICS.md).

    `on_stats` is the producer's `stats_cb`: librdkafka calls it from `poll()` or
    `flush()`, so on the sink's poll thread (or the thread flushing at the end),
    never on the loop. It touches nothing but its own gauges, which are thread-safe.
    """

    def __init__(self, metrics: Metrics, component: str, log: logging.Logger):
        self._metrics, self._component, self._log = metrics, component, log
        self.queue_messages = metrics.gauge(
            "logflume_agent_kafka_queue_messages",
            "Messages in the producer's queues, waiting for or in transmission (msg_cnt)",
            component=component,
        )
        self.queue_bytes = metrics.gauge(
            "logflume_agent_kafka_queue_bytes",
            "Bytes of the messages in the producer's queues (msg_size)",
            component=component,
        )
        self._brokers: dict[str, tuple] = {}  # broker name -> (up, rtt, outbuf) gauges

    def _broker(self, name: str) -> tuple:
        gauges = self._brokers.get(name)
        if gauges is None:
            m, labels = self._metrics, {"component": self._component, "broker": name}
            gauges = self._brokers[name] = (
                m.gauge(
                    "logflume_agent_kafka_broker_up",
                    "1 while the producer's connection to the broker is up (state UP)",
                    **labels,
                ),
                m.gauge(
                    "logflume_agent_kafka_broker_rtt_seconds",
                    "Average request round-trip time to the broker (last interval with requests)",
                    **labels,
                ),
                m.gauge(
                    "logflume_agent_kafka_broker_outbuf_messages",
                    "Messages in requests waiting to be sent to the broker (outbuf_msg_cnt)",
                    **labels,
                ),
            )
        return gauges

    def on_stats(self, text: str) -> None:
        try:
            stats = orjson.loads(text)
            self.queue_messages.set(stats["msg_cnt"])
            self.queue_bytes.set(stats["msg_size"])
            seen = set()
            for name, broker in stats["brokers"].items():
                if broker["nodeid"] < 0 or broker["source"] in ("internal", "logical"):
                    continue  # bootstrap placeholders and librdkafka's own handles
                up, rtt, outbuf = self._broker(name)
                up.set(1 if broker["state"] == "UP" else 0)
                if broker["rtt"]["cnt"]:  # no request in the interval: keep the last
                    rtt.set(broker["rtt"]["avg"] / 1e6)  # microseconds
                outbuf.set(broker["outbuf_msg_cnt"])
                seen.add(name)
            # librdkafka forgets learned brokers when it loses every connection (and
            # bootstraps again): they are down until they come back
            for name in self._brokers.keys() - seen:
                self._brokers[name][0].set(0)
        except (ValueError, KeyError, TypeError) as exc:  # raising would stop poll()
            self._log.warning("producer statistics not understood: %r", exc)
