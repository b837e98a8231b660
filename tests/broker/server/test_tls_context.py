"""The SSLContext builder (broker.server.tls) and the principal of a client
certificate (broker.server.principal): pure, no sockets but a socketpair for a
handshake between two contexts."""

import socket
import ssl
import threading
import warnings

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from broker.config import KEYS, ConfigError
from broker.server.principal import ANONYMOUS, NoMatchingRule, parse_rules, principal
from broker.server.tls import client_context, normalize_pem, server_context
from common import certs


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = certs.new_ca()
    broker = certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True)
    client = certs.issue(ca, "web1", org="acme", unit="ops")
    return {
        "dir": d,
        "ca": certs.write_ca(d, ca),
        "ca_pem": ca.cert_pem().decode(),
        "broker": broker,
        "broker_pem": certs.write_keystore(d, "broker", broker),
        "client": client,
        "client_pem": certs.write_keystore(d, "client", client),
    }


def _settings(**values):
    base = {name: key.default for name, key in KEYS.items() if name.startswith("ssl.")}
    base.update({k.replace("_", "."): v for k, v in values.items()})
    return base


def _pem_file(pki, **extra):
    values = {
        "ssl_keystore_type": "PEM",
        "ssl_keystore_location": str(pki["broker_pem"]),
        "ssl_truststore_type": "PEM",
        "ssl_truststore_location": str(pki["ca"]),
    }
    return _settings(**(values | extra))


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext):
    """Run a TLS handshake over a socketpair; (server-side peer cert DER or None,
    client error or None)."""
    a, b = socket.socketpair()
    result = {}

    def serve():
        try:
            with server.wrap_socket(a, server_side=True) as s:
                result["der"] = s.getpeercert(binary_form=True)
                s.recv(1)
        except (ssl.SSLError, OSError) as e:
            result["server_error"] = e

    t = threading.Thread(target=serve)
    t.start()
    error = None
    try:
        with client.wrap_socket(b, server_hostname="localhost") as c:
            c.sendall(b"x")
    except (ssl.SSLError, OSError) as e:
        error = e
    t.join(5)
    a.close()
    b.close()
    return result.get("der"), error or result.get("server_error")


def _client(pki, cert: bool, **versions):
    ctx = ssl.create_default_context(cafile=str(pki["ca"]))
    if cert:
        ctx.load_cert_chain(str(pki["client_pem"]))
    for attr, value in versions.items():
        setattr(ctx, attr, value)
    return ctx


def test_pem_file_keystore_and_client_auth_required(pki):
    ctx = server_context(_pem_file(pki, ssl_client_auth="required"), "SSL")
    der, error = _handshake(ctx, _client(pki, cert=True))
    assert error is None
    assert principal(der, parse_rules("DEFAULT")) == "User:CN=web1,OU=ops,O=acme"
    _, error = _handshake(ctx, _client(pki, cert=False))
    assert error is not None  # required: no certificate, no connection


def test_listeners_refuse_renegotiation_as_kafka(pki):
    ctx = server_context(_pem_file(pki), "SSL")
    assert ctx.options & ssl.OP_NO_RENEGOTIATION


def test_inline_pem_with_folded_lines_and_an_encrypted_key(pki):
    """Inline PEM as a continued properties value arrives without line breaks."""
    key = pki["broker"].key_pem(b"s3cret").decode()
    chain = pki["broker"].cert_pem().decode()
    settings = _settings(
        ssl_keystore_type="PEM",
        ssl_keystore_key=" ".join(key.split()),
        ssl_keystore_certificate_chain=" ".join(chain.split()),
        ssl_key_password="s3cret",
        ssl_truststore_type="PEM",
        ssl_truststore_certificates=" ".join(pki["ca_pem"].split()),
        ssl_client_auth="requested",
    )
    ctx = server_context(settings, "SSL")
    der, error = _handshake(ctx, _client(pki, cert=False))
    assert error is None and der is None  # requested: a client without a certificate is fine
    assert principal(der, parse_rules("DEFAULT")) == ANONYMOUS
    assert normalize_pem(" ".join(chain.split())) == chain
    with pytest.raises(ConfigError, match="ssl.keystore.key"):
        server_context({**settings, "ssl.key.password": "wrong"}, "SSL")


def test_client_auth_none_ignores_client_certificates(pki):
    ctx = server_context(_pem_file(pki), "SSL")
    assert ctx.verify_mode == ssl.CERT_NONE
    der, error = _handshake(ctx, _client(pki, cert=True))
    assert error is None and der is None


def test_tls_1_1_is_refused_in_config_and_handshake(pki):
    with pytest.raises(ConfigError, match="ssl.enabled.protocols: TLSv1.1"):
        server_context(_pem_file(pki, ssl_enabled_protocols="TLSv1.1,TLSv1.2"), "SSL")
    with pytest.raises(ConfigError, match="ssl.protocol: TLSv1"):
        server_context(_pem_file(pki, ssl_protocol="TLSv1"), "SSL")
    ctx = server_context(_pem_file(pki, ssl_enabled_protocols="TLSv1.2"), "SSL")
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    old = _client(pki, cert=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLSv1_1 itself is deprecated
        old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    _, error = _handshake(ctx, old)
    assert error is not None


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"ssl_keystore_type": "JKS"}, "ssl.keystore.type: JKS stores are not supported"),
        ({"ssl_truststore_type": "PKCS12"}, "ssl.truststore.type: PKCS12"),
        ({"ssl_keystore_location": "/nonexistent.pem"}, "ssl.keystore.location: /nonexistent"),
        ({"ssl_client_auth": "always"}, "ssl.client.auth"),
        ({"ssl_truststore_location": None, "ssl_client_auth": "required"}, "ssl.client.auth"),
    ],
)
def test_bad_tls_settings_name_the_key(pki, extra, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        server_context(_pem_file(pki, **extra), "SSL")
    with pytest.raises(ConfigError, match="needs ssl.keystore.location"):
        server_context(_settings(), "SSL")


def test_client_context_verifies_the_server_and_presents_its_keystore(pki):
    server = server_context(_pem_file(pki, ssl_client_auth="required"), "SSL")
    client = client_context(_pem_file(pki))
    der, error = _handshake(server, client)
    assert error is None
    assert principal(der, parse_rules("DEFAULT")) == "User:CN=localhost,O=logflume"
    stranger = client_context(_settings(ssl_truststore_type="PEM"))  # system CAs only
    _, error = _handshake(server_context(_pem_file(pki), "SSL"), stranger)
    assert isinstance(error, ssl.SSLCertVerificationError)


def test_principal_mapping_rules(pki):
    der = pki["client"].cert.public_bytes(Encoding.DER)
    rules = parse_rules(r"RULE:^CN=(.*?),OU=ops,O=(.*)$/$1@$2/U, DEFAULT")
    assert principal(der, rules) == "User:WEB1@ACME"
    assert principal(der, parse_rules(r"RULE:^CN=([^,]*).*$/$1/L")) == "User:web1"
    assert principal(der, parse_rules(r"RULE:^CN=x.*$/$1/,DEFAULT")) == (
        "User:CN=web1,OU=ops,O=acme"
    )
    with pytest.raises(NoMatchingRule):
        principal(der, parse_rules(r"RULE:^CN=x.*$/$1/"))
    with pytest.raises(ValueError, match="ssl.principal.mapping.rules"):
        parse_rules("RULE:no-slashes")
