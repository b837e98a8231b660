"""Trial TLS material: a CA, broker and client certificates as PEM files.

Backs `logflume certs` and the tests (which also need an expired certificate and one
from another CA, hence `valid_days` may be negative and `new_ca` may be called
twice). Keys are EC P-256, written with mode 0600; certificates are signed with
SHA-256. Not a PKI: a CA for trying TLS out and for tests.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_PEM = serialization.Encoding.PEM


@dataclasses.dataclass(frozen=True)
class Issued:
    """A private key and its certificate."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def key_pem(self, password: bytes | None = None) -> bytes:
        encryption = (
            serialization.BestAvailableEncryption(password)
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption)

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(_PEM)


def _name(cn: str, org: str, unit: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _window(valid_days: int) -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    if valid_days > 0:
        return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=valid_days)
    # Expired: valid for a day that ended |valid_days| days ago (at least one).
    end = now - datetime.timedelta(days=max(1, -valid_days))
    return end - datetime.timedelta(days=1), end


def new_ca(cn: str = "logflume trial CA", org: str = "logflume", valid_days: int = 825) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(cn, org)
    start, end = _window(valid_days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, cert)


def issue(
    ca: Issued,
    cn: str,
    *,
    hosts: Sequence[str] = (),
    org: str = "logflume",
    unit: str | None = None,
    server: bool = False,
    valid_days: int = 825,
) -> Issued:
    """A certificate signed by `ca`: a server one (hosts as SAN DNS names or IP
    addresses, serverAuth and clientAuth: brokers are clients of each other) or a
    client one (clientAuth)."""
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _window(valid_days)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org, unit))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in dict.fromkeys(hosts):
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` readable by the owner only (created 0600, never wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def write_keystore(directory: Path, name: str, issued: Issued) -> Path:
    """`<name>.pem`: the private key then the certificate, as Kafka's PEM keystore
    (`ssl.keystore.location`) takes them; also `<name>.key` and `<name>.crt` alone,
    the form most clients ask for. Returns the combined file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    combined = directory / f"{name}.pem"
    write_private(combined, issued.key_pem() + issued.cert_pem())
    write_private(directory / f"{name}.key", issued.key_pem())
    (directory / f"{name}.crt").write_bytes(issued.cert_pem())
    return combined


def write_ca(directory: Path, ca: Issued, name: str = "ca") -> Path:
    """`<name>.crt` (the truststore) and `<name>.key` (0600, to issue more)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_private(directory / f"{name}.key", ca.key_pem())
    path = directory / f"{name}.crt"
    path.write_bytes(ca.cert_pem())
    return path
