"""SASL on the broker: Kafka's PLAIN and SCRAM-SHA-256/512, sans-I/O.

jaas.py           sasl.jaas.config values (PlainLoginModule, ScramLoginModule)
plain.py          the PLAIN exchange (RFC 4616) against the listener's JAAS users
scram.py          SCRAM credentials (Kafka's stored form) and the server exchange
authenticator.py  one connection's authentication state machine
settings.py       what each SASL listener serves, from the broker config
"""
