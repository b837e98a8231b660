"""`logflume consume`: print one record value per line (like kafka-console-consumer.sh).

Without --group the consumer assigns partitions itself and reads from explicit
offsets (the beginning, the end, or --offset), committing nothing. With --group it
subscribes as a member of that consumer group and commits as it goes.

It stops after --max-messages records, or when no record arrived for --timeout-ms
(if given); otherwise it runs until interrupted. A null value prints as "null".
"""

import signal
import sys
import time

from logflume import client_config


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "consume",
        help="print a topic's records, one value per line",
        description="Print records of a topic, one value per line (like kafka-console-consumer.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument("--topic", required=True, help="the topic to read")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: only new records)",
    )
    p.add_argument("--group", default=None, help="consume as a member of this group")
    p.add_argument("--max-messages", type=int, default=None, help="exit after this many records")
    p.add_argument(
        "--timeout-ms", type=int, default=None, help="exit after this long without a record"
    )
    p.add_argument(
        "--partition", type=int, default=None, help="read only this partition (default: all)"
    )
    p.add_argument("--offset", type=int, default=None, help="start offset (with --partition)")
    p.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"logflume consume: {message}", file=sys.stderr)
    return 1


def run(args) -> int:
    from confluent_kafka import (
        OFFSET_BEGINNING,
        OFFSET_END,
        Consumer,
        KafkaException,
        TopicPartition,
    )

    if args.offset is not None and args.partition is None:
        return _error("--offset needs --partition")
    connect_timeout = (args.timeout_ms or 10000) / 1000
    try:
        conf = client_config.client_config(
            args,
            **{
                "group.id": args.group or "logflume-console-consumer",
                "enable.auto.commit": args.group is not None,
                "auto.offset.reset": "earliest" if args.from_beginning else "latest",
                "enable.partition.eof": False,
            },
        )
        consumer = Consumer(conf)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return _error(client_config.describe_error(e))
    try:
        meta = consumer.list_topics(args.topic, timeout=connect_timeout).topics[args.topic]
    except KafkaException as e:
        unreachable = f"cannot reach {args.bootstrap_server}: {e}"
        failure = client_config.authentication_failure(consumer)
        consumer.close()
        return _error(failure or unreachable)
    if meta.error is not None:
        consumer.close()
        return _error(f"topic {args.topic}: {meta.error.str()}")
    if args.group:
        consumer.subscribe([args.topic])
    else:
        if args.partition is not None:
            if args.partition not in meta.partitions:
                consumer.close()
                return _error(f"topic {args.topic} has no partition {args.partition}")
            partitions = [args.partition]
        else:
            partitions = sorted(meta.partitions)
        start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
        if args.offset is not None:
            start = args.offset
        consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while not stopping:
            if args.max_messages is not None and count >= args.max_messages:
                break
            want = 1000 if args.max_messages is None else min(1000, args.max_messages - count)
            batch = consumer.consume(num_messages=want, timeout=0.2)
            if not batch:
                if (
                    args.timeout_ms is not None
                    and (time.monotonic() - last) * 1000 >= args.timeout_ms
                ):
                    break
                continue
            last = time.monotonic()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    if err.fatal():
                        return _error(err.str())
                    continue
                value = msg.value()
                line = b"null" if value is None else value
                if args.print_key:
                    key = msg.key()
                    line = (b"null" if key is None else key) + b"\t" + line
                out.write(line + b"\n")
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        out.flush()
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
