"""Hostile requests against `translator serve`, one at a time, on 127.0.0.1: what each gets
back (status, seconds) and what it costs the server (resident memory before and after,
tracebacks in its log). Used by `python scripts/load_test.py --mode hostile`.

Each probe writes to a raw socket, so that it can lie about its body (a Content-Length
it never sends, a body far larger than any limit, chunks with no length announced) the
way a broken or malicious client does; it waits at most `WAIT` seconds for an answer.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WAIT = 30.0  # seconds a probe waits for the server's answer
MB = 1024 * 1024


@dataclass
class Outcome:
    probe: str
    status: str  # the HTTP status, or what happened instead ("no answer", "reset")
    seconds: float
    rss_before_mb: float
    rss_after_mb: float


def rss_mb(pid: int) -> float:
    """The process's resident memory in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _request(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _status(sock: socket.socket, deadline: float) -> str:
    """The status code of the answer, or what came instead, by `deadline`."""
    data = b""
    while b"\r\n" not in data:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            return "no answer"
        except ConnectionError:
            return "reset"
        if not chunk:
            return "closed"
        data += chunk
    return data.split(b" ", 2)[1].decode(errors="replace")


def _send(port: int, head: bytes, body_chunks, pause: float = 0.0) -> str:
    """Send `head` then the chunks of the body (stopping when the server stops reading or
    answers), then read the status."""
    deadline = time.monotonic() + WAIT
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            try:
                sock.settimeout(5.0)
                sock.sendall(chunk)
            except (TimeoutError, ConnectionError):
                break  # the server has stopped reading: its answer (if any) says why
            if pause:
                time.sleep(pause)
        return _status(sock, deadline)


def big_body(port: int, size: int = 200 * MB) -> str:
    """A JSON body of `size` bytes, announced honestly with Content-Length."""
    head = _request("/translate", {"Content-Type": "application/json", "Content-Length": str(size)})
    block = b'{"text": ["' + b"a" * (MB - 20) + b'"], "x": ""}'
    return _send(port, head, (block[: min(MB, size - i)] for i in range(0, size, MB)))


def chunked_body(port: int, size: int = 200 * MB) -> str:
    """The same size in chunks, with no Content-Length: the limit must hold while reading."""
    head = _request(
        "/translate", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    )
    chunk = b"a" * MB
    frames = (b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(size // MB))
    return _send(port, head, [*frames, b"0\r\n\r\n"] if size < 8 * MB else frames)


def lying_length(port: int) -> str:
    """Content-Length 1,000 and 10 bytes sent: a client that stalls mid-body."""
    head = _request("/translate", {"Content-Type": "application/json", "Content-Length": "1000"})
    return _send(port, head, [b'{"text": ['])


def json_body(body: bytes) -> Callable[[int], str]:
    def probe(port: int) -> str:
        head = _request(
            "/translate", {"Content-Type": "application/json", "Content-Length": str(len(body))}
        )
        return _send(port, head, [body])

    return probe


PROBES: dict[str, Callable[[int], str]] = {
    "200 MB body, Content-Length": big_body,
    "200 MB body, chunked": chunked_body,
    "Content-Length 1000, 10 bytes sent": lying_length,
    "nested arrays, 100,000 deep": json_body(b"[" * 100_000 + b"]" * 100_000),
    "nested objects in text, 10,000 deep": json_body(
        b'{"text": ' + b'{"a": ' * 10_000 + b"1" + b"}" * 10_000 + b"}"
    ),
    "NaN beam": json_body(b'{"text": ["Hi."], "beam": NaN}'),
    "duplicate keys": json_body(b'{"text": ["Hi."], "text": ["Ho."]}'),
    "text a string": json_body(b'{"text": "Hi."}'),
    "beam a huge integer": json_body(b'{"text": ["Hi."], "beam": 1' + b"0" * 5000 + b"}"),
    "not UTF-8": json_body(b'{"text": ["\xff\xfe"]}'),
}


def run_probes(port: int, pid: int) -> list[Outcome]:
    outcomes = []
    for name, probe in PROBES.items():
        before = rss_mb(pid)
        start = time.perf_counter()
        try:
            status = probe(port)
        except OSError as exc:
            status = type(exc).__name__
        seconds = time.perf_counter() - start
        time.sleep(0.5)  # let the server settle before reading its memory
        outcomes.append(Outcome(name, status, seconds, before, rss_mb(pid)))
    return outcomes
