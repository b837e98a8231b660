"""`logflume console`'s login options as a process: the auth file helpers, the
refusals (beyond loopback without a login, bad TLS or auth files) in one line, and
HTTPS with the broker's kind of PEM material and a bearer token. No broker: the
console serves its pages (and the error of its cluster reads) without one."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from common import certs
from common.ports import free_port
from console.auth import AuthFile, hash_token
from tests.console.browser import REPO, ConsoleProcess

TOKEN = "0123456789abcdef" * 3
NOBODY = "127.0.0.1:1"  # no broker there


def console(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logflume", "console", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "LOGFLUME_BOOTSTRAP_SERVER": ""},
        timeout=60,
    )


def test_hash_password_and_token_print_lines_the_auth_file_takes(tmp_path):
    alice = console("--hash-password", "alice", stdin="s3cret pass\n")
    ci = console("--hash-token", "ci", stdin=TOKEN + "\n")
    assert alice.returncode == 0 and ci.returncode == 0, alice.stderr + ci.stderr
    assert alice.stdout.startswith("alice:scrypt$") and ci.stdout.startswith("ci:sha256$")
    path = tmp_path / "console.auth"
    path.write_text(alice.stdout + ci.stdout)
    os.chmod(path, 0o600)
    auth = AuthFile.load(path)
    assert auth.check_password("alice", "s3cret pass") and auth.check_token(TOKEN) == "ci"

    short = console("--hash-token", "ci", stdin="short\n")
    assert short.returncode == 2 and "at least 32 characters" in short.stderr
    colon = console("--hash-password", "a:b", stdin="x\n")
    assert colon.returncode == 2 and "a NAME without ':'" in colon.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--listen", "0.0.0.0:{port}"], "refusing to listen on 0.0.0.0 without --auth-file"),
        (["--tls-key", "k.pem"], "--tls-key needs --tls-cert"),
        (["--auth-file", "missing.auth"], "--auth-file missing.auth: No such file"),
        (["--tls-cert", "missing.pem"], "--tls-cert missing.pem: no such file"),
    ],
)
def test_refusals_are_one_line(args, message):
    args = [a.format(port=free_port()) for a in args]
    result = console("--bootstrap-server", NOBODY, *args)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"logflume console: {message}"), result.stderr


def test_https_with_a_bearer_token(tmp_path):
    ca = certs.new_ca()
    certs.write_ca(tmp_path, ca)
    pem = certs.write_keystore(
        tmp_path, "broker", certs.issue(ca, "localhost", hosts=["127.0.0.1"], server=True)
    )
    auth = tmp_path / "console.auth"
    auth.write_text(f"ci:{hash_token(TOKEN)}\n")
    os.chmod(auth, 0o600)
    served = ConsoleProcess(
        tmp_path,
        "--bootstrap-server",
        NOBODY,
        "--auth-file",
        str(auth),
        "--tls-cert",
        str(pem),
        ca=tmp_path / "ca.crt",
        token=TOKEN,
    ).start()
    try:
        cluster = served.api("cluster")
        assert set(cluster) == {"data", "error", "updated"}
        with pytest.raises(urllib.error.HTTPError) as refused:
            served.open("api/cluster", token="not-" + TOKEN)
        assert refused.value.code == 401
        assert json.loads(refused.value.read())["error"] == "login required"
        with pytest.raises(OSError):  # plain HTTP to the TLS port: no answer
            urllib.request.urlopen(f"http://127.0.0.1:{served.port}/health", timeout=10)
    finally:
        served.stop()
    assert served.proc.returncode == 0, served.log_text()
    assert f"console on https://127.0.0.1:{served.port}/ (login)" in served.log_text()
