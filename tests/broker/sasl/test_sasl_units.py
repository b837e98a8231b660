"""Pure SASL pieces: JAAS parsing, PLAIN, SCRAM (RFC 7677's example and a client
written here), the authentication state machine's transitions."""

import base64
import hashlib
import hmac

import pytest

from broker.protocol import ApiKey, ErrorCode
from broker.sasl import jaas
from broker.sasl.authenticator import TRANSITIONS, Authenticator, IllegalSaslState, State
from broker.sasl.plain import PlainServer
from broker.sasl.scram import AuthenticationFailed, ScramCredential, ScramServer, salted_password

# -- JAAS -----------------------------------------------------------------------------


def test_jaas_plain_entry_with_quotes_escapes_and_bare_words():
    entry = jaas.parse(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"d;m=i n" user_admin="admin-secret"\n'
        "  user_alice=alice-secret debug=true ;"
    )
    assert entry.module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": 'a"d;m=i n',
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
        "debug": "true",
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ('Module required username="a"', "must end with ';'"),
        ('Module mandatory username="a";', "not a control flag"),
        ('Module required username "a";', "expected name=value"),
        ('Module required username="a;', "unexpected"),
        ("Module required username=;", "has no value"),
        ('Module required a="1"; Other required b="2";', "only one login module"),
        ("", "expected"),
    ],
)
def test_malformed_jaas_says_why(text, message):
    with pytest.raises(jaas.JaasError, match=message):
        jaas.parse(text)


# -- PLAIN ----------------------------------------------------------------------------


def test_plain_accepts_a_listed_user_and_refuses_the_rest():
    users = {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b"" and ok.complete and ok.user == "alice"
    assert PlainServer(users).evaluate(b"alice\0alice\0alice-secret") == b""
    for token, message in [
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0bob\0alice-secret", "Invalid username or password"),
        (b"bob\0alice\0alice-secret", "authorization id that is different"),
        (b"\0\0x", "username not specified"),
        (b"alice-secret", "expected 3 tokens"),
        (b"\0\xff\0x", "not UTF-8"),
    ]:
        server = PlainServer(users)
        with pytest.raises(AuthenticationFailed, match=message):
            server.evaluate(token)
        assert not server.complete


# -- SCRAM ----------------------------------------------------------------------------

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, salt)


def test_scram_sha_256_server_matches_rfc_7677():
    cred = _rfc_credential()
    server = ScramServer("SCRAM-SHA-256", {"user": cred}.get, nonce=RFC_SERVER_NONCE)
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.user == "user"


def test_scram_credential_round_trips_kafkas_stored_form():
    cred = _rfc_credential()
    text = cred.to_kafka()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=") and text.endswith(
        ",iterations=4096"
    )
    assert ScramCredential.from_kafka(text) == cred
    with pytest.raises(ValueError):
        ScramCredential.from_kafka("salt=xx,iterations=1")


class ScramClient:
    """A minimal RFC 5802 client, independent of the server code."""

    def __init__(self, mechanism, user, password, nonce="clientnonce123"):
        self.digest = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user, self.password, self.nonce = user, password, nonce
        self.first_bare = f"n={user},r={nonce}"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes, nonce_prefix: str = "") -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        salted = hashlib.pbkdf2_hmac(
            self.digest, self.password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        client_key = hmac.new(salted, b"Client Key", self.digest).digest()
        stored = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce_prefix}{attrs['r']}"
        self.auth = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        sig = hmac.new(stored, self.auth, self.digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self.server_key = hmac.new(salted, b"Server Key", self.digest).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        expected = hmac.new(self.server_key, self.auth, self.digest).digest()
        return server_final == b"v=" + base64.b64encode(expected)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_exchange_with_an_independent_client(mechanism):
    cred = ScramCredential.from_password(mechanism, "alice-secret", 4096)
    lookup = {"alice": cred}.get
    client = ScramClient(mechanism, "alice", "alice-secret")
    server = ScramServer(mechanism, lookup)
    assert client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.complete

    wrong = ScramClient(mechanism, "alice", "nope")
    server = ScramServer(mechanism, lookup)
    first = server.evaluate(wrong.first())
    with pytest.raises(AuthenticationFailed, match="invalid credentials") as e:
        server.evaluate(wrong.final(first))
    assert e.value.server_final == b"e=invalid-proof" and e.value.user == "alice"
    assert not server.complete


def test_scram_refusals():
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw", 4096)
    lookup = {"alice": cred, "a,b=c": cred}.get

    def first_fails(token, message):
        with pytest.raises(AuthenticationFailed, match=message):
            ScramServer("SCRAM-SHA-512", lookup).evaluate(token)

    first_fails(b"n,,n=bob,r=abc", "Invalid user credentials")
    first_fails(b"y,,n=alice,r=abc", "only 'n' is served")
    first_fails(b"p=tls-unique,,n=alice,r=abc", "only 'n' is served")
    first_fails(b"n,,r=abc", "expected n=<user>")
    first_fails(b"n,a=bob,n=alice,r=abc", "authorization id that is different")
    first_fails(b"\xff", "not UTF-8")
    # escaped names (=2C is ',' and =3D '=') are the stored names
    assert ScramServer("SCRAM-SHA-512", lookup).evaluate(b"n,,n=a=2Cb=3Dc,r=x").startswith(b"r=x")
    # a client-final with another nonce, or a tampered channel binding
    server = ScramServer("SCRAM-SHA-512", lookup)
    first = server.evaluate(b"n,,n=alice,r=abc").decode()
    nonce = first.split(",")[0][2:]
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(f"c=biws,r={nonce}x,p=AAAA".encode())
    assert e.value.server_final == b"e=other-error"
    server = ScramServer("SCRAM-SHA-512", lookup)
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed) as e:
        server.evaluate(f"c=eSws,r={nonce},p=AAAA".encode())
    assert e.value.server_final == b"e=channel-bindings-dont-match"
    # nothing after the exchange failed or ended
    with pytest.raises(AuthenticationFailed, match="unexpected SCRAM message"):
        server.evaluate(b"n,,n=alice,r=abc")


def test_scram_accepts_librdkafkas_repeated_client_nonce():
    """librdkafka < 2.6.1 sends r=<client nonce><combined nonce>; Kafka accepts it."""
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="cn")
    server = ScramServer("SCRAM-SHA-256", {"alice": cred}.get)
    first = server.evaluate(client.first())
    assert client.verify(server.evaluate(client.final(first, nonce_prefix="cn")))
    server = ScramServer("SCRAM-SHA-256", {"alice": cred}.get)
    first = server.evaluate(client.first())
    with pytest.raises(AuthenticationFailed):  # but the combined nonce must be there
        server.evaluate(client.final(first.replace(b"r=cn", b"r=cX", 1)))


def test_salted_password_is_pbkdf2():
    assert salted_password("SCRAM-SHA-256", "pencil", b"s", 4096) == hashlib.pbkdf2_hmac(
        "sha256", b"pencil", b"s", 4096
    )


# -- state machine --------------------------------------------------------------------


def _auth():
    return Authenticator({"PLAIN": lambda: PlainServer({"alice": "pw"})})


def test_v1_handshake_then_authenticate_completes():
    a = _auth()
    assert a.check(ApiKey.API_VERSIONS).value == "api_versions"
    a.api_versions()
    assert a.handshake("PLAIN", 1) == {"error_code": 0, "mechanisms": ["PLAIN"]}
    assert a.state is State.AUTHENTICATE
    assert a.authenticate(b"\0alice\0pw") == b""
    assert a.complete and a.principal == "User:alice"
    a.check(ApiKey.PRODUCE)  # anything goes now


def test_v0_handshake_takes_raw_tokens():
    a = _auth()
    a.handshake("PLAIN", 0)
    assert a.state is State.RAW_TOKENS
    with pytest.raises(IllegalSaslState):
        a.authenticate(b"\0alice\0pw")  # a SaslAuthenticate is not valid here
    a.authenticate(b"\0alice\0pw", raw=True)
    assert a.complete


def test_unserved_mechanism_fails_the_handshake():
    a = _auth()
    r = a.handshake("GSSAPI", 1)
    assert r == {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["PLAIN"]}
    assert a.state is State.FAILED


@pytest.mark.parametrize("api", [ApiKey.PRODUCE, ApiKey.METADATA, ApiKey.SASL_AUTHENTICATE])
def test_requests_before_the_handshake_are_illegal(api):
    with pytest.raises(IllegalSaslState):
        _auth().check(api)


def test_failure_and_illegal_transitions():
    a = _auth()
    a.handshake("PLAIN", 1)
    with pytest.raises(IllegalSaslState):
        a.check(ApiKey.SASL_HANDSHAKE)  # a second handshake
    with pytest.raises(IllegalSaslState):
        a.check(ApiKey.METADATA)
    with pytest.raises(AuthenticationFailed):
        a.authenticate(b"\0alice\0nope")
    assert a.state is State.FAILED and a.user == "alice"
    with pytest.raises(IllegalSaslState):
        a.authenticate(b"\0alice\0pw")
    # FAILED and COMPLETE are final: no transition leaves FAILED
    assert not [k for k in TRANSITIONS if k[0] is State.FAILED]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_inter_broker_client_against_the_server(mechanism):
    """broker.sasl.client (what replica fetchers send) against the server side."""
    from broker.sasl import client

    cred = ScramCredential.from_password(mechanism, "pw", 4096) if mechanism != "PLAIN" else None
    server = (
        PlainServer({"broker": "pw"})
        if cred is None
        else ScramServer(mechanism, {"broker": cred}.get)
    )
    steps = client.tokens(mechanism, "broker", "pw")
    token = next(steps)
    with pytest.raises(StopIteration):
        while True:
            token = steps.send(server.evaluate(token))
    assert server.complete
    if cred is not None:  # a server that does not know the password cannot pass
        steps = client.tokens(mechanism, "broker", "pw")
        server = ScramServer(mechanism, {"broker": cred}.get)
        steps.send(server.evaluate(next(steps)))
        with pytest.raises(client.SaslClientError):
            steps.send(b"v=" + base64.b64encode(b"\0" * 32))


def _answer(auth: Authenticator, request) -> dict:
    """The broker's answer to one request of `client.login`, as its connection
    builds it from the Authenticator."""
    api_key, version, body = request
    if api_key == ApiKey.SASL_HANDSHAKE:
        return auth.handshake(body["mechanism"], version)
    try:
        token = auth.authenticate(body["auth_bytes"])
    except AuthenticationFailed as e:
        return {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": str(e)}
    return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": token}


def _login(mechanism: str, password: str) -> Authenticator:
    from broker.sasl import client

    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw", 4096)
    auth = Authenticator(
        {
            "PLAIN": lambda: PlainServer({"alice": "pw"}),
            "SCRAM-SHA-512": lambda: ScramServer("SCRAM-SHA-512", {"alice": cred}.get),
        }
    )
    steps = client.login(mechanism, "alice", password)
    request = next(steps)
    with pytest.raises(StopIteration):
        while True:
            request = steps.send(_answer(auth, request))
    return auth


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_login_requests_against_the_authenticator(mechanism):
    """broker.sasl.client.login (what the inter-broker connections and the tools'
    BlockingClient send): handshake, then tokens until the broker is satisfied; a
    refusal is SaslAuthenticationError with the broker's message."""
    from broker.sasl import client

    assert _login(mechanism, "pw").complete
    with pytest.raises(client.SaslAuthenticationError) as refused:
        _login(mechanism, "not-pw")
    assert str(refused.value).startswith("Authentication failed")
    with pytest.raises(client.SaslAuthenticationError, match=r"'SCRAM-SHA-256' not enabled"):
        _login("SCRAM-SHA-256", "pw")
