"""`logflume produce`: one record per stdin line (like kafka-console-producer.sh).

With `--key-separator SEP` each line is `key SEP value` (parse.key=true); a line
without the separator is an error. Exit status 0 only if every record was
acknowledged (per --acks) within --timeout-ms.
"""

import sys

from logflume import client_config


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "produce",
        help="send stdin lines to a topic",
        description="Send one record per stdin line to a topic (like kafka-console-producer.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument("--topic", required=True, help="the topic to write")
    p.add_argument(
        "--acks",
        choices=("0", "1", "all", "-1"),
        default="all",
        help="replicas that must have a record before it counts as sent (default all)",
    )
    p.add_argument(
        "--compression",
        choices=("none", "gzip", "lz4", "snappy", "zstd"),
        default="none",
        help="batch compression codec (default none)",
    )
    p.add_argument("--key-separator", default=None, help="split each line into key SEP value")
    p.add_argument(
        "--partition", type=int, default=None, help="send every record to this partition"
    )
    p.add_argument(
        "--linger-ms", type=int, default=5, help="wait this long to fill a batch (default 5)"
    )
    p.add_argument("--timeout-ms", type=int, default=30000, help="delivery timeout")
    p.set_defaults(func=run)


def run(args) -> int:
    from confluent_kafka import KafkaException, Producer

    timeout = args.timeout_ms / 1000
    try:
        conf = client_config.client_config(
            args,
            **{
                "acks": "all" if args.acks in ("all", "-1") else args.acks,
                "compression.type": args.compression,
                "linger.ms": args.linger_ms,
                "message.timeout.ms": args.timeout_ms,
                "socket.timeout.ms": min(args.timeout_ms, 60000),
                "enable.idempotence": False,
            },
        )
        producer = Producer(conf)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        print(f"logflume produce: {client_config.describe_error(e)}", file=sys.stderr)
        return 1
    try:
        topic_meta = producer.list_topics(args.topic, timeout=timeout).topics[args.topic]
    except KafkaException as e:
        failure = client_config.authentication_failure(producer)
        failure = failure or f"cannot reach {args.bootstrap_server}: {e}"
        print(f"logflume produce: {failure}", file=sys.stderr)
        return 1
    if topic_meta.error is not None:
        print(f"logflume produce: topic {args.topic}: {topic_meta.error.str()}", file=sys.stderr)
        return 1
    errors: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(err.str())

    sep = args.key_separator.encode() if args.key_separator else None
    extra = {} if args.partition is None else {"partition": args.partition}
    sent = 0
    for lineno, raw in enumerate(sys.stdin.buffer, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        key = None
        if sep is not None:
            key, found, value = line.partition(sep)
            if not found:
                print(
                    f"logflume produce: line {lineno}: no key separator {args.key_separator!r}",
                    file=sys.stderr,
                )
                producer.flush(timeout)
                return 1
        else:
            value = line
        while True:
            try:
                producer.produce(args.topic, value, key, on_delivery=delivered, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    remaining = producer.flush(timeout + 5)
    if remaining:
        print(
            f"logflume produce: {remaining} of {sent} records not delivered in time",
            file=sys.stderr,
        )
        return 1
    if errors:
        print(
            f"logflume produce: {len(errors)} of {sent} records failed: {errors[0]}",
            file=sys.stderr,
        )
        return 1
    return 0
