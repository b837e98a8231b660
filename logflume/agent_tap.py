"""`logflume agent tap`: print the events sampled from one component of a running
agent, read from its metrics listener's `/tap` (agent/tap.py; Vector's `vector tap`).

`--format json` prints the agent's JSON lines as they come; `text` one line per
event: its time (UTC), the component, its headers and the line. The agent answers
403 when its metrics listener is not on a loopback address, 404 for a component it
does not have: the command prints the agent's one-line reason and exits 1.
"""

from __future__ import annotations

import http.client
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import orjson


def text_line(doc: dict) -> str:
    """An event of the tap as one line of text."""
    if "dropped" in doc:
        return f"({doc['dropped']} events dropped: this reader was too slow)"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(doc["time"] / 1000))
    stamp += f".{doc['time'] % 1000:03d}Z"
    headers = " ".join(f"{k}={v}" for k, v in sorted(doc["headers"].items()))
    return f"{stamp} {doc['component']} [{headers}] {doc['line']}"


def run(url: str, component: str, limit: int, output_format: str) -> int:
    query = urllib.parse.urlencode({"component": component, "limit": limit})
    address = f"{url}/tap?{query}"
    try:
        with urllib.request.urlopen(address) as resp:  # streams until `limit` events
            for raw in resp:
                if output_format == "json":
                    sys.stdout.write(raw.decode())
                else:
                    print(text_line(orjson.loads(raw)))
                sys.stdout.flush()
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode(errors="replace").strip() or exc.reason
        print(f"tap refused ({exc.code}): {reason}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"cannot reach the agent at {url}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 1
    except http.client.HTTPException as exc:  # the stream cut short: the agent stopped
        print(f"the agent at {url} ended the tap early: {exc!r}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
