"""What `logflume transactions` does (kafka-transactions.sh's `list`, `describe`,
`describe-producers`, `find-hanging` and `abort`), over the broker protocol with the
broker's own codec, since confluent-kafka offers no transaction admin APIs. Every
connection is made with the caller's `Security` (TLS, SASL login), built from
--command-config by the command (logflume/commands/transactions/__init__.py).

`list` asks every broker of the cluster (ListTransactions is answered by each
coordinator for its own ids); `describe` finds the id's coordinator
(FindCoordinator key type 1) and asks it (DescribeTransactions);
`describe-producers` asks a partition's leader (or `--broker-id`) for the producers
it remembers (DescribeProducers). `find-hanging` works as Kafka's tool does: the
open transactions of the partitions searched (`--topic` [`--partition`] or every
partition with a replica on `--broker-id`) whose last write is older than
`--max-transaction-timeout` minutes are candidates, and a candidate hangs when no
coordinator knows its producer id, or its coordinator's transaction does not name
the partition (no marker will ever come). `abort` writes an abort marker on
`--topic`/`--partition` at its leader (WriteTxnMarkers, which needs CLUSTER_ACTION),
Kafka's escape hatch for such a transaction, found by `--start-offset` (its first
offset, from DescribeProducers) or given by `--producer-id`/`--producer-epoch`
(`--coordinator-epoch`).
"""

from __future__ import annotations

import sys
import time

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.client import (
    PLAINTEXT,
    BlockingClient,
    SaslAuthenticationError,
    SaslClientError,
    Security,
)
from broker.transactions.state import by_topic
from common.hostport import parse_hostport
from logflume.table import Table


class ToolError(Exception):
    """A failure the command reports in one line."""


HANGING_HEADER = [
    "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
    "StartOffset", "LastTimestamp", "Duration(min)",
]  # fmt: skip
PRODUCERS_HEADER = [
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
    "LastTimestamp", "CurrentTransactionStartOffset",
]  # fmt: skip


def _metadata(bootstrap: str, timeout: float, security: Security, topics=()) -> dict:
    """Metadata v4 of `topics` (None: every topic, internal ones included), never
    creating a topic it names (v1-v3 requests auto-create where the broker allows)."""
    host, port = parse_hostport(bootstrap.split(",")[0], "--bootstrap-server")
    body = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
    }
    with BlockingClient(host, port, timeout, security=security) as c:
        return c.request(ApiKey.METADATA, 4, body)


def _brokers(bootstrap: str, timeout: float, security: Security) -> dict[int, tuple[str, int]]:
    meta = _metadata(bootstrap, timeout, security)
    return {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}


def describe_producers(
    bootstrap: str,
    partitions: list[tuple[str, int]],
    timeout: float,
    security: Security = PLAINTEXT,
    broker_id: int | None = None,
) -> dict[tuple[str, int], list[dict]]:
    """The active producers of each partition, asked of its leader (or of
    `broker_id`); ToolError for a partition that cannot be described."""
    meta = _metadata(bootstrap, timeout, security, sorted({t for t, _ in partitions}))
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
    leaders = {
        (t["name"], p["partition_index"]): p["leader_id"]
        for t in meta["topics"]
        for p in t["partitions"]
    }
    asked: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        node = broker_id if broker_id is not None else leaders.get(tp, -1)
        if node not in brokers:
            raise ToolError(f"{tp[0]}-{tp[1]}: no such partition, or no leader")
        asked.setdefault(node, []).append(tp)
    out = {}
    for node, tps in sorted(asked.items()):
        grouped = by_topic(tps)
        body = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]}
        with BlockingClient(*brokers[node], timeout, security=security) as c:
            resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, body)
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    code = ErrorCode(p["error_code"]).name
                    raise ToolError(f"{t['name']}-{p['partition_index']} on broker {node}: {code}")
                out[(t["name"], p["partition_index"])] = p["active_producers"]
    return out


def find_hanging(
    bootstrap: str,
    timeout: float,
    security: Security,
    max_minutes: int,
    topic: str | None = None,
    partition: int | None = None,
    broker_id: int | None = None,
    now_ms: int | None = None,
) -> list[tuple[str, int, dict]]:
    """The hanging transactions (see the module docstring): (topic, partition,
    producer state) sorted by partition and producer id."""
    if topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        meta = _metadata(bootstrap, timeout, security, None if topic is None else [topic])
        partitions = sorted(
            (t["name"], p["partition_index"])
            for t in meta["topics"]
            if not t["error_code"]
            for p in t["partitions"]
            if broker_id is None or broker_id in p["replica_nodes"]
        )
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    oldest = now_ms - max_minutes * 60_000
    producers = describe_producers(bootstrap, partitions, timeout, security, broker_id)
    candidates = [
        (tp, state)
        for tp, states in sorted(producers.items())
        for state in states
        if state["current_txn_start_offset"] >= 0 and state["last_timestamp"] < oldest
    ]
    if not candidates:
        return []
    pids = sorted({state["producer_id"] for _, state in candidates})
    ids = {
        r["producer_id"]: r["transactional_id"]
        for r in list_transactions(bootstrap, timeout, security=security, producer_ids=pids)
    }
    written: dict[int, set[tuple[str, int]]] = {}  # producer id -> partitions it may end
    for pid, tid in ids.items():
        try:
            state = describe_transaction(bootstrap, tid, timeout, security)
        except ToolError:
            continue  # gone meanwhile: nothing will end the transaction
        if state["producer_id"] == pid:
            written[pid] = {(t["topic"], p) for t in state["topics"] for p in t["partitions"]}
    return [
        (tp[0], tp[1], state)
        for tp, state in candidates
        if tp not in written.get(state["producer_id"], set())
    ]


def list_transactions(
    bootstrap: str,
    timeout: float,
    states=(),
    min_duration_ms: int = -1,
    security: Security = PLAINTEXT,
    producer_ids=(),
) -> list[dict]:
    """Every transaction of every broker: dicts with coordinator, transactional_id,
    producer_id, transaction_state."""
    rows = []
    for node, (host, port) in sorted(_brokers(bootstrap, timeout, security).items()):
        with BlockingClient(host, port, timeout, security=security) as c:
            body = {
                "state_filters": list(states),
                "producer_id_filters": list(producer_ids),
                "duration_filter": min_duration_ms,
            }
            resp = c.request(ApiKey.LIST_TRANSACTIONS, 1, body)
        if resp["error_code"]:
            raise ToolError(f"broker {node}: {ErrorCode(resp['error_code']).name}")
        rows += [t | {"coordinator": node} for t in resp["transaction_states"]]
    return sorted(rows, key=lambda r: r["transactional_id"])


def describe_transaction(
    bootstrap: str, tid: str, timeout: float, security: Security = PLAINTEXT
) -> dict:
    host, port = parse_hostport(bootstrap.split(",")[0], "--bootstrap-server")
    with BlockingClient(host, port, timeout, security=security) as c:
        found = c.request(ApiKey.FIND_COORDINATOR, 1, {"key": tid, "key_type": 1})
    if found["error_code"]:
        raise ToolError(f"no coordinator for '{tid}': {ErrorCode(found['error_code']).name}")
    with BlockingClient(found["host"], found["port"], timeout, security=security) as c:
        resp = c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    state = resp["transaction_states"][0]
    if state["error_code"]:
        raise ToolError(f"'{tid}': {ErrorCode(state['error_code']).name}")
    return state | {"coordinator": found["node_id"]}


def open_transaction_at(
    bootstrap: str,
    topic: str,
    partition: int,
    start_offset: int,
    timeout: float,
    security: Security = PLAINTEXT,
) -> dict:
    """The producer state of the transaction open on the partition since
    `start_offset` (ToolError when there is none)."""
    states = describe_producers(bootstrap, [(topic, partition)], timeout, security)
    for state in states[(topic, partition)]:
        if state["current_txn_start_offset"] == start_offset:
            return state
    raise ToolError(
        f"Could not find any open transactions starting at offset {start_offset} "
        f"on partition {topic}-{partition}"
    )


def abort_transaction(
    bootstrap: str,
    topic: str,
    partition: int,
    pid: int,
    epoch: int,
    coordinator_epoch: int,
    timeout: float,
    security: Security = PLAINTEXT,
) -> None:
    meta = _metadata(bootstrap, timeout, security, [topic])
    brokers = {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}
    parts = {p["partition_index"]: p for t in meta["topics"] for p in t["partitions"]}
    if partition not in parts or parts[partition]["leader_id"] not in brokers:
        raise ToolError(f"{topic}-{partition}: no such partition or no leader")
    marker = {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": False,
        "topics": [{"name": topic, "partition_indexes": [partition]}],
        "coordinator_epoch": coordinator_epoch,
    }
    leader = brokers[parts[partition]["leader_id"]]
    with BlockingClient(*leader, timeout, security=security) as c:
        resp = c.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [marker]})
    code = ErrorCode(resp["markers"][0]["topics"][0]["partitions"][0]["error_code"])
    if code:
        raise ToolError(f"{topic}-{partition}: {code.name}")


def table(header: list[str], rows) -> Table:
    """kafka-transactions.sh's table: tab-separated columns, "None" for no value."""
    out = Table(header, missing="None", sep="\t")
    for row in rows:
        out.add(*row)
    return out


def run(args, security: Security = PLAINTEXT) -> int:
    """The `logflume transactions` subcommands, connecting with `security`; the
    exit status."""
    timeout = args.timeout_ms / 1000
    try:
        if args.subcommand == "list":
            rows = list_transactions(args.bootstrap_server, timeout, security=security)
            table(
                ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                [
                    [r["transactional_id"], r["coordinator"], r["producer_id"],
                     r["transaction_state"]]
                    for r in rows
                ],
            ).print(args.output_format)  # fmt: skip
        elif args.subcommand == "describe":
            _describe(args, timeout, security).print(args.output_format)
        elif args.subcommand == "describe-producers":
            _describe_producers(args, timeout, security).print(args.output_format)
        elif args.subcommand == "abort":
            _abort(args, timeout, security)
        else:
            _find_hanging(args, timeout, security).print(args.output_format)
    except (ToolError, SaslAuthenticationError, SaslClientError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return 0


def _describe(args, timeout: float, security: Security) -> Table:
    s = describe_transaction(args.bootstrap_server, args.transactional_id, timeout, security)
    start = s["transaction_start_time_ms"]
    duration = int(time.time() * 1000) - start if start >= 0 else None
    partitions = ",".join(f"{t['topic']}-{p}" for t in s["topics"] for p in t["partitions"])
    return table(
        [
            "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs", "TopicPartitions",
        ],
        [
            [
                s["coordinator"], s["transactional_id"], s["producer_id"],
                s["producer_epoch"], s["transaction_state"], s["transaction_timeout_ms"],
                start if start >= 0 else None, duration, partitions,
            ]
        ],
    )  # fmt: skip


def _describe_producers(args, timeout: float, security: Security) -> Table:
    tp = (args.topic, args.partition)
    states = describe_producers(args.bootstrap_server, [tp], timeout, security, args.broker_id)
    return table(
        PRODUCERS_HEADER,
        [
            [
                s["producer_id"],
                s["producer_epoch"],
                s["coordinator_epoch"],
                s["last_sequence"],
                s["last_timestamp"],
                s["current_txn_start_offset"] if s["current_txn_start_offset"] >= 0 else None,
            ]
            for s in states[tp]
        ],
    )


def _abort(args, timeout: float, security: Security) -> None:
    if args.start_offset is not None:
        state = open_transaction_at(
            args.bootstrap_server, args.topic, args.partition, args.start_offset, timeout, security
        )
        pid, epoch = state["producer_id"], state["producer_epoch"]
        coordinator_epoch = max(0, state["coordinator_epoch"])
    else:
        pid, epoch = args.producer_id, args.producer_epoch
        coordinator_epoch = args.coordinator_epoch
    abort_transaction(
        args.bootstrap_server,
        args.topic,
        args.partition,
        pid,
        epoch,
        coordinator_epoch,
        timeout,
        security,
    )
    print(f"Aborted the transaction of producer {pid} on {args.topic}-{args.partition}")


def _find_hanging(args, timeout: float, security: Security) -> Table:
    now_ms = int(time.time() * 1000)
    hanging = find_hanging(
        args.bootstrap_server,
        timeout,
        security,
        args.max_transaction_timeout,
        args.topic,
        args.partition,
        args.broker_id,
        now_ms,
    )
    return table(
        HANGING_HEADER,
        [
            [
                topic,
                partition,
                s["producer_id"],
                s["producer_epoch"],
                s["coordinator_epoch"],
                s["current_txn_start_offset"],
                s["last_timestamp"],
                (now_ms - s["last_timestamp"]) // 60_000,
            ]
            for topic, partition, s in hanging
        ],
    )
