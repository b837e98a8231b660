"""What `logflume transactions` does (kafka-transactions.sh's `list`, `describe`
and `find-hanging`), over the broker protocol with the broker's own codec, since
confluent-kafka offers no transaction admin APIs. Every connection is made with
the caller's `Security` (TLS, SASL login), built from --command-config by the
command (logflume/commands/transactions.py).

`list` asks every broker of the cluster (ListTransactions is answered by each
coordinator for its own ids); `describe` finds the id's coordinator
(FindCoordinator key type 1) and asks it (DescribeTransactions); `find-hanging`
lists the ongoing transactions older than `--max-transaction-timeout` minutes (the
ones Kafka's tool reports as possibly hanging); `abort` writes an abort marker for
`--producer-id`/`--producer-epoch`/`--coordinator-epoch` on `--topic`/`--partition`
at its leader (WriteTxnMarkers, which needs CLUSTER_ACTION), Kafka's escape hatch
for a transaction no coordinator will end. Kafka's `--start-offset` form needs
DescribeProducers, which the broker does not serve.
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
from common.hostport import parse_hostport


class ToolError(Exception):
    """A failure the command reports in one line."""


def _brokers(bootstrap: str, timeout: float, security: Security) -> dict[int, tuple[str, int]]:
    host, port = parse_hostport(bootstrap.split(",")[0], "--bootstrap-server")
    with BlockingClient(host, port, timeout, security=security) as c:
        meta = c.request(ApiKey.METADATA, 1, {"topics": []})
    return {b["node_id"]: (b["host"], b["port"]) for b in meta["brokers"]}


def list_transactions(
    bootstrap: str,
    timeout: float,
    states=(),
    min_duration_ms: int = -1,
    security: Security = PLAINTEXT,
) -> list[dict]:
    """Every transaction of every broker: dicts with coordinator, transactional_id,
    producer_id, transaction_state."""
    rows = []
    for node, (host, port) in sorted(_brokers(bootstrap, timeout, security).items()):
        with BlockingClient(host, port, timeout, security=security) as c:
            body = {
                "state_filters": list(states),
                "producer_id_filters": [],
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
    host, port = parse_hostport(bootstrap.split(",")[0], "--bootstrap-server")
    with BlockingClient(host, port, timeout, security=security) as c:
        meta = c.request(ApiKey.METADATA, 1, {"topics": [{"name": topic}]})
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


def print_table(header: list[str], rows: list[list[str]], out=sys.stdout) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print(
            "\t".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip(), file=out
        )


def run(args, security: Security = PLAINTEXT) -> int:
    """The `logflume transactions` subcommands, connecting with `security`; the
    exit status."""
    timeout = args.timeout_ms / 1000
    try:
        if args.subcommand == "list":
            rows = list_transactions(args.bootstrap_server, timeout, security=security)
            print_table(
                ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                [
                    [
                        r["transactional_id"],
                        str(r["coordinator"]),
                        str(r["producer_id"]),
                        r["transaction_state"],
                    ]
                    for r in rows
                ],
            )
        elif args.subcommand == "describe":
            _describe(args, timeout, security)
        elif args.subcommand == "abort":
            abort_transaction(
                args.bootstrap_server,
                args.topic,
                args.partition,
                args.producer_id,
                args.producer_epoch,
                args.coordinator_epoch,
                timeout,
                security,
            )
            print(
                f"Aborted the transaction of producer {args.producer_id} on "
                f"{args.topic}-{args.partition}"
            )
        else:
            _find_hanging(args, timeout, security)
    except (ToolError, SaslAuthenticationError, SaslClientError, OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return 0


def _describe(args, timeout: float, security: Security) -> None:
    s = describe_transaction(args.bootstrap_server, args.transactional_id, timeout, security)
    start = s["transaction_start_time_ms"]
    duration = str(int(time.time() * 1000) - start) if start >= 0 else "None"
    partitions = ",".join(f"{t['topic']}-{p}" for t in s["topics"] for p in t["partitions"])
    print_table(
        [
            "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs", "TopicPartitions",
        ],
        [
            [
                str(s["coordinator"]), s["transactional_id"], str(s["producer_id"]),
                str(s["producer_epoch"]), s["transaction_state"], str(s["transaction_timeout_ms"]),
                str(start) if start >= 0 else "None", duration, partitions,
            ]
        ],
    )  # fmt: skip


def _find_hanging(args, timeout: float, security: Security) -> None:
    minutes = args.max_transaction_timeout
    rows = list_transactions(
        args.bootstrap_server, timeout, ["Ongoing"], minutes * 60_000, security
    )
    print_table(
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        [
            [
                r["transactional_id"],
                str(r["coordinator"]),
                str(r["producer_id"]),
                r["transaction_state"],
            ]
            for r in rows
        ],
    )
