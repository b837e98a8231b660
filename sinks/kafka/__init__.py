"""The `kafka` sink (`type: kafka`, also `type: broker`): agent events to Kafka
records, delivered at least once or exactly once.

    sink.py           the plugin: builds a producer and a strategy for each run
    config.py         its keys, their checks, the librdkafka settings they make
    security.py       the `tls:` and `sasl:` blocks
    records.py        events -> records: topic, key (templates.py) and headers
    producer.py       the producer and the narrow interfaces the strategies use
    at_least_once.py  the default strategy: acknowledged rounds, retries
    exactly_once.py   one transaction per take, with the positions (positions.py)
    dead_letters.py   the dead-letter topic's records
    metrics.py        the sink's series; stats.py: librdkafka's statistics

sink.py imports the others and no module imports it; the strategies know the
producer only through producer.py's interfaces, and nothing of the sink.
"""

from sinks.kafka.sink import KafkaSink

__all__ = ["KafkaSink"]
