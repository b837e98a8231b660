"""An installed agent checked from outside: a UDP source in, a console sink out."""

import socket
import subprocess
import threading
import time


def config(port: int) -> str:
    """pipelines.yaml of agent `web`: UDP on 127.0.0.1:`port` -> file channel -> stdout."""
    return (
        "agents:\n  web:\n    sources:\n"
        f"      nc: {{type: udp, listen: '127.0.0.1:{port}', channels: [c]}}\n"
        "    channels:\n      c: {type: file}\n"
        "    sinks:\n      out: {type: console, channel: c, format: raw}\n"
    )


def echoes(cmd: list[str], port: int, line: str, **popen) -> list[str]:
    """Start the agent `cmd`, send `line` to its UDP `port` until the agent prints it
    (at most 30 s), stop it; returns what it printed, the line last if it came."""
    agent = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
    )
    seen = threading.Event()

    def send() -> None:  # until the agent has bound its port and printed the line
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            deadline = time.monotonic() + 30
            while not seen.wait(0.2) and time.monotonic() < deadline:
                s.sendto(line.encode() + b"\n", ("127.0.0.1", port))
        agent.terminate()  # ends the reading below, at the latest after 30 s

    sender = threading.Thread(target=send)
    sender.start()
    output = []
    try:
        for printed in agent.stdout:
            output.append(printed)
            if printed.strip() == line:
                break
    finally:
        seen.set()
        sender.join()
        agent.wait(30)
    return output
