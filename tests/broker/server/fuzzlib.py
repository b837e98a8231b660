"""Live-socket fuzzing of the broker: capture real client requests, mutate them, send
them over many connections, and judge every answer.

Theory of operation:

- `RecordingProxy` sits between real clients (kcat, confluent-kafka) and a broker
  that advertises the proxy's address, and keeps every client-to-broker frame (the
  bytes after the int32 size prefix). That is the seed corpus.
- `field_map(frame)` walks a request with the codec's own schema declarations
  (broker/protocol/registry.SCHEMAS) and returns where each header field, integer,
  length/count prefix and record set sits, so mutations can aim at length fields,
  integers and record batches, not only at random bytes.
- `make_case(corpus, rng)` builds one connection's payload: a few corpus frames, at
  least one of them mutated (bit flips, byte insert/delete, length corruption,
  truncation, integer extremes, frame duplication and concatenation, api key/version
  swaps, size-prefix corruption, record batch surgery with the CRC fixed up so the
  batch reaches the broker's deeper checks), then a valid ApiVersions v0 "canary".
- `expectation(payload)` predicts, with the broker's own framing rule and codec,
  what the broker must do: answer the canary (everything decodes), close the
  connection without answering the canary (a malformed frame, a bad size prefix, an
  unsupported API), or wait for more bytes (an incomplete last frame).
- `run_case(port, case)` sends the payload on a fresh connection and checks the
  broker against that prediction within a deadline; responses must be whole frames
  whose correlation ids follow request order.
- `check_stored(port)` fetches every partition of every topic and decodes every batch
  with broker/protocol/records.py (CRC, lengths, records, offsets).

Every case draws from `random.Random(f"{seed}:{index}")`, so a case reproduces from
(seed, index, corpus) regardless of thread scheduling; `Case.describe()` says what
was done to which frame.
"""

from __future__ import annotations

import dataclasses
import random
import socket
import struct
import threading
import time

import crc32c

from broker.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    InvalidRequest,
    UnsupportedVersion,
    decode_request,
    encode_request,
)
from broker.protocol import schema as s
from broker.protocol.records import (
    CRC_AT,
    CRC_FROM,
    HEADER_SIZE,
    LENGTH_AT,
    LOG_OVERHEAD,
    iter_batches,
)
from broker.protocol.registry import SCHEMAS, is_flexible
from common.ports import free_port

CANARY_CORRELATION = 0x7ABC0DE5
MAX_REQUEST = 1 << 20  # socket.request.max.bytes of the fuzzed broker
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


# --------------------------------------------------------------------------- capture


class RecordingProxy:
    """Loopback TCP proxy to 127.0.0.1:target_port that records client frames.

    Threads: one accept thread and two pump threads per connection; `frames()` may be
    called from any thread and returns a copy. Owned by the test that starts it.
    """

    def __init__(self, target_port: int, port: int | None = None):
        self.target_port = target_port
        self.port = port or free_port()
        self._frames: list[bytes] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._socks: list[socket.socket] = []
        self._closed = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RecordingProxy:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True, name="rec-proxy").start()
        return self

    def close(self) -> None:
        self._closed = True
        for sock in [self._listener, *self._socks]:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def frames(self) -> list[bytes]:
        with self._lock:
            return list(self._frames)

    def api_keys(self) -> set[int]:
        return {_I16.unpack_from(f, 0)[0] for f in self.frames() if len(f) >= 2}

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            except OSError:
                return
            upstream.settimeout(None)
            self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, record: bool) -> None:
        buf = bytearray()
        try:
            while data := src.recv(65536):
                if record:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + _I32.unpack_from(buf, 0)[0]:
                        size = _I32.unpack_from(buf, 0)[0]
                        with self._lock:
                            self._frames.append(bytes(buf[4 : 4 + size]))
                        del buf[: 4 + size]
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def dedupe(frames: list[bytes]) -> list[bytes]:
    """Frames that differ in more than their correlation id, in first-seen order."""
    seen = set()
    out = []
    for f in frames:
        if len(f) < 8:
            continue
        key = f[:4] + f[8:]
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def save_corpus(frames: list[bytes], path) -> None:
    path.write_bytes(b"".join(_framed(f) for f in frames))


def load_corpus(path) -> list[bytes]:
    data = path.read_bytes()
    frames, pos = [], 0
    while pos < len(data):
        size = _I32.unpack_from(data, pos)[0]
        frames.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return frames


# --------------------------------------------------------------------------- field map


@dataclasses.dataclass(frozen=True)
class Spot:
    """One field of a request frame: where it is, how wide, what kind."""

    pos: int
    size: int
    kind: str  # "int", "bool", "len16" (string), "len32" (bytes/records), "count" (array)
    name: str


@dataclasses.dataclass
class FieldMap:
    spots: list[Spot]
    records: list[tuple[int, int]]  # (position, length) of each non-null record set


def field_map(frame: bytes) -> FieldMap | None:
    """Walk a decodable request frame with its schema; None if it is not one, or if
    it is in a flexible version (varint lengths, tagged fields: mutated byte-wise only)."""
    try:
        header, _ = decode_request(frame, strict=True)
    except InvalidRequest:
        return None
    if is_flexible(header.api_key, header.api_version):
        return None
    out = FieldMap(
        [Spot(0, 2, "int", "api_key"), Spot(2, 2, "int", "api_version")],
        [],
    )
    out.spots += [Spot(4, 4, "int", "correlation_id"), Spot(8, 2, "len16", "client_id")]
    n = _I16.unpack_from(frame, 8)[0]
    pos = 10 + max(n, 0)
    fields = SCHEMAS[ApiKey(header.api_key)].request
    _walk(fields, header.api_version, frame, pos, out)
    return out


def _walk(fields, version: int, buf: bytes, pos: int, out: FieldMap) -> int:
    for f in fields:
        if f.exists(version):
            pos = _walk_type(f.type, f.name, version, buf, pos, out)
    return pos


def _walk_type(t, name: str, version: int, buf: bytes, pos: int, out: FieldMap) -> int:
    if isinstance(t, s.Fixed):
        size = struct.calcsize(t.fmt)
        out.spots.append(Spot(pos, size, "bool" if t is s.BOOL else "int", name))
        return pos + size
    if isinstance(t, list | s.Array):
        out.spots.append(Spot(pos, 4, "count", name))
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
        for _ in range(max(n, 0)):
            if isinstance(t, list):
                pos = _walk(t, version, buf, pos, out)
            else:
                pos = _walk_type(t.item, name, version, buf, pos, out)
        return pos
    if t is s.STRING:
        out.spots.append(Spot(pos, 2, "len16", name))
        return pos + 2 + max(_I16.unpack_from(buf, pos)[0], 0)
    if t is s.UUID:
        return pos + 16
    out.spots.append(Spot(pos, 4, "len32", name))
    n = _I32.unpack_from(buf, pos)[0]
    if t is s.RECORDS and n > 0:
        out.records.append((pos + 4, n))
    return pos + 4 + max(n, 0)


# --------------------------------------------------------------------------- mutation

_EXTREMES = {
    1: [0, 1, -1, 127, -128, 2],
    2: [0, 1, -1, -2, 0x7FFF, -0x8000, 0x7FFE],
    4: [0, 1, -1, -2, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE, 1 << 20, (1 << 20) + 1],
    8: [0, 1, -1, -2, 2**63 - 1, -(2**63), 2**31],
}
_FMT = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}


def _put(buf: bytearray, pos: int, size: int, value: int) -> None:
    lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
    value = lo + (value - lo) % (hi - lo + 1)
    struct.pack_into(_FMT[size], buf, pos, value)


def _get(buf, pos: int, size: int) -> int:
    return struct.unpack_from(_FMT[size], buf, pos)[0]


def _spots(fm: FieldMap | None, frame: bytearray) -> list[Spot]:
    """The mapped fields still inside `frame` (an earlier step may have shortened it)."""
    return [sp for sp in fm.spots if sp.pos + sp.size <= len(frame)] if fm else []


def _bitflip(frame: bytearray, rng: random.Random, fm) -> str:
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(frame))
        frame[i] ^= 1 << rng.randrange(8)
    return "bitflip"


def _insert(frame: bytearray, rng: random.Random, fm) -> str:
    i = rng.randrange(len(frame) + 1)
    frame[i:i] = rng.randbytes(rng.randint(1, 8))
    return f"insert@{i}"


def _delete(frame: bytearray, rng: random.Random, fm) -> str:
    i = rng.randrange(len(frame))
    del frame[i : i + rng.randint(1, 8)]
    return f"delete@{i}"


def _truncate(frame: bytearray, rng: random.Random, fm) -> str:
    cut = rng.randrange(len(frame))
    del frame[cut:]
    return f"truncate@{cut}"


def _length(frame: bytearray, rng: random.Random, fm) -> str:
    spots = [sp for sp in _spots(fm, frame) if sp.kind in ("len16", "len32", "count")]
    if not spots:
        return _bitflip(frame, rng, fm)
    sp = rng.choice(spots)
    old = _get(frame, sp.pos, sp.size)
    new = rng.choice(_EXTREMES[sp.size] + [old + 1, old - 1, old * 2, old + rng.randint(2, 99)])
    _put(frame, sp.pos, sp.size, new)
    return f"length {sp.name}@{sp.pos}={new}"


def _integer(frame: bytearray, rng: random.Random, fm) -> str:
    spots = [sp for sp in _spots(fm, frame) if sp.kind in ("int", "bool")]
    if not spots:
        return _bitflip(frame, rng, fm)
    sp = rng.choice(spots)
    new = rng.choice(_EXTREMES[sp.size] + [rng.getrandbits(8 * sp.size)])
    _put(frame, sp.pos, sp.size, new)
    return f"int {sp.name}@{sp.pos}={new}"


def _api(frame: bytearray, rng: random.Random, fm) -> str:
    if len(frame) < 4:
        return _bitflip(frame, rng, fm)
    keys = [int(k) for k in SUPPORTED_VERSIONS]
    key = rng.choice(keys + [-1, 9, 99, 0x7FFF, rng.randrange(-100, 100)])
    lo, hi = SUPPORTED_VERSIONS.get(key, (0, 0))
    version = rng.choice([lo, hi, hi + 1, -1, 0x7FFF, rng.randint(lo, hi), rng.randint(0, 20)])
    struct.pack_into(">hh", frame, 0, key, version)
    return f"api {key} v{version}"


def _batch(frame: bytearray, rng: random.Random, fm) -> str:
    """Change one record batch inside a record set, then (usually) fix its CRC so the
    broker's checks past the CRC are what has to catch it."""
    sets = [(p, n) for p, n in fm.records if p + n <= len(frame)] if fm else []
    if not sets:
        return _integer(frame, rng, fm)
    start, length = rng.choice(sets)
    starts = []
    pos = start
    while pos + HEADER_SIZE <= start + length:
        starts.append(pos)
        blen = _I32.unpack_from(frame, pos + LENGTH_AT)[0]
        if blen <= 0:
            break
        pos += LOG_OVERHEAD + blen
    if not starts:
        return _bitflip(frame, rng, fm)
    b = rng.choice(starts)
    batch_end = min(start + length, b + LOG_OVERHEAD + max(_I32.unpack_from(frame, b + 8)[0], 0))
    what = rng.choice(
        ["byte", "byte", "varint", "attributes", "count", "delta", "magic", "blen", "pid"]
    )
    if what == "byte" and batch_end > b + HEADER_SIZE:
        i = rng.randrange(b + HEADER_SIZE, batch_end)
        frame[i] = rng.randrange(256)
    elif what == "varint" and batch_end > b + HEADER_SIZE:
        i = rng.randrange(b + HEADER_SIZE, batch_end)
        frame[i] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x81])
    elif what == "attributes":
        _put(frame, b + 21, 2, rng.choice([0, 1, 2, 3, 4, 5, 7, 0x08, 0x10, 0x20, 0x30, -1]))
    elif what == "count":
        _put(frame, b + 57, 4, rng.choice(_EXTREMES[4] + [_get(frame, b + 57, 4) + 1]))
    elif what == "delta":
        _put(frame, b + 23, 4, rng.choice(_EXTREMES[4] + [_get(frame, b + 23, 4) + 1]))
    elif what == "magic":
        frame[b + 16] = rng.choice([0, 1, 3, 0xFF])
    elif what == "blen":
        _put(frame, b + 8, 4, rng.choice(_EXTREMES[4] + [_get(frame, b + 8, 4) - 1]))
    else:
        _put(frame, b + 43, 8, rng.choice([0, 1, 2**62, -2]))
        _put(frame, b + 53, 4, rng.choice([0, -1, 0x7FFFFFFF]))
    fixed = rng.random() < 0.85
    if fixed:
        end = min(len(frame), b + LOG_OVERHEAD + max(_I32.unpack_from(frame, b + 8)[0], 0))
        if end > b + CRC_FROM:
            crc = crc32c.crc32c(bytes(frame[b + CRC_FROM : end]))
            struct.pack_into(">I", frame, b + CRC_AT, crc)
    return f"batch {what}@{b}{' crc-fixed' if fixed else ''}"


MUTATORS = [
    (_bitflip, 3),
    (_insert, 2),
    (_delete, 2),
    (_truncate, 2),
    (_length, 4),
    (_integer, 6),
    (_api, 2),
    (_batch, 6),
]
_MUTATOR_FNS = [m for m, w in MUTATORS for _ in range(w)]


@dataclasses.dataclass
class Case:
    index: int
    payload: bytes
    steps: list[str]

    def describe(self) -> str:
        return f"case {self.index}: {'; '.join(self.steps)} ({len(self.payload)} bytes)"


def canary() -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 0, CANARY_CORRELATION, "canary", {})


def _framed(frame: bytes) -> bytes:
    return _I32.pack(len(frame)) + frame


def make_case(corpus: list[bytes], maps: list, seed: int, index: int) -> Case:
    """One connection's payload: corpus frames, some mutated, then the canary."""
    rng = random.Random(f"{seed}:{index}")
    parts: list[bytes] = []
    steps: list[str] = []
    n = rng.choice([1, 1, 1, 2, 3])
    mutated_one = False
    for k in range(n):
        i = rng.randrange(len(corpus))
        frame = bytearray(corpus[i])
        if not mutated_one and (k == n - 1 or rng.random() < 0.5):
            mutated_one = True
            desc = [f"frame {i}"]
            for _ in range(rng.choice([1, 1, 1, 1, 2, 3])):
                if not frame:
                    break
                mutate = rng.choice(_MUTATOR_FNS)
                try:
                    desc.append(mutate(frame, rng, maps[i]))
                except (struct.error, IndexError):  # a field moved by an earlier step
                    desc.append(f"{mutate.__name__} failed, " + _bitflip(frame, rng, None))
            steps.append(" ".join(desc))
            raw = _framed(bytes(frame))
            r = rng.random()
            if r < 0.05:  # size prefix says more than follows
                raw = _I32.pack(len(frame) + rng.randint(1, 64)) + bytes(frame)
                steps.append("size+")
            elif r < 0.08:
                raw = _I32.pack(max(len(frame) - rng.randint(1, 16), 0)) + bytes(frame)
                steps.append("size-")
            elif r < 0.11:
                raw = _I32.pack(rng.choice([-1, -(2**31), 2**31 - 1, MAX_REQUEST + 1])) + raw[4:]
                steps.append("size!")
            elif r < 0.16:
                raw = raw * rng.randint(2, 4)
                steps.append("dup")
        else:
            steps.append(f"frame {i}")
            raw = _framed(bytes(frame))
        parts.append(raw)
    if rng.random() < 0.3:  # write it in pieces: framing across reads
        steps.append("split")
    return Case(index, b"".join(parts) + canary(), steps)


# --------------------------------------------------------------------------- oracle

CLOSE, ANSWER, WAIT = "close", "answer", "wait"
_MAY_WAIT = {ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.PRODUCE}


@dataclasses.dataclass
class Expectation:
    outcome: str  # CLOSE: must close unanswered; ANSWER: canary answered; WAIT: incomplete
    correlations: list[int]  # of the frames the broker will decode, in order
    reason: str = ""
    may_wait: bool = False  # a request that may legitimately hold the canary back


def expectation(payload: bytes, max_request: int = MAX_REQUEST) -> Expectation:
    """What the broker must do with `payload`, by its framing rule and its codec."""
    pos = 0
    corrs: list[int] = []
    may_wait = False
    while pos < len(payload):
        if len(payload) - pos < 4:
            return Expectation(WAIT, corrs, "partial size prefix", may_wait)
        size = _I32.unpack_from(payload, pos)[0]
        if size < 0 or size > max_request:
            return Expectation(CLOSE, corrs, f"size prefix {size}", may_wait)
        if len(payload) - pos - 4 < size:
            return Expectation(WAIT, corrs, "incomplete frame", may_wait)
        frame = payload[pos + 4 : pos + 4 + size]
        pos += 4 + size
        try:
            header, body = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key == ApiKey.API_VERSIONS:
                corrs.append(e.correlation_id)
                continue
            return Expectation(CLOSE, corrs, str(e), may_wait)
        except InvalidRequest as e:
            return Expectation(CLOSE, corrs, str(e), may_wait)
        corrs.append(header.correlation_id)
        if header.api_key in _MAY_WAIT:
            may_wait = True
    if not corrs or corrs[-1] != CANARY_CORRELATION:  # a mutated size ate the canary
        return Expectation(WAIT, corrs, "canary absorbed", may_wait)
    return Expectation(ANSWER, corrs, "", may_wait)


class Verdict(AssertionError):
    pass


def _read_frames(sock: socket.socket, deadline: float, until_corr: int | None):
    """Read response frames until EOF/reset (closed=True), the frame with correlation
    id `until_corr`, or the deadline (timed_out=True). -> (corrs, closed, timed_out)."""
    buf = bytearray()
    corrs: list[int] = []
    raw = bytearray()
    while True:
        while len(buf) >= 4:
            size = _I32.unpack_from(buf, 0)[0]
            if size < 4 or size > 64 << 20:
                raise Verdict(f"response frame of size {size} after {corrs}: {bytes(raw[:64])!r}")
            if len(buf) < 4 + size:
                break
            corrs.append(_I32.unpack_from(buf, 4)[0])
            del buf[: 4 + size]
            if until_corr is not None and corrs[-1] == until_corr:
                return corrs, False, False
        left = deadline - time.monotonic()
        if left <= 0:
            return corrs, False, True
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return corrs, True, False
        except TimeoutError:
            return corrs, False, True
        if not data:  # a frame cut short by the close is fine: it cannot be misread
            return corrs, True, False
        buf += data
        raw += data


def _in_order(got: list[int], sent: list[int]) -> bool:
    it = iter(sent)
    return all(any(c == s for s in it) for c in got)


def run_case(port: int, case: Case, deadline_s: float = 10.0) -> str:
    """Send `case` on a new connection and judge the broker; raises Verdict."""
    exp = expectation(case.payload)
    deadline = time.monotonic() + deadline_s
    with socket.create_connection(("127.0.0.1", port), timeout=deadline_s) as sock:
        try:
            if "split" in case.steps:
                cut = len(case.payload) // 2
                sock.sendall(case.payload[:cut])
                sock.sendall(case.payload[cut:])
            else:
                sock.sendall(case.payload)
            if exp.outcome == WAIT or (exp.outcome == ANSWER and exp.may_wait):
                sock.shutdown(socket.SHUT_WR)  # EOF is the broker's cue to close
        except (ConnectionResetError, BrokenPipeError):
            if exp.outcome == ANSWER and not exp.may_wait:
                raise Verdict("broker reset a connection whose requests all decode") from None
            return exp.outcome
        until = CANARY_CORRELATION if exp.outcome == ANSWER else None
        corrs, closed, timed_out = _read_frames(sock, deadline, until)
    if not _in_order(corrs, exp.correlations):
        raise Verdict(f"responses {corrs} out of request order {exp.correlations}")
    if exp.outcome == CLOSE:
        if CANARY_CORRELATION in corrs:
            raise Verdict(f"answered the canary after a malformed request ({exp.reason})")
        if timed_out:
            raise Verdict(f"connection left open after a malformed request ({exp.reason})")
    elif timed_out:
        raise Verdict(f"no answer and no close within {deadline_s}s ({exp.outcome})")
    elif exp.outcome == ANSWER and not exp.may_wait and closed:
        raise Verdict("broker closed a connection whose requests all decode")
    return exp.outcome


# --------------------------------------------------------------------------- checks


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def check_batches(data: bytes) -> tuple[int, int]:
    """Validate every batch of a fetched record set (CRC, lengths, records, offsets);
    a partial last batch is allowed. -> (batches, records)."""
    n_batches = n_records = 0
    for batch in iter_batches(data, validate=True, allow_partial_tail=True):
        n_batches += 1
        records = batch.records()
        if len(records) != batch.records_count:
            raise Verdict(f"{batch}: {len(records)} records, header says {batch.records_count}")
        offsets = [r.offset for r in records]
        if offsets != sorted(set(offsets)) or (
            offsets and (offsets[0] < batch.base_offset or offsets[-1] > batch.last_offset)
        ):
            raise Verdict(f"{batch}: record offsets {offsets[:5]}... outside the batch")
        n_records += len(records)
    return n_batches, n_records
