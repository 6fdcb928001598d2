"""`translator serve` against clients that hammer it, on a real server process: decoding
goes on in its own process while a flood is refused, per-client rate limits (429 with
Retry-After, per API key and per address, before the body is read), the refusals in
/metrics, and a killed decoding process replaced. The token buckets are also tested with
a clock of their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import tiny_config, to_toml

pytest.importorskip("fastapi")
from test_serve import call, serving  # noqa: E402
from test_serve_limits import raw, request  # noqa: E402

from translator.deploy.admission import PRUNE_EVERY_S, Buckets  # noqa: E402

BODY = b'{"text": ["Tom can see the cat."]}'


def limited_config(trained, tmp_path: Path, name: str, **serve) -> Path:
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(serve)
    path = tmp_path / f"{name}.toml"
    path.write_text(to_toml(config))
    return path


def test_a_bucket_lets_a_burst_through_then_refills_at_the_rate():
    now = [0.0]
    buckets = Buckets(rate=2.0, burst=3, clock=lambda: now[0])
    assert [buckets.wait("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.wait("a") == pytest.approx(0.5)  # a token every half second
    assert buckets.wait("b") == 0.0  # another client has its own bucket
    now[0] = 0.5
    assert buckets.wait("a") == 0.0 and buckets.wait("a") == pytest.approx(0.5)
    now[0] = PRUNE_EVERY_S + 1  # both idle long enough to refill: their buckets go
    assert buckets.wait("c") == 0.0 and set(buckets.buckets) == {"c"}


def test_429_per_address_with_retry_after_before_the_body_is_read(trained, tmp_path):
    path = limited_config(trained, tmp_path, "address", rate_limit=0.1, rate_burst=2)
    with serving(path) as url:
        statuses = [request(url + "/translate", body=BODY) for _ in range(3)]
        head = f"POST /translate HTTP/1.1\nHost: x\nContent-Length: {10**9}\n"
        unread, seconds = raw(url, head)  # announces a gigabyte, sends none of it
        page, health = call(url + "/")[0], call(url + "/health")[0]
        metrics = call(url + "/metrics")[1]
    assert [status for status, _ in statuses] == [200, 200, 429]
    assert int(statuses[2][1]["retry-after"]) >= 1
    assert unread == "429" and seconds < 5
    assert page == health == 200  # only POST requests count
    assert "translator_rate_limited_total 2.0" in metrics
    assert 'translator_requests_total{path="/translate",status="429"} 2.0' in metrics
    assert "translator_rate_limit_clients 1.0" in metrics


@pytest.fixture(scope="module")
def keyed(trained, tmp_path_factory):
    """A server with two API keys, each allowed 5 requests a second; and its process."""
    tmp = tmp_path_factory.mktemp("keyed")
    path = limited_config(
        trained, tmp, "keyed", api_keys=["flood", "polite"], rate_limit=5, rate_burst=5
    )
    with serving(path, with_process=True) as (url, process):
        yield url, process


FLOOD = """
import sys, threading, time, urllib.error, urllib.request
url, key, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
statuses, stop = [], time.monotonic() + seconds
def hammer():
    while time.monotonic() < stop:
        req = urllib.request.Request(url, data=b'{"text": ["Hi."]}', headers={"X-API-Key": key})
        try:
            with urllib.request.urlopen(req, timeout=30) as answer:
                statuses.append(answer.status)
        except urllib.error.HTTPError as error:
            statuses.append(error.code)
threads = [threading.Thread(target=hammer) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(" ".join(map(str, statuses)))
"""


def test_decoding_goes_on_for_others_while_one_key_floods(keyed):
    url, _ = keyed
    decodes_before = call(url + "/health")[1]["decodes"]
    flood = subprocess.Popen(  # its own process: its threads must not hold up ours
        [sys.executable, "-c", FLOOD, url + "/translate", "flood", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # under way
    polite = []
    for _ in range(8):
        polite.append(request(url + "/translate", body=BODY, **{"X-API-Key": "polite"})[0])
        time.sleep(0.25)  # within its 5 a second
    refused = flood.communicate(timeout=60)[0].split()
    decodes = call(url + "/health")[1]["decodes"] - decodes_before
    assert refused.count("429") >= 50 and set(refused) <= {"200", "429"}
    assert polite == [200] * 8
    assert decodes >= len(polite)  # each polite request was decoded, the refused ones not


def test_the_rate_limit_is_per_key(keyed):
    url, _ = keyed
    key = {"Authorization": "Bearer flood"}
    with ThreadPoolExecutor(12) as pool:  # at once: the bucket holds 5
        statuses = list(
            pool.map(lambda _: request(url + "/translate", body=BODY, **key), range(12))
        )
    assert [status for status, _ in statuses].count(429) >= 5
    assert request(url + "/translate", body=BODY, **{"X-API-Key": "polite"})[0] == 200


def state(pid: int) -> str:
    """The process's state letter (Z: exited, not yet reaped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def decoding_process(pid: int) -> int:
    tasks = Path(f"/proc/{pid}/task").glob("*/children")  # a thread may have started it
    children = [child for task in tasks for child in task.read_text().split()]
    for child in map(int, children):
        if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text():
            return child
    raise AssertionError(f"no decoding process among {children}")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_a_killed_decoding_process_is_replaced(keyed):
    url, process = keyed
    time.sleep(1.0)  # the buckets of the tests before have refilled
    first = decoding_process(process.pid)
    os.kill(first, signal.SIGKILL)
    time.sleep(0.2)
    key = {"X-API-Key": "polite"}
    status, headers = request(url + "/translate", body=BODY, **key)
    assert status == 503 and headers["retry-after"] == "5"
    assert request(url + "/translate", body=BODY, **key)[0] == 200  # a new one started
    assert decoding_process(process.pid) != first
    assert "the decoding process stopped" in process.log.read_text()
    assert "Traceback" not in process.log.read_text()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads Linux's /proc")
def test_the_decoding_process_ends_with_a_killed_server(keyed):  # the module's last test
    _, process = keyed
    decoder = decoding_process(process.pid)
    process.kill()  # no drain, no clean-up: the pipe closes with the process
    process.wait()
    for _ in range(100):
        if not Path(f"/proc/{decoder}").exists() or state(decoder) == "Z":
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{decoder}").exists() or state(decoder) == "Z"
