"""`host:port` addresses, parsed one way everywhere: broker listeners, agent sources,
the agent's metrics endpoint and the demo launcher.

An empty host (`:8285`) means every IPv4 interface, `0.0.0.0`; an IPv6 host is written
in brackets (`[::1]:9092`); port 0 asks the OS for a free port (a port to pass to a
child process on its command line comes from `common.ports.free_port`).
"""

ANY_HOST = "0.0.0.0"


def parse_hostport(value: object, what: str = "address") -> tuple[str, int]:
    """`"127.0.0.1:8285"`, `":8285"`, `"[::1]:8285"` -> (host, port); ValueError naming `what`."""
    host, sep, port = str(value).rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{what}: expected host:port, got {value!r}")
    return host.strip("[]") or ANY_HOST, int(port)


def connect_address(host: str, port: int) -> tuple[str, int]:
    """Where a client on this host reaches a server bound to (host, port): a wildcard
    bind address is reached on loopback."""
    return ("127.0.0.1" if host in ("", ANY_HOST, "::") else host), port
