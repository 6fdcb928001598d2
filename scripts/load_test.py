"""Load test for `translator serve` on 127.0.0.1 (loopback only; the counts and times are
bounded), and its page as a person uses it. The modes:

  batching  (default) batching on against off in one run: N concurrent clients send
            requests for T seconds, then requests/s, latency percentiles and errors
  overload  more clients than the server's queue admits: how many got 200 and how many
            503, p50/p99 of the 200s, and the server's resident memory before and after
            (every client waits as long as a 503's Retry-After asks before its next request)
  hostile   normal traffic from N clients while one more sends the hostile requests below
            one by one: each one's status, seconds and the server's
            memory, tracebacks in the server's log, and whether normal requests kept
            succeeding
  attacks   single requests that try to stop the server for everyone, one at a time, each
            with an honest /translate sent a second after it and /health timed every 50 ms
            (its p99 and longest): a body of 95,000 keys with one given twice to /lt/detect
            without a key, a /document of "a+" * 50,000, 64 texts of "Hi. " * 250 at beam 8,
            {"q": "a\\ud800"} sent with eight honest requests, malformed values ({"text": 5},
            {"text": true}, /lt {"q": []}, a lone surrogate as a glossary key), 1,100
            sockets that send a header line every 5 s (how many the server closed in 32 s),
            and 40 requests with wrong keys at once to a server with serve.rate_limit 2 and
            serve.rate_burst 5. The server has an API key (in its environment); the honest
            requests carry it
  first     the first request after start-up against the ten after it, with
            serve.warm_up off and on in one run: seconds until /health and /ready say 200,
            then one client sends the same request eleven times (waiting for /ready first);
            the first's time (as the client saw it, and the server's own "milliseconds")
            over the median of the next ten. Ends with the line
            first: off=X on=Y (the server's ratio, first ÷ median of the next ten)
  aggressive  --polite clients that wait for each answer and honour Retry-After (the
            server's capacity), then N clients that retry 50 ms after every 503 or 429,
            ignoring Retry-After, on the same server: answered requests a second of each,
            /health's p99 during the flood, the server's memory (all its processes) before
            the flood and a minute after, and tracebacks in its log
  page      the page at / in headless Chromium at a desktop's and a phone's width, as a
            person uses it: four lines typed (a URL among them), a glossary entry, and the
            n-best list of the first line opened; pictured as serve-page.png and
            serve-page-phone.png in --out (default docs/, what docs/deploy.md shows). Needs
            Playwright (make install) and the system's Chromium (make test installs it with
            apt where it can)

    python scripts/load_test.py                       # 16 clients, 20 s each way
    python scripts/load_test.py --clients 32 --seconds 30 --beam 5
    python scripts/load_test.py --mode overload --clients 200 --set serve.max_queue=64
    python scripts/load_test.py --mode hostile --clients 4
    python scripts/load_test.py --mode attacks -c configs/tiny.toml
    python scripts/load_test.py --mode aggressive --clients 300 --per-request 16
    python scripts/load_test.py --mode first --per-request 3
    python scripts/load_test.py --mode page --checkpoint runs/tatoeba-cpu

The model is the config's run's model (train.final; or --checkpoint); without one, the
config's data is prepared if needed and a model trained for one minute into a temporary run
(barely trained: only the serving is measured). Each request carries --per-request sentences
drawn in a fixed order from the test split. The server runs in its own process; the
clients are threads with one keep-alive connection each.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from common import (
    ROOT,
    adopt_orphans,
    config_home,
    end_group,
    end_on_sigterm,
    load_config,
    translator_command,
)

from translator.data.layout import read_split, tokenizer_file
from translator.model.rundir import RunDir, checkpoint_in

MAX_CLIENTS, MAX_SECONDS = 400, 300


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_for(config_path: str, checkpoint: Path | None, work: Path) -> Path:
    """The checkpoint to serve; a one-minute model when there is none."""
    config = load_config(config_path)
    path = checkpoint_in(checkpoint) if checkpoint else RunDir(config.train.run_dir).final.path
    if path.is_file():
        return path
    print(f"no checkpoint at {path}: training one for a minute (only serving is measured)")
    prepared(config_path)
    run = work / "run"
    subprocess.run(
        translator_command(
            "train", "-c", config_path, "--max-minutes", "1", "--set", f"train.run_dir='{run}'"
        ),
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=config_home(config_path),
    )
    return RunDir(run).final.path


def prepared(config_path: str) -> None:
    """The config's data prepared, where it is not yet (the requests are its test split)."""
    if not tokenizer_file(load_config(config_path).data.dir, "zh").is_file():
        subprocess.run(
            translator_command("prepare", "-c", config_path),
            check=True,
            cwd=config_home(config_path),
        )


class Server:
    def __init__(
        self,
        config_path: str,
        checkpoint: Path,
        batching: bool,
        sets: list[str] = (),
        log: Path | None = None,
    ):
        self.port = free_port()
        flag = "--batching" if batching else "--no-batching"
        command = translator_command("serve", "-c", config_path, "--checkpoint", str(checkpoint))
        command.append(flag)
        command += [arg for item in sets for arg in ("--set", item)]
        self.log = log.open("w") if log else None
        adopt_orphans()  # so that stop() can wait for the workers it leaves, if any
        self.process = subprocess.Popen(  # the access log: to `log`, or nowhere
            [*command, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=self.log or subprocess.DEVNULL,
            cwd=config_home(config_path),
            start_new_session=True,  # its group: the server and its workers, ended by stop()
        )
        try:
            self._wait_until_listening()
        except BaseException:  # it exited, never listened, or Ctrl-C: nothing left running
            self.stop()
            raise

    def _wait_until_listening(self) -> None:
        for _ in range(600):
            if self.process.poll() is not None:
                sys.exit(f"the server exited with code {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        sys.exit("the server did not start within 60 s")

    def stop(self) -> int:
        """SIGTERM to the server (it finishes what it admitted), its exit code; then
        whatever of its group is left killed and waited for (common.py's end_group)."""
        try:
            self.process.terminate()
            return self.process.wait(timeout=30)
        finally:
            end_group(self.process)
            if self.log:
                self.log.close()


def client(
    port: int,
    bodies: list[bytes],
    until: float,
    latencies: list,
    errors: list,
    retry: float | None = None,
):
    """Send requests until `until`; after a refusal wait as its Retry-After asks, or
    `retry` seconds when given (a client that ignores Retry-After)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    i = 0
    while time.monotonic() < until:
        start = time.perf_counter()
        try:
            connection.request(
                "POST", "/translate", bodies[i % len(bodies)], {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)
                asked = float(response.getheader("Retry-After") or 0)
                wait = asked if retry is None else retry
                time.sleep(min(wait, max(0.0, until - time.monotonic())))
            else:
                latencies.append(time.perf_counter() - start)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        i += 1
    connection.close()


def load(
    port: int, clients: int, seconds: float, bodies: list[bytes], retry: float | None = None
) -> dict:
    latencies: list[float] = []
    errors: list = []
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client,
            args=(port, bodies[c::clients] or bodies, until, latencies, errors, retry),
        )
        for c in range(clients)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [float("nan")] * 99
    return {
        "statuses": {s: errors.count(s) for s in set(errors)},
        "requests": len(latencies),
        "per_s": len(latencies) / elapsed,
        "p50": cuts[49] * 1000,
        "p95": cuts[94] * 1000,
        "p99": cuts[98] * 1000,
        "errors": len(errors),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default=str(ROOT / "configs/tatoeba-cpu.toml"))
    parser.add_argument("--checkpoint", type=Path)
    modes = ("batching", "overload", "hostile", "attacks", "aggressive", "first", "page")
    parser.add_argument("--mode", choices=modes, default="batching")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument(
        "--polite", type=int, default=16, help="aggressive: polite clients before the flood"
    )
    parser.add_argument(
        "--settle", type=float, default=60.0, help="aggressive: seconds before memory is read"
    )
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--per-request", type=int, default=1, help="sentences per request")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], help="a serve config override")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="page: where the PNGs go")
    args = parser.parse_args()
    end_on_sigterm()  # SIGTERM, as Ctrl-C, ends the processes started below
    args.config = str(Path(args.config).resolve())
    if args.checkpoint:
        args.checkpoint = args.checkpoint.resolve()
    if not 1 <= args.clients <= MAX_CLIENTS or not 0 < args.seconds <= MAX_SECONDS:
        sys.exit(f"--clients must be 1–{MAX_CLIENTS} and --seconds at most {MAX_SECONDS}")

    if args.mode == "page":
        with tempfile.TemporaryDirectory() as work:
            pictures(args, model_for(args.config, args.checkpoint, Path(work)))
        return
    with tempfile.TemporaryDirectory() as work:
        checkpoint = model_for(args.config, args.checkpoint, Path(work))
        prepared(args.config)
        config = load_config(args.config)
        english = read_split(config.data.dir, "test")[0]
        k = args.per_request
        bodies = [
            json.dumps({"text": english[i : i + k], "beam": args.beam}).encode()
            for i in range(0, len(english) - k + 1, k)
        ]
        print(
            f"{args.mode}: {args.clients} clients × {args.seconds:g} s, {k} sentence(s) a "
            f"request, beam {args.beam}, model {checkpoint}"
        )
        modes = {
            "batching": compare_batching,
            "overload": overload,
            "hostile": hostile,
            "attacks": attacks,
            "aggressive": aggressive,
            "first": first_request,
        }
        failed = modes[args.mode](args, checkpoint, bodies, Path(work))
    if failed:
        sys.exit(1)


def compare_batching(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    results = {}
    for batching in (True, False):
        server = Server(args.config, checkpoint, batching, args.set)
        try:
            load(server.port, args.clients, 2.0, bodies)  # warm-up, not counted
            results[batching] = load(server.port, args.clients, args.seconds, bodies)
        finally:
            server.stop()
    print(
        f"\n  {'batching':9s} {'requests':>8s} {'req/s':>7s} {'p50 ms':>7s} {'p95 ms':>7s} "
        f"{'p99 ms':>7s} {'errors':>6s}"
    )
    for batching, r in results.items():
        print(
            f"  {'on' if batching else 'off':9s} {r['requests']:8d} {r['per_s']:7.1f} "
            f"{r['p50']:7.1f} {r['p95']:7.1f} {r['p99']:7.1f} {r['errors']:6d}"
        )
    on, off = results[True], results[False]
    print(
        f"\nbatching on ÷ off: {on['per_s'] / off['per_s']:.2f}× requests/s; "
        f"errors {on['errors'] + off['errors']}"
    )
    return bool(on["errors"] + off["errors"])


def first_request(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    """serve.warm_up off and on: the first request's time against the next ten's."""
    rows = {}
    for warm in (False, True):
        began = time.perf_counter()
        server = Server(
            args.config, checkpoint, True, [*args.set, f"serve.warm_up={str(warm).lower()}"]
        )
        try:
            health = until_200(server.port, "/health") - began
            ready = until_200(server.port, "/ready") - began
            rows[warm] = (health, ready, timed_requests(server.port, bodies[0], 11))
        finally:
            server.stop()
    print(
        "\n| serve.warm_up | /health 200 after s | /ready 200 after s | first ms (server) "
        "| next ten, median ms (server) | first ÷ median (server) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    ratios = {}
    for warm, (health, ready, times) in rows.items():
        client_ms, server_ms = zip(*times, strict=True)
        ratio = server_ms[0] / statistics.median(server_ms[1:])
        ratios["on" if warm else "off"] = ratio
        print(
            f"| {str(warm).lower()} | {health:.1f} | {ready:.1f} | {client_ms[0]:.1f} "
            f"({server_ms[0]:.1f}) | {statistics.median(client_ms[1:]):.1f} "
            f"({statistics.median(server_ms[1:]):.1f}) | {ratio:.2f} |"
        )
    print(f"\nfirst: off={ratios['off']:.2f} on={ratios['on']:.2f}")
    return False


def until_200(port: int, path: str, seconds: float = 120.0) -> float:
    """Poll GET `path` every 20 ms until it says 200: the perf_counter time it did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", path)
            if connection.getresponse().status == 200:
                return time.perf_counter()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            connection.close()
        time.sleep(0.02)
    sys.exit(f"{path} did not say 200 within {seconds:.0f} s")


def timed_requests(port: int, body: bytes, count: int) -> list[tuple[float, float]]:
    """`body` POSTed `count` times one after another: each one's ms as the client saw it
    and as the server measured it."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            sys.exit(f"the server answered {response.status}: {answer}")
        times.append(((time.perf_counter() - start) * 1000, answer["milliseconds"]))
    connection.close()
    return times


def overload(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    """More clients than the queue admits: the 200s, the 503s, and the server's memory."""
    server = Server(args.config, checkpoint, True, args.set)
    try:
        before = rss_mb(server.process.pid)
        r = load(server.port, args.clients, args.seconds, bodies)
        after = rss_mb(server.process.pid)
        health = timed_health(server.port)
    finally:
        server.stop()
    refused = r["statuses"].get(503, 0)
    print("\n| clients | 200 | 503 | other | p50 ms (200s) | p99 ms (200s) | RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    print(
        f"| {args.clients} | {r['requests']} | {refused} | {r['errors'] - refused} | "
        f"{r['p50']:.0f} | {r['p99']:.0f} | {before:.0f} → {after:.0f} |"
    )
    print(f"\n/health right after the flood: {health}")
    return False


def aggressive(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    """Polite clients at capacity, then a flood of clients that ignore Retry-After."""
    log = work / "server.log"
    server = Server(args.config, checkpoint, True, args.set, log)
    try:
        load(server.port, args.polite, 2.0, bodies)  # warm-up, not counted
        polite = load(server.port, args.polite, args.seconds, bodies)
        before = server_rss_mb(server.process.pid)
        probe = HealthProbe(server.port)
        flood = load(server.port, args.clients, args.seconds, bodies, retry=FLOOD_RETRY_S)
        health = probe.stop()
        time.sleep(args.settle)
        after = server_rss_mb(server.process.pid)
    finally:
        code = server.stop()
    tracebacks = log.read_text(errors="replace").count("Traceback")
    print(
        "\n| clients | answered/s | refused (status: count) | p50 ms | p99 ms | "
        "/health p99 ms (max) |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for name, r, h in (
        (f"{args.polite} polite", polite, None),
        (f"{args.clients} aggressive", flood, health),
    ):
        refused = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items(), key=str))
        health_ms = f"{h[0]:.0f} ({h[1]:.0f}, {h[2]} probes)" if h else "–"
        print(
            f"| {name} | {r['per_s']:.1f} | {refused or '0'} | {r['p50']:.0f} | "
            f"{r['p99']:.0f} | {health_ms} |"
        )
    ratio = flood["per_s"] / polite["per_s"] if polite["per_s"] else float("nan")
    parts = " → ".join("+".join(f"{mb:.0f}" for mb in rss) for rss in (before, after))
    print(
        f"\naggressive ÷ polite answered/s: {ratio:.2f}; server RSS (all its processes) "
        f"{sum(before):.0f} MB before the flood, {sum(after):.0f} MB {args.settle:g} s after "
        f"it ({sum(after) / sum(before) - 1:+.1%}; by process, MB: {parts}); tracebacks in "
        f"its log: {tracebacks}; exit code on SIGTERM: {code}"
    )
    return bool(tracebacks)


FLOOD_RETRY_S = 0.05  # what an aggressive client waits after a refusal, whatever it is told


class HealthProbe:
    """GET /health every 50 ms, timed, until stopped; in a process of its own, so that the
    flood's client threads do not delay it."""

    def __init__(self, port: int):
        context = multiprocessing.get_context("fork")  # before the flood's threads start
        self.stopped = context.Event()
        self.results, theirs = context.Pipe(duplex=False)
        self.process = context.Process(  # daemon: ended at exit if never stopped
            target=self._run, args=(port, self.stopped, theirs), daemon=True
        )
        self.process.start()

    @staticmethod
    def _run(port: int, stopped, results) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        seconds = []
        while not stopped.is_set():
            start = time.perf_counter()
            try:
                connection.request("GET", "/health")
                connection.getresponse().read()
                seconds.append(time.perf_counter() - start)
            except (OSError, http.client.HTTPException):
                seconds.append(float("inf"))  # counted as never answered
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            time.sleep(0.05)
        results.send(seconds)

    def stop(self) -> tuple[float, float, int]:
        """p99 and max in ms, and the number of probes."""
        self.stopped.set()
        ms = [s * 1000 for s in self.results.recv()]
        self.process.join()
        cuts = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else []
        p99 = cuts[98] if cuts else float("nan")
        return p99, max(ms, default=float("nan")), len(ms)


def server_rss_mb(pid: int) -> list[float]:
    """Resident memory of a process, then of each of its descendants (the decoding
    process), in MB."""
    tasks = Path(f"/proc/{pid}/task").glob("*/children")  # each thread's children
    kids = [kid for task in tasks for kid in task.read_text().split()]
    return [rss_mb(pid), *(mb for kid in kids for mb in server_rss_mb(int(kid)))]


def timed_health(port: int) -> str:
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/health")
    status = connection.getresponse().status
    return f"{status} in {(time.perf_counter() - start) * 1000:.0f} ms"


def hostile(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    """Hostile requests one by one while `--clients` clients send normal traffic."""
    log = work / "server.log"
    server = Server(args.config, checkpoint, True, args.set, log)
    normal: dict = {}
    try:
        traffic = threading.Thread(
            target=lambda: normal.update(load(server.port, args.clients, args.seconds, bodies))
        )
        traffic.start()
        outcomes = run_probes(server.port, server.process.pid)
        traffic.join()
        health = timed_health(server.port)
    finally:
        code = server.stop()
    tracebacks = log.read_text(errors="replace").count("Traceback")
    print("\n| probe | status | seconds | server RSS MB before → after |")
    print("| --- | --- | ---: | --- |")
    for o in outcomes:
        print(
            f"| {o.probe} | {o.status} | {o.seconds:.2f} | "
            f"{o.rss_before_mb:.0f} → {o.rss_after_mb:.0f} |"
        )
    print(
        f"\nnormal traffic meanwhile: {normal.get('requests', 0)} answered 200, "
        f"{normal.get('errors', 0)} not; /health after: {health}; tracebacks in the server "
        f"log: {tracebacks}; server exit code on SIGTERM: {code}"
    )
    return bool(normal.get("errors"))


# ---- the hostile probes ----------------------------------------------------------------
# Hostile requests against `translator serve`, one at a time, on 127.0.0.1: what each gets
# back (status, seconds) and what it costs the server (resident memory before and after,
# tracebacks in its log).
#
# Each probe writes to a raw socket, so that it can lie about its body (a Content-Length
# it never sends, a body far larger than any limit, chunks with no length announced) the
# way a broken or malicious client does; it waits at most `WAIT` seconds for an answer.

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


# ---- attacks: single requests that try to stop the server for everyone -----------------
# Every wait is bounded by ATTACK_WAIT (an answer not come by then reads "no answer"), so it
# also runs against a server the attacks stop.
ATTACK_WAIT = 90.0  # seconds an attack or the honest request beside it is waited for
KEY = "load-test-attacks-key"
KEYS_VARIABLE = "TRANSLATOR_API_KEYS"
HONEST = {"text": ["Where is the station?"]}


def post_as(port: int, path: str, body: bytes, wait: float, key: str | None = KEY) -> str:
    """POST `body`: the status (or "no answer", or the error's name) and the seconds."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", body, headers)
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=wait) as response:
            status = str(response.status)
    except urllib.error.HTTPError as error:
        status = str(error.code)
    except (TimeoutError, urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        status = "no answer" if isinstance(reason, TimeoutError) else type(reason).__name__
    return f"{status} in {time.perf_counter() - start:.2f} s"


def with_honest(port: int, attack, wait: float) -> tuple[str, str]:
    """Run `attack()` and, a second after it starts, one honest /translate: both outcomes."""
    with ThreadPoolExecutor(2) as pool:
        attacked = pool.submit(attack)
        time.sleep(1.0)
        honest = pool.submit(post_as, port, "/translate", json.dumps(HONEST).encode(), wait)
        return attacked.result(), honest.result()


def duplicate_keys(port: int, wait: float) -> str:
    pairs = b",".join(b'"%x":1' % i for i in range(95_000))  # 0.95 MB: under the limit
    body = b"{" + pairs + b',"5":2}'
    return post_as(port, "/lt/detect", body, wait, key=None)


def regex_document(port: int, wait: float) -> str:
    return post_as(port, "/document", json.dumps({"text": "a+" * 50_000}).encode(), wait)


def many_sentences(port: int, wait: float) -> str:
    body = json.dumps({"text": ["Hi. " * 250] * 64, "beam": 8}).encode()
    return post_as(port, "/translate", body, wait)


def lone_surrogate(port: int, wait: float) -> str:
    bad = b'{"q": "a\\ud800"}'
    bodies = [(bad, "/lt/translate")] + [(json.dumps(HONEST).encode(), "/translate")] * 8
    with ThreadPoolExecutor(9) as pool:
        found = list(pool.map(lambda b: post_as(port, b[1], b[0], wait).split()[0], bodies))
    return f"the bad one {found[0]}; the honest eight {dict(Counter(found[1:]))}"


MALFORMED = {
    '{"text": 5}': ("/translate", b'{"text": 5}'),
    '{"text": true}': ("/translate", b'{"text": true}'),
    '/lt {"q": []}': ("/lt/translate", b'{"q": []}'),
    "glossary key \\ud800": ("/translate", b'{"text": ["Hi."], "glossary": {"\\ud800": "x"}}'),
}


def malformed(port: int, wait: float) -> str:
    found = {
        name: post_as(port, path, body, wait).split()[0] for name, (path, body) in MALFORMED.items()
    }
    return ", ".join(f"{name} {status}" for name, status in found.items())


def slow_headers(port: int, wait: float, sockets: int = 1100, seconds: float = 32.0) -> str:
    """Sockets that each send a request line, then a header line every 5 s, never the end
    of the headers: how many the server closed within `seconds`."""
    held = []
    for _ in range(sockets):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            sock.setblocking(False)
            held.append(sock)
        except OSError:
            break
    opened, closed = len(held), set()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(min(5.0, max(0.0, until - time.monotonic())))
        for i, sock in enumerate(held):
            if i not in closed and not _still_open(sock):
                closed.add(i)
    for sock in held:
        sock.close()
    return f"{opened} opened, {len(closed)} closed by the server after {seconds:g} s"


def _still_open(sock: socket.socket) -> bool:
    """Send one more header line; whether the server still holds the connection."""
    try:
        if sock.recv(1, socket.MSG_PEEK) == b"":
            return False
    except BlockingIOError:
        pass
    except OSError:
        return False
    try:
        sock.send(b"X-a: b\r\n")
        return True
    except OSError:
        return False


def wrong_keys(port: int, wait: float) -> str:
    body = json.dumps(HONEST).encode()
    with ThreadPoolExecutor(40) as pool:
        found = pool.map(lambda i: post_as(port, "/translate", body, wait, f"wrong{i}"), range(40))
        statuses = Counter(outcome.split()[0] for outcome in found)
    return ", ".join(f"{count} × {status}" for status, count in sorted(statuses.items()))


ATTACKS = {
    "duplicate keys": duplicate_keys,
    "regex document": regex_document,
    "16,000 sentences": many_sentences,
    "lone surrogate": lone_surrogate,
    "malformed": malformed,
    "slow headers": slow_headers,
}


def until_healthy(port: int, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)


def run_attacks(server: Server, attacks: dict) -> list[tuple]:
    rows = []
    for name, attack in attacks.items():
        probe = HealthProbe(server.port)
        run = lambda a=attack: a(server.port, ATTACK_WAIT)  # noqa: E731
        outcome, honest = with_honest(server.port, run, ATTACK_WAIT)
        rows.append((name, outcome, honest, probe.stop()))
        until_healthy(server.port, ATTACK_WAIT)
    return rows


def attacks(args, checkpoint: Path, bodies: list[bytes], work: Path) -> bool:
    """Each of ATTACKS against a server with an API key, one at a time, then the wrong
    keys against a server with a rate limit of its own."""
    os.environ[KEYS_VARIABLE] = KEY  # the servers' key, from the environment
    log, second = work / "server.log", work / "limited.log"
    server = Server(args.config, checkpoint, True, args.set, log)
    try:
        until_healthy(server.port, 120)
        rows = run_attacks(server, ATTACKS)
    finally:
        code = server.stop()
    limited = [*args.set, "serve.rate_limit=2", "serve.rate_burst=5"]
    server = Server(args.config, checkpoint, True, limited, second)
    try:
        until_healthy(server.port, 120)
        rows += run_attacks(server, {"wrong keys": wrong_keys})
    finally:
        server.stop()
    logs = log.read_text(errors="replace") + second.read_text(errors="replace")
    tracebacks = logs.count("Traceback")
    print("\n| attack | what it got | an honest /translate a second later | /health p99 ms (max) |")
    print("| --- | --- | --- | ---: |")
    for name, outcome, honest, (p99, longest, _) in rows:
        print(f"| {name} | {outcome} | {honest} | {p99:.0f} ({longest:.0f}) |")
    print(f"\ntracebacks in the server logs: {tracebacks}; exit code on SIGTERM: {code}")
    return bool(tracebacks)


# ---- page ----------------------------------------------------------------------------------------
LINES = (
    "I have to go to sleep.",
    "Where is the station?",
    "My GPU is too slow.",
    "Read the guide at https://example.com/start first.",
)
GLOSSARY = "GPU\t显卡"
SIZES = {"serve-page.png": (1280, 760), "serve-page-phone.png": (390, 844)}


def shoot(page, url: str, path: Path) -> None:
    """The page at `url` used as a person would, then its picture at `path`."""
    page.goto(url)
    page.wait_for_function("document.getElementById('model').textContent.startsWith('Model:')")
    page.click("#glossary-box summary")
    page.fill("#glossary", GLOSSARY)
    page.fill("#text", "\n".join(LINES))
    page.wait_for_function(f"document.querySelectorAll('#out li').length === {len(LINES)}")
    page.click("#out li .zh")
    page.wait_for_selector("#out li .nbest li")
    page.evaluate("document.activeElement.blur()")
    page.screenshot(path=str(path), full_page=True)


def pictures(args, checkpoint: Path) -> None:
    """The page at both SIZES, pictured in --out (--mode page)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("needs Playwright: make install (or pip install playwright)")
    if chromium is None:
        sys.exit("needs the system's Chromium: apt-get install chromium fonts-noto-cjk")
    server = Server(args.config, checkpoint, True, args.set)
    try:
        until_200(server.port, "/ready")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for name, (width, height) in SIZES.items():
                page = browser.new_page(viewport={"width": width, "height": height})
                shoot(page, f"http://127.0.0.1:{server.port}/", args.out / name)
                page.close()
                print(f"wrote {args.out / name} ({width}×{height}, model {checkpoint})")
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
