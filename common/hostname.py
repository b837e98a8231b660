"""This machine's name as logflume uses it: `${HOST}` in pipelines.yaml, the `host`
header of `add_host: true` and `add_fields {host: true}`, and the default
transactional id of an exactly-once kafka sink.

One function, so that all of them agree: the environment's HOST when it is set and
not empty (a container whose kernel host name is random, a test, an operator who
wants the fully qualified name), else the kernel's host name (socket.gethostname()).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


def this_host(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("HOST") or socket.gethostname()
