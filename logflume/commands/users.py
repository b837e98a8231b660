"""`logflume users`: SCRAM users on the broker (AlterUserScramCredentials and
DescribeUserScramCredentials, what kafka-configs --entity-type users does).

    logflume users add --bootstrap-server H:P alice [--mechanism SCRAM-SHA-512] \\
        [--iterations 4096] [--password P | --password-file F]   (else read from stdin)
    logflume users delete --bootstrap-server H:P alice [--mechanism M]   (default: all it has)
    logflume users list --bootstrap-server H:P [alice ...]

The client salts the password (the broker never sees it). `--command-config` is as
for the other client commands: an admin reaching a SASL listener logs in with it.
`logflume configs --entity-type users` accepts kafka-configs' own form and uses the
functions here.
"""

import sys

from logflume import client_config

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "users",
        help="add, update, delete and list SCRAM users",
        description="Manage SCRAM users on a Kafka-compatible broker.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a user, or change its password")
    add.add_argument("name", help="the user name")
    add.add_argument(
        "--mechanism", default="SCRAM-SHA-512", choices=MECHANISMS, help="default SCRAM-SHA-512"
    )
    add.add_argument("--iterations", type=int, default=4096, help="4096 to 16384")
    secret = add.add_mutually_exclusive_group()
    secret.add_argument("--password", help="the password (visible in ps: prefer a file)")
    secret.add_argument("--password-file", metavar="FILE", help="first line is the password")
    delete = actions.add_parser("delete", help="delete a user's credentials")
    delete.add_argument("name", help="the user name")
    delete.add_argument("--mechanism", choices=MECHANISMS, help="default: all of them")
    listing = actions.add_parser("list", help="list users and their mechanisms")
    listing.add_argument("names", nargs="*", help="default: every user")
    for action in (add, delete, listing):
        client_config.add_arguments(action)
        action.add_argument("--timeout-ms", type=int, default=10000, help="give up after this long")
    p.set_defaults(func=run)


def fail(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    return ScramMechanism[name.replace("-", "_")]


def upsert(admin, user: str, mechanism: str, password: str, iterations: int, timeout: float):
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    info = ScramCredentialInfo(_mechanism(mechanism), iterations)
    change = UserScramCredentialUpsertion(user, info, password.encode())
    admin.alter_user_scram_credentials([change], request_timeout=timeout)[user].result(timeout)


def describe(admin, names: list[str], timeout: float) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)]; raises for a named user that has none."""
    if names:
        futures = admin.describe_user_scram_credentials(names, request_timeout=timeout)
        found = {n: f.result(timeout) for n, f in futures.items()}
    else:
        found = admin.describe_user_scram_credentials(request_timeout=timeout).result(timeout)
    return {
        user: [(i.mechanism.name.replace("_", "-"), i.iterations) for i in d.scram_credential_infos]
        for user, d in found.items()
    }


def delete(admin, user: str, mechanisms: list[str], timeout: float) -> None:
    from confluent_kafka.admin import UserScramCredentialDeletion

    changes = [UserScramCredentialDeletion(user, _mechanism(m)) for m in mechanisms]
    admin.alter_user_scram_credentials(changes, request_timeout=timeout)[user].result(timeout)


def _password(args) -> str:
    if args.password is not None:
        return args.password
    if args.password_file is not None:
        with open(args.password_file, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    return sys.stdin.readline().rstrip("\r\n")


def run(args) -> int:
    from confluent_kafka import KafkaException

    timeout = args.timeout_ms / 1000
    try:
        admin = client_config.admin_client(args)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return fail(client_config.describe_error(e))
    try:
        if args.action == "add":
            try:
                password = _password(args)
            except OSError as e:
                return fail(f"--password-file {args.password_file}: {e.strerror}")
            if not password:
                return fail("the password is empty")
            upsert(admin, args.name, args.mechanism, password, args.iterations, timeout)
            print(f"User {args.name}: {args.mechanism} credential set.")
        elif args.action == "delete":
            mechanisms = [args.mechanism] if args.mechanism else None
            if mechanisms is None:
                mechanisms = [m for m, _ in describe(admin, [args.name], timeout)[args.name]]
            delete(admin, args.name, mechanisms, timeout)
            print(f"User {args.name}: {', '.join(mechanisms)} deleted.")
        else:
            for user, infos in sorted(describe(admin, args.names, timeout).items()):
                creds = ", ".join(f"{m} (iterations {n})" for m, n in infos)
                print(f"{user}: {creds}")
        return 0
    except (KafkaException, ValueError, TimeoutError) as e:  # ValueError: an empty name
        return fail(client_config.request_error(e, admin, args))
