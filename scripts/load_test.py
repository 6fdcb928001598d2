"""Load test for `translator serve`, batching on against off in one run: N concurrent
clients send requests for T seconds to a server on 127.0.0.1 (loopback only; the counts
and times are bounded), then requests/s, sentences/s, latency percentiles and errors.

    python scripts/load_test.py                       # 16 clients, 20 s each way
    python scripts/load_test.py --clients 32 --seconds 30 --beam 5

The model is the config's run best.pt (or --checkpoint); without one, the config's data is
prepared if needed and a model trained for one minute into a temporary run (barely
trained: only the serving is measured). Each request carries --per-request sentences
drawn in a fixed order from the test split. The server runs in its own process; the
clients are threads with one keep-alive connection each.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from translator import config as config_module  # noqa: E402
from translator.data.layout import read_split, tokenizer_file  # noqa: E402

MAX_CLIENTS, MAX_SECONDS = 256, 300


def translator_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "translator", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_for(config_path: str, checkpoint: Path | None, work: Path) -> Path:
    """The checkpoint to serve; a one-minute model when there is none."""
    config = config_module.load(config_path)
    path = checkpoint or Path(config.train.run_dir) / "checkpoints/best.pt"
    if path.is_file():
        return path
    print(f"no checkpoint at {path}: training one for a minute (only serving is measured)")
    if not tokenizer_file(config.data.dir, "zh").is_file():
        subprocess.run(translator_cli("prepare", "-c", config_path), check=True)
    run = work / "run"
    subprocess.run(
        translator_cli(
            "train", "-c", config_path, "--max-minutes", "1", "--set", f"train.run_dir='{run}'"
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return run / "checkpoints/best.pt"


class Server:
    def __init__(self, config_path: str, checkpoint: Path, batching: bool):
        self.port = free_port()
        flag = "--batching" if batching else "--no-batching"
        command = translator_cli("serve", "-c", config_path, "--checkpoint", str(checkpoint), flag)
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)], stdout=subprocess.DEVNULL
        )
        for _ in range(600):
            if self.process.poll() is not None:
                sys.exit(f"the server exited with code {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        sys.exit("the server did not start within 60 s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def client(port: int, bodies: list[bytes], until: float, latencies: list, errors: list):
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
            else:
                latencies.append(time.perf_counter() - start)
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        i += 1
    connection.close()


def load(port: int, clients: int, seconds: float, bodies: list[bytes]) -> dict:
    latencies: list[float] = []
    errors: list = []
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(
            target=client, args=(port, bodies[c::clients] or bodies, until, latencies, errors)
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
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--per-request", type=int, default=1, help="sentences per request")
    parser.add_argument("--beam", type=int, default=1)
    args = parser.parse_args()
    if not 1 <= args.clients <= MAX_CLIENTS or not 0 < args.seconds <= MAX_SECONDS:
        sys.exit(f"--clients must be 1–{MAX_CLIENTS} and --seconds at most {MAX_SECONDS}")

    with tempfile.TemporaryDirectory() as work:
        checkpoint = model_for(args.config, args.checkpoint, Path(work))
        config = config_module.load(args.config)
        english = read_split(config.data.dir, "test")[0]
        k = args.per_request
        bodies = [
            json.dumps({"text": english[i : i + k], "beam": args.beam}).encode()
            for i in range(0, len(english) - k + 1, k)
        ]
        print(
            f"{args.clients} clients × {args.seconds:g} s, {k} sentence(s) a request, "
            f"beam {args.beam}, model {checkpoint}"
        )
        results = {}
        for batching in (True, False):
            server = Server(args.config, checkpoint, batching)
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
    if on["errors"] + off["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
