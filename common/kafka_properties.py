"""Kafka *Java* client properties -> librdkafka properties, for every client
configuration an operator brings from Kafka's tools: `logflume --command-config`
files (logflume/client_config.py) and the Spark data source's `kafka.*` options
(spark_etl/source/options.py), named as Spark's Kafka source names them.

`sasl.jaas.config` (PlainLoginModule, ScramLoginModule) gives sasl.username and
sasl.password; PEM trust and key stores become ssl.ca.location and the certificate
and key locations; PKCS12 key stores pass through; JKS stores, which librdkafka
cannot read, are refused with the way out; `ssl.endpoint.identification.algorithm=`
(empty, Java's "no host name check") is librdkafka's `none`. Every other key goes to
librdkafka as it is. `read` loads a --command-config file (Java's properties rules),
for the commands and for the Spark jobs (spark_etl/command.py).
"""

from __future__ import annotations

import re

import javaproperties


class PropertiesError(ValueError):
    """Client properties that cannot be used; the message names the key."""


def read(path: str) -> dict[str, str]:
    """The properties of a --command-config file (a Java properties file)."""
    try:
        with open(path, "rb") as f:
            return javaproperties.load(f)
    except OSError as e:
        raise PropertiesError(f"--command-config {path}: {e.strerror}") from None


_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def translate(props: dict[str, str]) -> dict[str, str]:
    """Kafka Java client properties -> librdkafka properties."""
    props = dict(props)
    out: dict[str, str] = {}
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        if not any(m in jaas for m in _JAAS_MODULES):
            raise PropertiesError(
                "sasl.jaas.config: only PlainLoginModule and ScramLoginModule are understood"
            )
        options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" not in options or "password" not in options:
            raise PropertiesError('sasl.jaas.config: needs username="..." password="..."')
        out["sasl.username"] = options["username"]
        out["sasl.password"] = options["password"]
    trust_type = props.pop("ssl.truststore.type", "PEM").upper()
    trust = props.pop("ssl.truststore.location", None)
    props.pop("ssl.truststore.password", None)  # PEM trust stores have none
    if trust is not None:
        if trust_type != "PEM":
            raise PropertiesError(
                f"ssl.truststore.location: a {trust_type} trust store cannot be read by "
                "librdkafka; give a PEM file of the CA certificates (ssl.truststore.type=PEM)"
            )
        out["ssl.ca.location"] = trust
    if "ssl.truststore.certificates" in props:
        out["ssl.ca.pem"] = props.pop("ssl.truststore.certificates")
    key_type = props.pop("ssl.keystore.type", "JKS").upper()
    keystore = props.pop("ssl.keystore.location", None)
    key_password = props.pop("ssl.keystore.password", None)
    if keystore is not None:
        if key_type == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = keystore
        elif key_type == "PKCS12":
            out["ssl.keystore.location"] = keystore
            if key_password is not None:
                out["ssl.keystore.password"] = key_password
        else:
            raise PropertiesError(
                f"ssl.keystore.location: a {key_type} key store cannot be read by librdkafka; "
                "use ssl.keystore.type=PEM or PKCS12"
            )
    if props.get("ssl.endpoint.identification.algorithm") == "":
        props["ssl.endpoint.identification.algorithm"] = "none"  # Java's "": no check
    if "ssl.keystore.certificate.chain" in props:
        out["ssl.certificate.pem"] = props.pop("ssl.keystore.certificate.chain")
    if "ssl.keystore.key" in props:
        out["ssl.key.pem"] = props.pop("ssl.keystore.key")
    return out | props
