"""`logflume reassign`: move partitions between brokers, like kafka-reassign-partitions.sh
(its flags, its JSON files and its output).

    logflume reassign --bootstrap-server H:P --generate \\
        --topics-to-move-json-file topics.json --broker-list 1,2,3
    logflume reassign --bootstrap-server H:P --execute --reassignment-json-file plan.json
    logflume reassign --bootstrap-server H:P --verify --reassignment-json-file plan.json
    logflume reassign --bootstrap-server H:P --cancel --reassignment-json-file plan.json
    logflume reassign --bootstrap-server H:P --list

topics.json is `{"version": 1, "topics": [{"topic": "t"}]}`; a plan is
`{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
"log_dirs": ["any", "any"]}]}` (`log_dirs` optional, "any" only: a broker has one log
directory). `--generate` prints the current assignment and a proposal that spreads
each topic's partitions over the brokers listed, round-robin as Kafka's AdminUtils
does without racks, replicas of a partition on distinct hosts (the brokers' hosts
in Metadata; broker/cluster/assignment.py), keeping each topic's replication
factor. `--execute` prints the current assignment of the partitions it moves (save it
to roll back) and starts the moves; it refuses while some are already moving, unless
`--additional`. `--verify` tells for each partition whether its move completed;
`--cancel` cancels them (the partitions go back to their replicas before the move);
`--list` shows the moves in progress.

Throttles, as kafka-reassign-partitions.sh sets them (broker/quotas/replication.py
enforces them): `--execute --throttle N` sets `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` to N bytes/s on every broker taking part in a
move (this one's and those in progress), and on each moved topic
`leader.replication.throttled.replicas` (every current replica of its moving
partitions: `partition:broker,...`) and `follower.replication.throttled.replicas`
(the replicas being added); `--additional --throttle N` changes them while moves are
in progress. `--verify`, once no reassignment at all is in progress, and `--cancel`
remove those configs from every broker and from the plan's topics, unless
`--preserve-throttles`.

AlterPartitionReassignments and ListPartitionReassignments go to the controller
(found through Metadata), IncrementalAlterConfigs of a broker to that broker and of
topics to the first bootstrap server, over the broker's own codec
(broker/protocol/client.BlockingClient; librdkafka has no reassignment API),
connecting as --command-config says (logflume/wire_config.py).

Every failure (a flag combination the tool refuses, a malformed file, an unknown
topic or broker, an unreachable broker, the controller's refusal) is a message on
stderr and exit status 1.
"""

from __future__ import annotations

import sys

ACTIONS = ("generate", "execute", "verify", "cancel", "list")


class ReassignError(Exception):
    """The message to print on stderr."""


def add_parser(subparsers) -> None:
    from logflume import client_config

    p = subparsers.add_parser(
        "reassign",
        help="move partitions between brokers (generate, execute, verify, cancel, list)",
        description="Move partitions between brokers (like kafka-reassign-partitions.sh).",
    )
    client_config.add_arguments(p)
    p.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument(
        "--generate",
        action="store_true",
        help="propose a reassignment of the topics of --topics-to-move-json-file "
        "over --broker-list",
    )
    actions.add_argument(
        "--execute",
        action="store_true",
        help="start the reassignment of --reassignment-json-file",
    )
    actions.add_argument(
        "--verify",
        action="store_true",
        help="tell whether the reassignment of --reassignment-json-file completed",
    )
    actions.add_argument(
        "--cancel",
        action="store_true",
        help="cancel the reassignment of --reassignment-json-file",
    )
    actions.add_argument(
        "--list", action="store_true", help="list the partition reassignments in progress"
    )
    p.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='--generate: {"version": 1, "topics": [{"topic": "t"}, ...]}',
    )
    p.add_argument(
        "--broker-list",
        metavar="IDS",
        help="--generate: the brokers to spread the partitions over, e.g. 1,2,3",
    )
    p.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='--execute, --verify, --cancel: {"version": 1, "partitions": [{"topic": "t", '
        '"partition": 0, "replicas": [1, 2]}, ...]}',
    )
    p.add_argument(
        "--additional",
        action="store_true",
        help="--execute: start these moves even though others are in progress (with "
        "--throttle: change the throttle of the moves in progress)",
    )
    p.add_argument(
        "--throttle",
        type=int,
        default=-1,
        metavar="BYTES_PER_S",
        help="--execute: throttle the replication of the moving partitions to this many "
        "bytes/s on every broker taking part (run --verify until the moves complete, "
        "to remove it)",
    )
    p.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="--verify, --cancel: do not remove the broker and topic throttles",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from logflume import wire_config

    try:
        security = wire_config.security(args)
        action = next(a for a in ACTIONS if getattr(args, a))
        _check_flags(args, action)
        tool = _Tool(args.bootstrap_server, args.timeout_ms, security)
        if action == "generate":
            _generate(tool, args)
        elif action == "execute":
            _execute(tool, args)
        elif action == "verify":
            _verify(tool, _read_plan(args.reassignment_json_file), args.preserve_throttles)
        elif action == "cancel":
            _cancel(tool, _read_plan(args.reassignment_json_file), args.preserve_throttles)
        else:
            _list(tool)
    except (ReassignError, wire_config.CommandConfigError) as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0


def _check_flags(args, action: str) -> None:
    """Kafka's tool refuses a flag its action does not take, and a missing one."""
    needs = {
        "generate": ("topics_to_move_json_file", "broker_list"),
        "execute": ("reassignment_json_file",),
        "verify": ("reassignment_json_file",),
        "cancel": ("reassignment_json_file",),
        "list": (),
    }[action]
    for name in needs:
        if getattr(args, name) is None:
            raise ReassignError(f'Missing required argument "[{_flag(name)}]"')
    takes = {
        "generate": needs,
        "execute": (*needs, "additional", "throttle"),
        "verify": (*needs, "preserve_throttles"),
        "cancel": (*needs, "preserve_throttles"),
        "list": (),
    }[action]
    for name in ("topics_to_move_json_file", "broker_list", "reassignment_json_file"):
        if getattr(args, name) is not None and name not in takes:
            raise ReassignError(f'Option "[{_flag(name)}]" can\'t be used with "[--{action}]"')
    if args.additional and "additional" not in takes:
        raise ReassignError(f'Option "[--additional]" can\'t be used with "[--{action}]"')
    if args.throttle != -1 and "throttle" not in takes:
        raise ReassignError(f'Option "[--throttle]" can\'t be used with "[--{action}]"')
    if args.preserve_throttles and "preserve_throttles" not in takes:
        raise ReassignError(f'Option "[--preserve-throttles]" can\'t be used with "[--{action}]"')


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


# -- files ---------------------------------------------------------------------------


def _load_json(path: str):
    import orjson

    try:
        with open(path, "rb") as f:
            return orjson.loads(f.read())
    except OSError as e:
        raise ReassignError(f"Cannot read {path}: {e.strerror or e}") from None
    except orjson.JSONDecodeError as e:
        raise ReassignError(f"{path} is not valid JSON: {e}") from None


def _check_version(path: str, raw) -> None:
    if not isinstance(raw, dict):
        raise ReassignError(f"{path}: expected a JSON object")
    if raw.get("version", 1) != 1:
        raise ReassignError(f"Not supported version field value {raw['version']}")


def _read_topics(path: str) -> list[str]:
    raw = _load_json(path)
    _check_version(path, raw)
    entries = raw.get("topics")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("topic"), str) for e in entries
    ):
        raise ReassignError(f'{path}: "topics" must be a list of {{"topic": NAME}} objects')
    topics = [e["topic"] for e in entries]
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ReassignError(
            f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}"
        )
    return topics


Plan = dict[tuple[str, int], list[int]]


def _read_plan(path: str) -> Plan:
    """A reassignment file: (topic, partition) -> replicas, in the file's order."""
    raw = _load_json(path)
    _check_version(path, raw)
    entries = raw.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise ReassignError("Partition reassignment list cannot be empty")
    plan: Plan = {}
    for e in entries:
        if not (
            isinstance(e, dict)
            and isinstance(e.get("topic"), str)
            and isinstance(e.get("partition"), int)
            and isinstance(e.get("replicas"), list)
            and all(isinstance(r, int) for r in e["replicas"])
        ):
            raise ReassignError(
                f'{path}: each partition needs "topic" (a name), "partition" and '
                f'"replicas" (broker ids): {e}'
            )
        key = (e["topic"], e["partition"])
        name = f"{key[0]}-{key[1]}"
        replicas = list(e["replicas"])
        if key in plan:
            raise ReassignError(f"Reassignment JSON file contains duplicate partitions: {name}")
        if not replicas:
            raise ReassignError(f"Partition replica list cannot be empty: {name}")
        if len(set(replicas)) != len(replicas):
            raise ReassignError(
                "Partition replica lists may not contain duplicate entries: "
                f"{name} contains {','.join(map(str, replicas))}"
            )
        log_dirs = e.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise ReassignError(
                    f"Size of replicas list {replicas} is different from size of log dirs "
                    f"list {log_dirs} for partition {name}"
                )
            if any(d != "any" for d in log_dirs):
                raise ReassignError(
                    f'{name}: log_dirs other than "any" are not supported (a logflume '
                    "broker has one log directory)"
                )
        plan[key] = replicas
    return plan


def _format_plan(plan: Plan) -> str:
    """Kafka's reassignment JSON, partitions sorted by topic and partition."""
    import orjson

    partitions = [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())
    ]
    return orjson.dumps({"version": 1, "partitions": partitions}).decode()


def _names(keys) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


# -- the wire --------------------------------------------------------------------------


class _Tool:
    """Requests to the cluster: Metadata to any bootstrap broker, the reassignment
    APIs to the controller."""

    def __init__(self, bootstrap: str, timeout_ms: int, security):
        self.bootstrap = bootstrap.split(",")[0]
        self.timeout_ms = timeout_ms
        self.security = security
        self._meta: dict | None = None

    def _request(self, address: tuple[str, int] | None, key, version: int, body: dict) -> dict:
        from broker.protocol.client import BlockingClient, SaslAuthenticationError, SaslClientError
        from common.hostport import parse_hostport

        try:
            host, port = address or parse_hostport(self.bootstrap, "--bootstrap-server")
            with BlockingClient(
                host, port, self.timeout_ms / 1000, security=self.security
            ) as client:
                return client.request(key, version, body)
        except (ValueError, SaslAuthenticationError, SaslClientError) as e:
            raise ReassignError(str(e)) from None
        except OSError as e:
            where = f"{host}:{port}" if address else self.bootstrap
            raise ReassignError(
                f"cannot reach {where} within {self.timeout_ms} ms ({e.strerror or e})"
            ) from None

    def metadata(self) -> dict:
        """Every topic, the brokers and the controller (Metadata v1)."""
        from broker.protocol import ApiKey

        if self._meta is None:
            self._meta = self._request(None, ApiKey.METADATA, 1, {"topics": None})
        return self._meta

    def brokers(self) -> dict[int, tuple[str, int]]:
        return {b["node_id"]: (b["host"], b["port"]) for b in self.metadata()["brokers"]}

    def assignment(self) -> dict[str, list[list[int]]]:
        """Each topic's replicas per partition."""
        out = {}
        for t in self.metadata()["topics"]:
            if t["error_code"]:
                continue
            parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
            out[t["name"]] = [list(p["replica_nodes"]) for p in parts]
        return out

    def controller(self, key, body: dict) -> dict:
        """`key` (v0) asked of the controller; its top-level error as ReassignError."""
        from broker.protocol import ErrorCode

        controller = self.metadata()["controller_id"]
        address = self.brokers().get(controller)
        if address is None:
            raise ReassignError("No controller is available: try again")
        answer = self._request(address, key, 0, body)
        if answer["error_code"]:
            name = ErrorCode(answer["error_code"]).name
            raise ReassignError(f"{name}: {answer['error_message'] or 'refused'}")
        return answer

    def alter(self, wanted: dict[tuple[str, int], list[int] | None]) -> dict:
        """(topic, partition) -> (error name, message) of the partitions refused."""
        from broker.protocol import ApiKey, ErrorCode

        topics: dict[str, list[dict]] = {}
        for (t, p), replicas in wanted.items():
            topics.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
        body = {
            "timeout_ms": self.timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        answer = self.controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
        return {
            (t["name"], p["partition_index"]): (
                ErrorCode(p["error_code"]).name,
                p["error_message"],
            )
            for t in answer["responses"]
            for p in t["partitions"]
            if p["error_code"]
        }

    def alter_configs(self, broker: int | None, resources: list[dict]) -> None:
        """IncrementalAlterConfigs v0 of `resources` (broker resources to their own
        broker `broker`, topics to the bootstrap server); a refusal is ReassignError."""
        from broker.protocol import ApiKey, ErrorCode

        address = None
        if broker is not None:
            address = self.brokers().get(broker)
            if address is None:
                raise ReassignError(f"Broker {broker} is not available")
        answer = self._request(
            address,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            0,
            {"resources": resources, "validate_only": False},
        )
        for r in answer["responses"]:
            if r["error_code"]:
                name = ErrorCode(r["error_code"]).name
                raise ReassignError(
                    f"Cannot alter the configs of {r['resource_name'] or 'the broker default'}: "
                    f"{name}: {r['error_message'] or 'refused'}"
                )

    def ongoing(self, keys=None) -> dict[tuple[str, int], dict]:
        """The moves in progress (of `keys`, else all): replicas, adding, removing."""
        from broker.protocol import ApiKey

        topics = None
        if keys is not None:
            grouped: dict[str, list[int]] = {}
            for t, p in keys:
                grouped.setdefault(t, []).append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in grouped.items()]
        answer = self.controller(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            {"timeout_ms": self.timeout_ms, "topics": topics},
        )
        return {
            (t["name"], p["partition_index"]): p for t in answer["topics"] for p in t["partitions"]
        }


# -- actions ---------------------------------------------------------------------------


def _generate(tool: _Tool, args) -> None:
    from broker.cluster.assignment import (
        AssignmentError,
        assign_replicas,
        first_broker,
        host_shortfall,
    )

    topics = _read_topics(args.topics_to_move_json_file)
    try:
        wanted = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise ReassignError(f"--broker-list {args.broker_list}: broker ids, e.g. 1,2,3") from None
    duplicates = sorted({b for b in wanted if wanted.count(b) > 1})
    if duplicates:
        raise ReassignError(
            f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}"
        )
    live = tool.brokers()
    missing = [b for b in wanted if b not in live]
    if missing:
        raise ReassignError(
            f"The following brokers are not present in the cluster: {','.join(map(str, missing))}"
        )
    current_all = tool.assignment()
    unknown = [t for t in topics if t not in current_all]
    if unknown:
        raise ReassignError(f"Topic(s) {','.join(unknown)} do not exist")
    brokers: dict[int, str | None] = dict.fromkeys(wanted)
    hosts = {b: live[b][0].lower() for b in wanted}
    current: Plan = {}
    proposed: Plan = {}
    for topic in topics:
        parts = current_all[topic]
        for p, replicas in enumerate(parts):
            current[(topic, p)] = replicas
        try:
            lists = assign_replicas(
                brokers,
                len(parts),
                len(parts[0]),
                first_broker(topic, brokers),
                hosts=hosts,
            )
        except AssignmentError as e:
            raise ReassignError(f"{topic}: {e}") from None
        shortfall = host_shortfall(hosts, len(parts[0]))
        if shortfall is not None:
            print(f"Warning: {topic}: {shortfall}", file=sys.stderr)
        for p, replicas in enumerate(lists):
            proposed[(topic, p)] = replicas
    print(f"Current partition replica assignment\n{_format_plan(current)}\n")
    print(f"Proposed partition reassignment configuration\n{_format_plan(proposed)}")


def _execute(tool: _Tool, args) -> None:
    plan = _read_plan(args.reassignment_json_file)
    assignment = tool.assignment()
    unknown = sorted({t for t, _ in plan if t not in assignment})
    if unknown:
        raise ReassignError(f"Topic(s) {','.join(unknown)} do not exist")
    missing = [f"{t}-{p}" for t, p in plan if not 0 <= p < len(assignment[t])]
    if missing:
        raise ReassignError(f"Unable to find partition(s): {','.join(missing)}")
    ongoing = tool.ongoing()
    if not args.additional and ongoing:
        raise ReassignError(
            "Cannot execute because there is an existing partition assignment.  Use "
            "--additional to override this and create a new partition assignment in "
            "addition to the existing one. The --additional flag can also be used to "
            "change the throttle by resubmitting the current reassignment."
        )
    current = {(t, p): assignment[t][p] for t, p in plan}
    print(
        f"Current partition replica assignment\n\n{_format_plan(current)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if args.throttle >= 0:
        print(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed."
        )
        _set_throttles(tool, move_map(ongoing, plan, current), args.throttle)
    refused = tool.alter(dict(plan.items()))
    if refused:
        lines = [
            f"{t}-{p}: {name}: {message}" for (t, p), (name, message) in sorted(refused.items())
        ]
        raise ReassignError("Error reassigning partition(s):\n" + "\n".join(lines))
    plural = "" if len(plan) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {_names(plan)}")


def _verify(tool: _Tool, plan: Plan, preserve_throttles: bool) -> None:
    ongoing = tool.ongoing()
    assignment = tool.assignment()
    print("Status of partition reassignment:")
    for (t, p), target in sorted(plan.items()):
        name = f"{t}-{p}"
        replicas = assignment.get(t, [])
        if (t, p) in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
        elif p < len(replicas) and replicas[p] == target:
            print(f"Reassignment of partition {name} is completed.")
        elif p < len(replicas):
            print(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{','.join(map(str, replicas[p]))} rather than {','.join(map(str, target))}."
            )
        else:
            print(f"Partition {name} does not exist.")
    if not ongoing and not preserve_throttles:
        _clear_throttles(tool, plan)


def _cancel(tool: _Tool, plan: Plan, preserve_throttles: bool) -> None:
    ongoing = tool.ongoing(list(plan))
    wanted = [key for key in plan if key in ongoing]
    if not wanted:
        print("None of the specified partition reassignments are active.")
    else:
        refused = tool.alter(dict.fromkeys(wanted))
        if refused:
            lines = [
                f"{t}-{p}: {name}: {message}" for (t, p), (name, message) in sorted(refused.items())
            ]
            raise ReassignError("Error cancelling partition reassignment(s):\n" + "\n".join(lines))
        print(f"Successfully cancelled partition reassignment(s) for: {_names(wanted)}")
    if not preserve_throttles:
        _clear_throttles(tool, plan)


def _list(tool: _Tool) -> None:
    ongoing = tool.ongoing()
    if not ongoing:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for (t, p), move in sorted(ongoing.items()):
        print(
            f"{t}-{p}: replicas: {','.join(map(str, move['replicas']))}. "
            f"adding: {','.join(map(str, move['adding_replicas']))}. "
            f"removing: {','.join(map(str, move['removing_replicas']))}."
        )


# -- throttles -------------------------------------------------------------------------

Moves = dict[str, dict[int, tuple[set[int], set[int]]]]
_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
# what Kafka's tool clears on every broker: the two rates and the log-dir move throttle
_BROKER_THROTTLES = (*_RATES, "replica.alter.log.dirs.io.max.bytes.per.second")
_LEADER_REPLICAS = "leader.replication.throttled.replicas"
_FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
_SET, _DELETE = 0, 1  # IncrementalAlterConfigs operations
_BROKER, _TOPIC = 4, 2  # config resource types


def move_map(ongoing: dict[tuple[str, int], dict], plan: Plan, current: Plan) -> Moves:
    """Kafka's calculateProposedMoveMap: topic -> partition -> (sources, destinations)
    of every move in progress and of the plan's. The sources of a partition already
    moving are its replicas before that move; otherwise its current replicas."""
    moves: Moves = {}
    for (t, p), move in ongoing.items():
        adding = set(move["adding_replicas"])
        moves.setdefault(t, {})[p] = (set(move["replicas"]) - adding, adding)
    for (t, p), replicas in plan.items():
        partitions = moves.setdefault(t, {})
        sources = partitions[p][0] if p in partitions else set(current[(t, p)])
        partitions[p] = (sources, set(replicas) - sources)
    return moves


def leader_throttles(moves: Moves) -> dict[str, str]:
    """Each topic's leader.replication.throttled.replicas: every source replica of its
    moving partitions (any of them may lead), in Kafka's order (sorted as text)."""
    return {
        t: ",".join(sorted(f"{p}:{b}" for p, (sources, _) in parts.items() for b in sources))
        for t, parts in moves.items()
    }


def follower_throttles(moves: Moves) -> dict[str, str]:
    """Each topic's follower.replication.throttled.replicas: the replicas being added."""
    return {
        t: ",".join(
            sorted(f"{p}:{b}" for p, (sources, dests) in parts.items() for b in dests - sources)
        )
        for t, parts in moves.items()
    }


def _set_throttles(tool: _Tool, moves: Moves, rate: int) -> None:
    """Kafka's modifyReassignmentThrottle: the topics' replica lists, then the rate on
    every broker taking part in a move."""
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    topics = [
        {
            "resource_type": _TOPIC,
            "resource_name": t,
            "configs": [
                {"name": _LEADER_REPLICAS, "config_operation": _SET, "value": leaders[t]},
                {"name": _FOLLOWER_REPLICAS, "config_operation": _SET, "value": followers[t]},
            ],
        }
        for t in sorted(moves)
    ]
    tool.alter_configs(None, topics)
    brokers = sorted(
        {
            b
            for parts in moves.values()
            for sources, dests in parts.values()
            for b in sources | dests
        }
    )
    for b in brokers:
        configs = [{"name": k, "config_operation": _SET, "value": str(rate)} for k in _RATES]
        tool.alter_configs(
            b, [{"resource_type": _BROKER, "resource_name": str(b), "configs": configs}]
        )
    print(f"The inter-broker throttle limit was set to {rate} B/s")


def _clear_throttles(tool: _Tool, plan: Plan) -> None:
    """Kafka's clearAllThrottles: the throttle configs of every broker (those of the
    cluster and those the plan names) and of the plan's topics."""
    live = tool.brokers()
    brokers = sorted(set(live) | {b for replicas in plan.values() for b in replicas})
    plural = "" if len(brokers) == 1 else "s"
    print(f"Clearing broker-level throttles on broker{plural} {','.join(map(str, brokers))}")
    for b in brokers:
        if b not in live:
            continue  # a broker the plan names that is not in the cluster holds nothing
        configs = [
            {"name": k, "config_operation": _DELETE, "value": None} for k in _BROKER_THROTTLES
        ]
        tool.alter_configs(
            b, [{"resource_type": _BROKER, "resource_name": str(b), "configs": configs}]
        )
    topics = sorted({t for t, _ in plan})
    plural = "" if len(topics) == 1 else "s"
    print(f"Clearing topic-level throttles on topic{plural} {','.join(topics)}")
    deleted = [
        {"name": k, "config_operation": _DELETE, "value": None}
        for k in (_LEADER_REPLICAS, _FOLLOWER_REPLICAS)
    ]
    tool.alter_configs(
        None,
        [{"resource_type": _TOPIC, "resource_name": t, "configs": deleted} for t in topics],
    )
