"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), and the
SCRAM credential store behind them (`core.scram`: a file on a single node, ZooKeeper
in a cluster; the SASL listeners' ScramServer reads it through
BrokerServer._scram_lookup).

Kafka's rules: the client salts the password (AlterUserScramCredentials carries salt
and SaltedPassword, never the password); iterations must be within
[4096, 16384]; an unknown mechanism is UNSUPPORTED_SASL_MECHANISM; an empty user
name or bad iterations UNACCEPTABLE_CREDENTIAL; a user altered twice for one
mechanism in one request DUPLICATE_RESOURCE; deleting a credential that does not
exist, or describing a user without any, RESOURCE_NOT_FOUND. One result per user:
the first error of any of its alterations, none applied for that user. With an
authorizer, describing needs DESCRIBE and altering ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED: for the whole request, or for each user).
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential
from broker.server.authz import RT, Op, allowed
from broker.server.dispatch import answer_when_written, handles

MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_NUMBERS = {v: k for k, v in MECHANISM_IDS.items()}


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
def describe_user_scram_credentials(ctx, body):
    if not allowed(ctx, Op.DESCRIBE, RT.CLUSTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": None,
            "results": [],
        }
    store = ctx.core.scram
    names = [u["name"] for u in body["users"] or []]
    results = []
    if not names:
        names = sorted(store.users)
    seen: set[str] = set()
    for name in names:
        creds = store.users.get(name, {})
        if name in seen:
            code, msg = (
                ErrorCode.DUPLICATE_RESOURCE,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
            )
        elif not creds:
            code, msg = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            code, msg = ErrorCode.NONE, None
        seen.add(name)
        infos = [
            {"mechanism": MECHANISM_NUMBERS[m], "iterations": c.iterations}
            for m, c in sorted(creds.items())
            if code == ErrorCode.NONE
        ]
        results.append(
            {"user": name, "error_code": code, "error_message": msg, "credential_infos": infos}
        )
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _check(name: str, mechanism: int, iterations: int | None, seen: set) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_IDS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if (name, mechanism) in seen:
        return (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
    seen.add((name, mechanism))
    if iterations is not None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Iterations {iterations} must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
        )
    return None


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
def alter_user_scram_credentials(ctx, body):
    if not allowed(ctx, Op.ALTER, RT.CLUSTER):
        names = [c["name"] for c in (*body["deletions"], *body["upsertions"])]
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return {
            "throttle_time_ms": 0,
            "results": [
                {"user": n, "error_code": denied, "error_message": None}
                for n in dict.fromkeys(names)
            ],
        }
    store = ctx.core.scram
    errors: dict[str, tuple[int, str]] = {}
    seen: set = set()
    users: list[str] = []
    for d in body["deletions"]:
        users.append(d["name"])
        err = _check(d["name"], d["mechanism"], None, seen)
        if err is None and store.get(d["name"], MECHANISM_IDS[d["mechanism"]]) is None:
            err = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to delete a user credential that does not exist: {d['name']}",
            )
        if err is not None:
            errors.setdefault(d["name"], err)
    for u in body["upsertions"]:
        users.append(u["name"])
        err = _check(u["name"], u["mechanism"], u["iterations"], seen)
        if err is None and (not u["salt"] or not u["salted_password"]):
            err = err or (
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                "Salt and salted password are required",
            )
        if err is not None:
            errors.setdefault(u["name"], err)
    changes: dict[str, dict] = {}
    for d in body["deletions"]:
        if d["name"] not in errors:
            changes.setdefault(d["name"], {})[MECHANISM_IDS[d["mechanism"]]] = None
    for u in body["upsertions"]:
        if u["name"] not in errors:
            mechanism = MECHANISM_IDS[u["mechanism"]]
            changes.setdefault(u["name"], {})[mechanism] = ScramCredential.from_salted_password(
                mechanism, u["salt"], u["salted_password"], u["iterations"]
            )
    results = []
    for name in dict.fromkeys(users):
        code, msg = errors.get(name, (ErrorCode.NONE, None))
        results.append({"user": name, "error_code": code, "error_message": msg})
    response = {"throttle_time_ms": 0, "results": results}
    written = store.apply(changes)
    if written is None:
        return response
    return answer_when_written(written, response)
