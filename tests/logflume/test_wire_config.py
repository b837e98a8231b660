"""logflume/wire_config.settings: librdkafka client properties (translated from a
--command-config file) -> a blocking connection's settings; what it cannot honour
is an error naming the key. Pure: no files are read."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.protocol.client import SaslLogin
from logflume.client_config import translate
from logflume.wire_config import CommandConfigError, TlsSettings, WireSettings, settings

SCRAM = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u", "sasl.password": "p"}


def test_no_properties_is_plaintext():
    assert settings({}) == WireSettings("PLAINTEXT", None, None)
    assert settings({"client.id": "tool", "request.timeout.ms": "5000"}).protocol == "PLAINTEXT"


def test_java_sasl_ssl_properties_give_tls_and_the_login():
    java = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cret";',
        "ssl.truststore.location": "/etc/ca.pem",
        "ssl.truststore.type": "PEM",
        "ssl.keystore.location": "/etc/me.pem",
        "ssl.keystore.type": "PEM",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "",
    }
    got = settings(translate(java))
    assert got.protocol == "SASL_SSL"
    assert got.sasl == SaslLogin("SCRAM-SHA-256", "alice", "s3cret")
    assert got.tls == TlsSettings(
        ca_location="/etc/ca.pem",
        certificate_location="/etc/me.pem",
        key_location="/etc/me.pem",
        key_password="kp",
        check_hostname=False,
    )
    assert "s3cret" not in repr(got)


@pytest.mark.parametrize(
    "protocol, tls, sasl",
    [("ssl", True, False), ("SASL_PLAINTEXT", False, True), ("PLAINTEXT", False, False)],
)
def test_each_protocol_takes_its_part(protocol, tls, sasl):
    got = settings({"security.protocol": protocol, **SCRAM, "ssl.ca.location": "/ca.pem"})
    assert got.protocol == protocol.upper()
    assert (got.tls is not None, got.sasl is not None) == (tls, sasl)


def test_host_name_checked_by_default_and_verification_can_be_turned_off():
    assert settings({"security.protocol": "SSL"}).tls == TlsSettings()
    off = settings({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    assert off.tls.verify is False and off.tls.check_hostname is False


@pytest.mark.parametrize(
    "props, key",
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism: GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}, "sasl.mechanisms"),
        ({"security.protocol": "SASL_SSL", "sasl.username": "u"}, "sasl.mechanism: not set"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        (
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": "c",
                "ssl.key.location": "k",
                "ssl.keystore.location": "p",
            },
            "ssl.keystore.location: give the client certificate one way",
        ),
        ({"security.protocol": "SSL", "ssl.certificate.pem": "x"}, "ssl.key.pem: needed"),
        ({"security.protocol": "SSL", "ssl.crl.location": "x"}, "ssl.crl.location"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "c"}, "ssl.key.location"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "x"},
            "ssl.endpoint.identification.algorithm",
        ),
    ],
)
def test_what_cannot_be_honoured_is_named(props, key):
    with pytest.raises(CommandConfigError, match=key):
        settings(props)


@given(
    st.sampled_from(["ssl.", "sasl."]),
    st.from_regex(r"zz[a-z]{0,8}(\.[a-z]{1,8})?", fullmatch=True),
)
def test_any_other_security_key_is_refused_by_name(prefix, rest):
    key = prefix + rest
    with pytest.raises(CommandConfigError) as e:
        settings({"security.protocol": "SASL_SSL", **SCRAM, key: "v"})
    assert str(e.value).startswith(f"{key}: not supported")
