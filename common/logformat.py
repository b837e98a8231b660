"""How logflume's processes log on stderr: text for people, JSON for log shippers.

`configure_logging(level, fmt)` sets up the root logger, once per process (the
`logflume` command calls it before running a subcommand). `text` is the classic
`2026-11-26 18:02:03,123 INFO broker: message`. `json` is one object per line with
the keys Vector, Fluent Bit and Elastic (ECS) pipelines look for:

    {"timestamp":"2026-11-26T18:02:03.123Z","level":"INFO","logger":"broker",
     "message":"starting broker with data dir /var/lib/logflume/broker-1","pid":4242}

plus `exception` (the formatted traceback, newlines escaped) when the record has
one. In JSON mode Python warnings and uncaught exceptions are logged too, so that
nothing the process writes on its own spans several lines.

`json_line()` gives a supervisor's console the same shape: a child's JSON lines are
kept (with the fields it adds), and anything else it prints (ZooKeeper's or Spark's
JVM log lines, a traceback from before logging was set up) becomes the `message` of
an INFO object, the priority journald gives unstructured output.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import orjson

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def rfc3339(created: float) -> str:
    """`created` (seconds since the epoch) as RFC 3339 UTC with milliseconds."""
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _dumps(fields: dict) -> bytes:
    """orjson, which refuses lone surrogates (a file name decoded with
    surrogateescape): such strings are escaped rather than losing the record."""
    try:
        return orjson.dumps(fields, default=str)
    except orjson.JSONEncodeError:
        clean = {
            k: v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v
            for k, v in fields.items()
        }
        return orjson.dumps(clean, default=str)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {
            "timestamp": rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
        }
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            fields["stack"] = self.formatStack(record.stack_info)
        return _dumps(fields).decode()


def json_line(line: bytes, logger: str, pid: int | None, **extra) -> bytes:
    """`line`, printed by child process `pid`, as one JSON log line with `extra`
    added: a JSON object is kept as it is, anything else becomes the message of an
    INFO record of `logger`, stamped now."""
    if line.startswith(b"{"):
        try:
            fields = orjson.loads(line)
        except orjson.JSONDecodeError:
            fields = None
        if isinstance(fields, dict):
            return _dumps({**fields, **extra})
    fields = {
        "timestamp": rfc3339(time.time()),
        "level": "INFO",
        "logger": logger,
        "message": line.decode(errors="replace"),
        "pid": pid,
        **extra,
    }
    return _dumps(fields)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Log records of `level` and above on stderr, as `fmt` (one of LOG_FORMATS)."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r}: expected one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    if fmt == "json":
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(exc_type, exc_value, tb) -> None:
    """The JSON replacement for the interpreter's traceback on stderr."""
    logging.getLogger("logflume").critical("uncaught exception", exc_info=(exc_type, exc_value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if issubclass(args.exc_type, SystemExit):  # as the default hook: a thread's way out
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("logflume").critical(
        "uncaught exception in thread %s",
        name,
        # typeshed wants an exception value; logging takes the hook's None as well
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
    )
