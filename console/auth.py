"""Who may see the console: the `--auth-file`, the login page's sessions, the gate in
front of every page and JSON endpoint, and where the console may listen at all.

The auth file holds one `NAME:HASH` a line (blank lines and `#` comments ignored):

- `alice:scrypt$16384$8$1$SALT$HASH` a person's password, hashed with scrypt
  (`logflume console --hash-password alice` prints the line); it opens the login
  page and HTTP basic authentication.
- `grafana:sha256$HEX` a bearer token's SHA-256 (`--hash-token grafana`): a
  script sends `Authorization: Bearer TOKEN`. A token is a random string of at
  least 32 characters, so one fast hash suffices where a password needs scrypt.

The file holds no secret in clear, but whoever can write it can let themselves in:
a file writable by its group or others is refused. Comparisons go through
`hmac.compare_digest`, and an unknown user costs the same scrypt as a known one.

A login makes a session: a random cookie (HttpOnly, SameSite=Strict, Secure under
TLS) good for `SESSION_SECONDS`, kept in this process's memory (a restart logs
everyone out). Without an auth file the console has no gate and may listen on a
loopback address only (`check_listen`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1  # 16 MiB of memory per check
MAX_SCRYPT_N = 2**18
MIN_TOKEN_CHARS = 32
SESSION_SECONDS = 12 * 3600
COOKIE = "logflume_console_session"
FAILED_LOGIN_DELAY = 1.0  # seconds a refused login waits before its answer
OPEN_PATHS = frozenset({"/login", "/health"})  # and /static/*: the page's own files


class AuthFileError(ValueError):
    """An auth file that cannot be used; the message names the file and line."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def hash_password(password: str) -> str:
    """The auth file's form of `password`: `scrypt$N$R$P$SALT$HASH` (base64)."""
    if not password:
        raise ValueError("the password is empty")
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(digest)}"


def hash_token(token: str) -> str:
    """The auth file's form of a bearer token: `sha256$HEX`."""
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"a token needs at least {MIN_TOKEN_CHARS} characters (e.g. openssl rand -hex 32)"
        )
    return "sha256$" + hashlib.sha256(token.encode()).hexdigest()


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 * n * r * p, dklen=32
    )


@dataclass(frozen=True)
class _Scrypt:
    n: int
    r: int
    p: int
    salt: bytes
    digest: bytes

    @classmethod
    def parse(cls, text: str) -> _Scrypt:
        parts = text.split("$")
        if len(parts) != 6:
            raise ValueError("a password hash is scrypt$N$R$P$SALT$HASH")
        try:
            n, r, p = (int(x) for x in parts[1:4])
            salt, digest = (
                base64.b64decode(parts[4], validate=True),
                base64.b64decode(parts[5], validate=True),
            )
        except ValueError:
            raise ValueError(
                "a password hash is scrypt$N$R$P$SALT$HASH (numbers, base64)"
            ) from None
        if not (2 <= n <= MAX_SCRYPT_N and n & (n - 1) == 0 and 1 <= r <= 32 and 1 <= p <= 16):
            raise ValueError(f"scrypt needs N a power of 2 up to {MAX_SCRYPT_N}, R 1-32, P 1-16")
        if not salt or len(digest) != 32:
            raise ValueError("a password hash needs a salt and a 32-byte hash")
        return cls(n, r, p, salt, digest)

    def matches(self, password: str) -> bool:
        return hmac.compare_digest(
            _scrypt(password, self.salt, self.n, self.r, self.p), self.digest
        )


# An unknown user's password is checked against this, so that it costs the same.
_NOBODY = _Scrypt(SCRYPT_N, SCRYPT_R, SCRYPT_P, b"\0" * 16, b"\0" * 32)


class AuthFile:
    """The users (scrypt hashes) and bearer tokens (SHA-256) of an auth file."""

    def __init__(self, users: dict[str, _Scrypt], tokens: dict[str, bytes]):
        self.users = users
        self.tokens = tokens  # name -> SHA-256 of the token

    @classmethod
    def load(cls, path: str | Path) -> AuthFile:
        try:
            mode = os.stat(path).st_mode
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise AuthFileError(f"--auth-file {path}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise AuthFileError(f"--auth-file {path}: not UTF-8 text") from None
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise AuthFileError(
                f"--auth-file {path}: writable by its group or others "
                f"(whoever writes it may let themselves in): chmod go-w {path}"
            )
        users: dict[str, _Scrypt] = {}
        tokens: dict[str, bytes] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            where = f"--auth-file {path}:{number}"
            name, sep, secret = line.partition(":")
            if not sep or not name or not secret:
                raise AuthFileError(f"{where}: expected NAME:HASH")
            if name in users or name in tokens:
                raise AuthFileError(f"{where}: {name!r} is given twice")
            try:
                if secret.startswith("scrypt$"):
                    users[name] = _Scrypt.parse(secret)
                elif secret.startswith("sha256$"):
                    tokens[name] = bytes.fromhex(secret[len("sha256$") :])
                    if len(tokens[name]) != 32:
                        raise ValueError("a token hash is sha256$ and 64 hex digits")
                else:
                    raise ValueError(
                        "the hash must start scrypt$ (a password: logflume console "
                        "--hash-password) or sha256$ (a token: --hash-token); "
                        "passwords in clear are not accepted"
                    )
            except ValueError as e:
                raise AuthFileError(f"{where}: {e}") from None
        if not users and not tokens:
            raise AuthFileError(f"--auth-file {path}: no user and no token in it")
        return cls(users, tokens)

    def check_password(self, user: str, password: str) -> bool:
        """Blocks for one scrypt (tens of milliseconds): call it in a thread."""
        known = self.users.get(user)
        ok = (known or _NOBODY).matches(password)
        return ok and known is not None

    def check_token(self, token: str) -> str | None:
        """The name of the token, None when it is not one of the file's."""
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for name, want in self.tokens.items():
            if hmac.compare_digest(digest, want):
                found = name
        return found


class Sessions:
    """Logged-in browsers: cookie value -> (user, expiry). Event-loop only."""

    def __init__(self, lifetime: float = SESSION_SECONDS, clock=time.monotonic):
        self.lifetime = lifetime
        self.clock = clock
        self._open: dict[str, tuple[str, float]] = {}

    def new(self, user: str) -> str:
        now = self.clock()
        self._open = {k: v for k, v in self._open.items() if v[1] > now}
        token = secrets.token_urlsafe(32)
        self._open[token] = (user, now + self.lifetime)
        return token

    def user(self, token: str) -> str | None:
        entry = self._open.get(token)
        if entry is None:
            return None
        if entry[1] <= self.clock():
            del self._open[token]
            return None
        return entry[0]

    def end(self, token: str) -> None:
        self._open.pop(token, None)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Gate:
    """The console's login: the middleware every request passes and the /login and
    /logout handlers. `login_page` is the HTML of the login form, whose hidden
    `#login-error` paragraph is shown after a refused login."""

    def __init__(self, auth: AuthFile, login_page: bytes, secure_cookie: bool):
        self.auth = auth
        self.sessions = Sessions()
        self.login_page = login_page
        self.secure_cookie = secure_cookie

    async def user(self, request: web.Request) -> str | None:
        """Who sent `request`: a session cookie, a bearer token or basic credentials."""
        cookie = request.cookies.get(COOKIE)
        if cookie:
            user = self.sessions.user(cookie)
            if user is not None:
                return user
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            return self.auth.check_token(value)
        if scheme.lower() == "basic" and value:
            try:
                name, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
            except ValueError:
                return None
            if not sep:
                return None
            ok: bool = await asyncio.to_thread(self.auth.check_password, name, password)
            return name if ok else None
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS or request.path.startswith("/static/"):
            return await handler(request)
        if await self.user(request) is not None:
            return await handler(request)
        if request.path.startswith("/api/"):
            return web.json_response(
                {"data": None, "error": "login required"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="logflume console"'},
            )
        raise web.HTTPSeeOther("/login")

    def page(self, failed: bool) -> web.Response:
        """The login form; after a refused login with its error shown (status 200
        all the same: a browser reports any other status of a page as an error)."""
        body = self.login_page
        if failed:
            body = body.replace(b' id="login-error" hidden', b' id="login-error"')
        return web.Response(
            body=body,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-store"},
        )

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self.page(failed=False)

    async def login(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and origin.partition("://")[2] != request.host:
            raise web.HTTPForbidden(text="a login from another site\n")
        form = await request.post()
        user, password = str(form.get("user", "")), str(form.get("password", ""))
        if not await asyncio.to_thread(self.auth.check_password, user, password):
            await asyncio.sleep(FAILED_LOGIN_DELAY)
            return self.page(failed=True)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE,
            self.sessions.new(user),
            max_age=int(self.sessions.lifetime),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure_cookie,
        )
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        cookie = request.cookies.get(COOKIE)
        if cookie:
            self.sessions.end(cookie)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(COOKIE, path="/")
        raise response

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        app.router.add_post("/logout", self.logout)


def is_loopback(host: str) -> bool:
    """Whether listening on `host` keeps the console on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, authenticated: bool, tls: bool) -> str | None:
    """Refuses (ValueError) a non-loopback address without an auth file; the warning
    to log when logins would cross the network in clear, else None."""
    if is_loopback(host):
        return None
    shown = host or "every address"
    if not authenticated:
        raise ValueError(
            f"refusing to listen on {shown} without --auth-file: anyone who reaches it "
            "would see the cluster (listen on 127.0.0.1, or give --auth-file)"
        )
    if not tls:
        return (
            f"listening on {shown} without --tls-cert: passwords and tokens cross the "
            "network in clear"
        )
    return None
