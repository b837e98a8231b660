"""`logflume certs`: trial TLS material for the broker and its clients.

Writes into DIR a CA (`ca.crt`, `ca.key`), a broker certificate (`broker.pem`: key
and certificate, Kafka's PEM keystore; SAN localhost, 127.0.0.1 and every --host)
and one client certificate per --client NAME (`NAME.pem`, `NAME.crt`, `NAME.key`,
subject CN=NAME, so its principal is `User:CN=NAME,O=logflume`); keys are mode 0600.
It writes and prints the properties that use them: `server.properties` (an SSL
listener, mutual TLS when clients were asked for), `client.properties` (Kafka's Java
client names, for `--command-config`) and `librdkafka.properties` (for the first
client, or server verification only). An existing CA in DIR is reused, so
more clients can be added later. For trying TLS out, not a PKI.
"""

import sys
from pathlib import Path

DEFAULT_LISTEN = "127.0.0.1:9093"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "certs",
        help="write a trial CA, broker and client certificates (PEM)",
        description="Write a trial CA, a broker certificate and client certificates as PEM "
        "files into DIR, and print the broker and client properties that use them.",
    )
    p.add_argument("dir", help="directory to write the PEM files into (created)")
    p.add_argument(
        "--host",
        action="append",
        default=[],
        help="another host name or IP address of the broker (repeatable)",
    )
    p.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME",
        help="write a client certificate with CN=NAME (repeatable)",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"HOST:PORT of the SSL listener in the printed properties (default {DEFAULT_LISTEN})",
    )
    p.add_argument("--days", type=int, default=825, help="validity in days (default 825)")
    p.set_defaults(func=run)


def run(args) -> int:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    from common import certs

    out = Path(args.dir).resolve()
    if args.days <= 0:
        print("logflume certs: --days must be > 0", file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
        ca_crt, ca_key = out / "ca.crt", out / "ca.key"
        if ca_crt.exists() and ca_key.exists():
            private = load_pem_private_key(ca_key.read_bytes(), None)
            if not isinstance(private, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{ca_key}: not an EC private key (the kind this command makes)")
            ca = certs.Issued(private, x509.load_pem_x509_certificate(ca_crt.read_bytes()))
        else:
            ca = certs.new_ca(valid_days=args.days)
            certs.write_ca(out, ca)
        hosts = ["localhost", "127.0.0.1", *args.host]
        broker = certs.issue(ca, hosts[-1] if args.host else "localhost", hosts=hosts, server=True)
        keystore = certs.write_keystore(out, "broker", broker)
        for name in args.client:
            certs.write_keystore(out, name, certs.issue(ca, name, valid_days=args.days))
    except (OSError, ValueError) as e:
        print(f"logflume certs: {e}", file=sys.stderr)
        return 1
    first = args.client[0] if args.client else None
    broker_props = {
        "listeners": f"SSL://{args.listen}",
        "security.inter.broker.protocol": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_crt),
    }
    java = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_crt),
    }
    rdkafka = {"security.protocol": "ssl", "ssl.ca.location": str(ca_crt)}
    if first:
        broker_props["ssl.client.auth"] = "required"
        java |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": f"{out / first}.pem"}
        rdkafka |= {
            "ssl.certificate.location": f"{out / first}.crt",
            "ssl.key.location": f"{out / first}.key",
        }
    files = [
        ("server.properties", "broker properties: logflume broker --config", broker_props),
        ("client.properties", "Kafka's Java clients, logflume --command-config", java),
        ("librdkafka.properties", "librdkafka clients: kcat -F, confluent-kafka", rdkafka),
    ]
    print(f"# wrote {out}: ca.crt, broker.pem" + "".join(f", {n}.pem" for n in args.client))
    for name, what, props in files:
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        (out / name).write_text(f"# {what}\n{text}")
        print(f"\n# {out / name} ({what})\n{text}", end="")
    return 0
