"""Run a handful of long-lived commands together as one foreground program.

Theory of operation (used by `logflume up` and `logflume cluster up`):

- Every child is a subprocess in its own process group, so that a terminal's Ctrl-C
  reaches only the supervisor, which then stops the children in a chosen order, and
  so that a child's own helpers (Spark's JVM, its Python workers) are signalled with
  it. Each child also asks the kernel for PR_SET_PDEATHSIG=SIGKILL: if the supervisor
  dies, even by SIGKILL, the kernel kills the child. The kernel ties that signal to
  the *thread* that forked the child, so every child is started (and restarted) from
  the one control thread that owns the `Supervisor`.
- A child's stdout and stderr share one pipe; a reader thread per child copies each
  line to our stdout behind a colored, aligned label such as `[broker]`, unless the
  child has a log file (`ChildSpec.log_file`), which then gets its output instead.
  With `log_format="json"` (`logflume --log-format json up`) every line is a JSON
  object instead: a child's own JSON log lines get its name as `child`, its other
  lines and the supervisor's messages become objects of the same shape
  (`common.logformat`).
  A child with a `pid_file` has its current pid there while it runs, for a
  `... down` command run elsewhere and for tests.
- The control thread calls `poll()` regularly. Before `supervising` is switched on
  (the startup phase), a child that exits raises `ChildExited`: a demo that cannot
  start should say so rather than loop. Afterwards an exit is reported and the child
  restarted after a `common.backoff.Backoff` delay (1 s doubling to 30 s, from 1 s
  again once the child had stayed up 30 s). `run()` is that whole life: the caller's
  start function (which waits for each child with `wait_for()`), then polling until a
  stop is asked, then `stop()`.
- A child with a `restart_file` is restarted on request: when that file appears,
  `poll()` removes it and SIGTERMs the child as `stop()` would (SIGKILL after
  `grace`), and restarts it as soon as it has exited, without backoff and without
  reporting a crash (`logflume cluster restart --rolling` asks for each broker in
  turn this way). A file rather than a signal: it names the child, survives a
  supervisor busy elsewhere for a moment, and its removal tells the asker that the
  request was taken.
- `stop()` signals the children in reverse start order: SIGTERM to the process
  group (or to the child alone, see `ChildSpec.term_group`), up to `grace` seconds
  for the group to empty, then SIGKILL to what is left of it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

from common.backoff import Backoff
from common.fsutil import atomic_write
from common.logformat import JsonFormatter, json_line

PR_SET_PDEATHSIG = 1
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0
STABLE_AFTER = 30.0
COLORS = ("36", "32", "33", "35", "34", "31", "96", "92")

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent_pid: int):
    """preexec_fn: SIGKILL this child when its parent thread dies (Linux)."""

    def setup() -> None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


def _group_alive(pgid: int) -> bool:
    """Whether process group `pgid` has a live member. Zombies do not count: an
    orphan whose reaper is slow (PID 1 of a container) must not hold up a stop."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def want_color(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


@dataclasses.dataclass
class ChildSpec:
    """What to run: a label, the command line, and whether to restart it on exit.

    `term_group`: on stop, SIGTERM the whole process group (default) or only the
    child itself, for a child that shuts its own helpers down in order (Spark's
    driver stops its queries, then its JVM). Either way, whatever is left of the
    group when the grace period ends gets SIGKILL.

    `log_file`: append the child's output there instead of copying it to ours.
    `pid_file`: holds the running child's pid; removed while it is down or stopped.
    `restart_file`: a file whose appearance asks for a graceful restart of the child.
    """

    name: str
    argv: list[str]
    restart: bool = True
    term_group: bool = True
    env: dict[str, str] | None = None
    cwd: str | None = None
    log_file: Path | None = None
    pid_file: Path | None = None
    restart_file: Path | None = None


class Stopped(Exception):
    """A stop was asked for while waiting for a child to become ready."""


class ChildExited(RuntimeError):
    def __init__(self, name: str, code: int):
        super().__init__(f"{name} {describe_exit(code)}")
        self.name = name
        self.code = code


class Output:
    """Serialises labelled lines (or JSON log lines, with `json`) onto one binary
    stream; safe across threads."""

    def __init__(self, stream: BinaryIO, color: bool, json: bool = False):
        self.stream = stream
        self.color = color
        self.json = json
        self.width = 0
        self._lock = threading.Lock()
        self._colors: dict[str, str] = {}

    def label(self, name: str) -> bytes:
        if name not in self._colors:
            self._colors[name] = COLORS[len(self._colors) % len(COLORS)]
        text = f"[{name}]".ljust(self.width + 2)
        if self.color:
            text = f"\x1b[{self._colors[name]}m{text}\x1b[0m"
        return text.encode()

    def line(self, name: str, data: bytes, pid: int | None = None) -> None:
        """One line that child `name` (process `pid`) printed."""
        data = data.rstrip(b"\r\n")
        if self.json:
            self._write(json_line(data, name, pid, child=name))
        else:
            self._write(self.label(name) + b" " + data)

    def text(self, name: str, message: str, level: int = logging.INFO) -> None:
        """A message of our own, under `name`; in JSON one record, however many lines."""
        if self.json:
            record = logging.LogRecord(name, level, __file__, 0, message, None, None)
            self._write(JsonFormatter().format(record).encode())
            return
        for row in message.splitlines() or [""]:
            self._write(self.label(name) + b" " + row.encode())

    def _write(self, row: bytes) -> None:
        with self._lock:
            try:
                self.stream.write(row + b"\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # nobody reads our output any more; the children keep running


class Child:
    """The running state of one `ChildSpec`; owned by the supervisor's control thread."""

    def __init__(self, spec: ChildSpec):
        self.spec = spec
        self.proc: subprocess.Popen | None = None
        self.reader: threading.Thread | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.backoff = Backoff(BACKOFF_FIRST, BACKOFF_MAX, stable_after=STABLE_AFTER)
        self.restart_at: float | None = None
        # set while a requested restart waits for the child to exit: SIGKILL after it
        self.kill_at: float | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


class Supervisor:
    """Starts, watches, restarts and stops child processes.

    Not thread-safe: create it, start children, poll and stop from one thread (the
    one whose death should kill the children). Only `Output` is shared with the
    reader threads.
    """

    def __init__(
        self,
        stream: BinaryIO | None = None,
        color: bool | None = None,
        grace=10.0,
        log_format: str = "text",
    ):
        stream = stream if stream is not None else sys.stdout.buffer
        color = want_color(sys.stdout) if color is None else color
        self.output = Output(stream, color, json=log_format == "json")
        self.grace = grace
        self.children: list[Child] = []
        self.supervising = False
        self.label = "up"

    def say(self, message: str, level: int = logging.INFO) -> None:
        self.output.text(self.label, message, level)

    def start(self, spec: ChildSpec) -> Child:
        child = Child(spec)
        self.children.append(child)
        self.output.width = max(len(self.label), *(len(c.spec.name) for c in self.children))
        self._spawn(child)
        return child

    def _spawn(self, child: Child) -> None:
        env = dict(os.environ if child.spec.env is None else child.spec.env)
        env.setdefault("PYTHONUNBUFFERED", "1")
        log = open(child.spec.log_file, "ab") if child.spec.log_file else None
        try:
            child.proc = subprocess.Popen(
                child.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=log or subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=child.spec.cwd,
                process_group=0,
                preexec_fn=_die_with_parent(os.getpid()),
            )
        finally:
            if log is not None:
                log.close()
        child.started_at = time.monotonic()
        child.restart_at = None
        child.kill_at = None
        if child.spec.restart_file is not None:  # a request made while it was down is met
            child.spec.restart_file.unlink(missing_ok=True)
        if child.spec.pid_file is not None:
            atomic_write(child.spec.pid_file, f"{child.proc.pid}\n")  # never read half-written
        if log is None:
            child.reader = threading.Thread(
                target=self._copy_lines,
                args=(child.spec.name, child.proc.stdout, child.proc.pid),
                name=f"output-{child.spec.name}",
                daemon=True,
            )
            child.reader.start()

    def _copy_lines(self, name: str, pipe: BinaryIO, pid: int) -> None:
        with pipe:
            for line in iter(pipe.readline, b""):
                self.output.line(name, line, pid)

    def poll(self) -> None:
        """Notice exits and perform due restarts. Raises `ChildExited` during startup."""
        now = time.monotonic()
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    self.say(f"restarting {child.spec.name} (restart #{child.restarts})")
                    self._spawn(child)
                continue
            if child.proc is None:
                continue
            if child.proc.poll() is None:
                self._requested_restart(child, now)
                continue
            code = child.proc.returncode
            _signal_group(child.proc.pid, signal.SIGKILL)  # leftovers of the dead child
            _forget_pid(child)
            if child.kill_at is not None:
                self.say(f"{child.spec.name} {describe_exit(code)}; starting it again as asked")
                self._spawn(child)
                continue
            if not self.supervising:
                raise ChildExited(child.spec.name, code)
            if not child.spec.restart:
                self.say(
                    f"{child.spec.name} {describe_exit(code)}; not restarting it", logging.WARNING
                )
                child.proc = None
                continue
            delay = child.backoff.after_run(now - child.started_at)
            child.restart_at = now + delay
            self.say(
                f"{child.spec.name} {describe_exit(code)}; restarting in {delay:.0f}s",
                logging.WARNING,
            )

    def _requested_restart(self, child: Child, now: float) -> None:
        """For a running child: take a restart request (SIGTERM), or SIGKILL a child
        that has not exited within `grace` of one."""
        if child.kill_at is not None:
            if now >= child.kill_at:
                assert child.proc is not None  # running
                self.say(
                    f"{child.spec.name} ignored SIGTERM for {self.grace:.0f}s; killing it",
                    logging.WARNING,
                )
                _signal_group(child.proc.pid, signal.SIGKILL)
                child.kill_at = float("inf")  # still a requested restart; kill once
            return
        request = child.spec.restart_file
        if request is None or not request.exists():
            return
        request.unlink(missing_ok=True)
        assert child.proc is not None  # running
        self.say(f"restart of {child.spec.name} (pid {child.proc.pid}) asked: stopping it")
        self._terminate(child)
        child.kill_at = now + self.grace

    def _terminate(self, child: Child) -> None:
        """SIGTERM the child's group, or the child alone (`ChildSpec.term_group`)."""
        assert child.proc is not None
        if child.spec.term_group:
            _signal_group(child.proc.pid, signal.SIGTERM)
        elif child.proc.poll() is None:
            child.proc.send_signal(signal.SIGTERM)

    def run(self, start, stop: threading.Event) -> int:
        """A whole foreground life: `start()` starts the children and waits for them
        (an exit there is fatal), then they are supervised until `stop` is set (by
        the caller's signal handlers); all are stopped in any case. Returns 0, or 1
        when startup failed."""
        code = 0
        try:
            start()
            self.supervising = True
            while not stop.wait(0.2):
                self.poll()
        except Stopped:
            pass
        except (ChildExited, RuntimeError) as exc:
            self.say(f"startup failed: {exc}", logging.ERROR)
            code = 1
        finally:
            self.say("stopping")
            self.stop()
            self.say("stopped")
        return code

    def wait_for(self, what: str, ready, timeout: float, stop: threading.Event) -> None:
        """Poll the children until `ready()` is true; `Stopped` once `stop` is set,
        RuntimeError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not ready():
            self.poll()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not ready after {timeout:.0f}s")
            if stop.wait(0.1):
                raise Stopped

    def stop(self) -> None:
        """SIGTERM each child's group in reverse start order, SIGKILL after `grace` s."""
        for child in reversed(self.children):
            child.restart_at = None
            proc = child.proc
            if proc is None:
                continue
            if proc.poll() is None:
                self.say(f"stopping {child.spec.name} (pid {proc.pid})")
            self._terminate(child)
            deadline = time.monotonic() + self.grace
            try:
                proc.wait(self.grace)
            except subprocess.TimeoutExpired:
                self.say(
                    f"{child.spec.name} ignored SIGTERM for {self.grace:.0f}s; killing it",
                    logging.WARNING,
                )
            while _group_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            _forget_pid(child)
            if child.reader is not None:
                child.reader.join(timeout=2)
        self.children.clear()


def _forget_pid(child: Child) -> None:
    if child.spec.pid_file is not None:
        child.spec.pid_file.unlink(missing_ok=True)
