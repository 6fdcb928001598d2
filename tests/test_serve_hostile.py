"""Single requests that tried to stop `translator serve` for everyone, at small sizes: a
body of many keys (parsed in linear time: shown by two sizes), a bad request batched with
honest ones (it fails alone), malformed values on every route (a 4xx naming the field,
/lt included, never a 500), wrong keys (counted against the address's rate limit), and a
decoder busy past serve.busy_s (/ready 503, /health 200). The queue's fairness is in
test_serve_queue.py; the text path's patterns in test_linear_text.py."""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import tiny_config, to_toml

pytest.importorskip("fastapi")
from test_serve import app_in_thread, call, serving  # noqa: E402
from test_serve_limits import request  # noqa: E402

from translator.config import DecodeConfig, ServeConfig  # noqa: E402
from translator.deploy.decoder import LocalDecoder  # noqa: E402
from translator.deploy.limits import BadRequest, parse_json  # noqa: E402
from translator.inference.hypothesis import Hypothesis  # noqa: E402

KEY = "hostile-test-key"


def cpu_seconds(work, repeats: int = 3) -> float:
    """The least CPU time `work()` took over `repeats` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        work()
        best = min(best, time.process_time() - start)
    return best


def keys_body(n: int) -> bytes:
    """A JSON object of `n` keys, the last one given twice."""
    return b"{" + b",".join(b'"k%d": 1' % i for i in range(n)) + b', "k%d": 2}' % (n - 1)


def refused(body: bytes) -> None:
    with pytest.raises(BadRequest, match="given more than once"):
        parse_json(body)


def test_a_body_of_many_keys_one_given_twice_is_refused_in_linear_time():
    small, large = keys_body(12_000), keys_body(96_000)  # the larger: under 1 MB, as sent
    ratio = cpu_seconds(lambda: refused(large)) / cpu_seconds(lambda: refused(small))
    assert ratio < 24, ratio  # 8 times the keys: about 8 times the time (quadratic: 64)


def test_a_lone_surrogate_is_a_422_naming_where_it_is():
    for body, where in [
        (b'{"q": "a\\ud800"}', '"q"'),
        (b'{"text": ["ok", "\\udfff"]}', '"text"[1]'),
        (b'{"glossary": {"\\ud800x": "y"}}', 'a key of "glossary"'),
    ]:
        with pytest.raises(BadRequest) as bad:
            parse_json(body)
        assert bad.value.status == 422 and bad.value.message.startswith(where)
    assert parse_json(b'{"q": "\\ud83d\\ude00"}') == {"q": "😀"}  # a pair is one character


@pytest.fixture(scope="module")
def keyed(trained, tmp_path_factory):
    """A server with a key and a rate limit of 2 a second, burst 30; its URL and process."""
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(api_keys=[KEY], rate_limit=2, rate_burst=30)
    path = tmp_path_factory.mktemp("hostile") / "keyed.toml"
    path.write_text(to_toml(config))
    with serving(path, with_process=True) as (url, process):
        yield url, process


def post_json(url: str, path: str, body: bytes, key: str | None = KEY) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"X-API-Key": key} if key else {})}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url + path, body, headers), timeout=30
        ) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


MALFORMED = [
    ("/translate", b'{"text": 5}', 422, '"text"'),
    ("/translate", b'{"text": true}', 422, '"text"'),
    ("/translate", b'{"text": ["Hi."], "glossary": {"\\ud800": "x"}}', 422, '"glossary"'),
    ("/translate", b'{"text": ["Hi.", "a\\udc00"]}', 422, '"text"[1]'),
    ("/document", b'{"text": 5}', 422, '"text"'),
    ("/document", b'{"text": "a\\ud800"}', 422, '"text"'),
    ("/lt/translate", b'{"q": []}', 400, "q"),
    ("/lt/translate", b'{"q": "a\\ud800"}', 422, '"q"'),
    ("/lt/translate", b'{"q": "Hi.", "source": 5}', 400, "source"),
    ("/lt/translate", b'{"q": [5]}', 400, "q must be"),
    ("/lt/detect", b'{"q": []}', 400, "q"),
    ("/lt/detect", b"[1, 2]", 400, "JSON object"),
]


def test_every_malformed_value_is_a_4xx_naming_the_field_on_every_route(keyed):
    url, process = keyed
    answers = [(path, *post_json(url, path, body)) for path, body, _, _ in MALFORMED]
    for (path, body, status, named), (_, got, answer) in zip(MALFORMED, answers, strict=True):
        assert got == status and named in answer["error"], (path, body, got, answer)
    assert "Traceback" not in process.log.read_text()


def test_a_bad_request_sent_with_honest_ones_fails_alone(keyed):
    url, _ = keyed
    honest = json.dumps({"text": ["Tom can see the cat."]}).encode()
    bodies = [("/lt/translate", b'{"q": "a\\ud800"}')] + [("/translate", honest)] * 4
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda b: post_json(url, *b), bodies))
    statuses = [status for status, _ in answers]
    assert statuses[0] == 422 and statuses[1:].count(200) + statuses[1:].count(429) == 4
    assert 200 in statuses[1:]


def test_wrong_and_missing_keys_count_against_the_address_rate_limit(keyed):
    url, _ = keyed  # the tests before sent a valid key: this address's bucket is full
    body = json.dumps({"text": ["Hi."]}).encode()
    with ThreadPoolExecutor(40) as pool:
        found = list(pool.map(lambda i: request(url + "/translate", body=body, **(
            {"X-API-Key": f"wrong{i}"} if i % 2 else {})), range(40)))  # fmt: skip
    statuses = [status for status, _ in found]
    assert statuses.count(401) + statuses.count(429) == 40
    assert statuses.count(429) >= 5  # a burst of 30 (and 2 a second): the rest limited
    metrics = request(url + "/metrics", method="GET", **{"X-API-Key": KEY})[0]
    assert metrics == 200  # a valid key is let through (and GETs with one are not counted)


class Slow:
    """A translator whose decodes take `seconds`."""

    def __init__(self, seconds: float):
        self.decode_cfg, self.seconds = DecodeConfig(), seconds

    def with_decode(self, **changes):
        return self

    def translate(self, texts):
        time.sleep(self.seconds)
        return [[Hypothesis(text.upper(), 0.0)] for text in texts]


def test_ready_is_503_busy_while_a_decode_runs_past_busy_s_and_health_stays_200():
    from translator.deploy.server import create_app

    app = create_app(LocalDecoder(Slow(1.5)), DecodeConfig(), ServeConfig(busy_s=0.3), {})
    with app_in_thread(app) as url, ThreadPoolExecutor(1) as pool:
        before = call(url + "/ready")[0]
        decoding = pool.submit(call, url + "/translate", b'{"text": ["Hi."]}')
        time.sleep(0.8)
        during, health = call(url + "/ready"), call(url + "/health")[0]
        answered = decoding.result()
        after = call(url + "/ready")[0]
    assert before == 200 and after == 200 and answered[0] == 200
    assert during[0] == 503 and during[1]["status"] == "busy" and during[1]["busy_s"] > 0.3
    assert health == 200


@pytest.fixture(scope="module")
def guarded(trained, tmp_path_factory):
    """A server that closes a connection whose headers take over 2 s, and holds at most 20
    connections at once."""
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(header_timeout_s=2.0, max_connections=20)
    path = tmp_path_factory.mktemp("guarded") / "guarded.toml"
    path.write_text(to_toml(config))
    with serving(path) as url:
        yield url


def slow_sockets(url: str, count: int) -> list[socket.socket]:
    """Connections that send a request line and one header, never the end of the headers."""
    port = int(url.rsplit(":", 1)[1])
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sock.setblocking(False)
        held.append(sock)
    return held


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed `sock` (after another header line, as a slow client
    sends one)."""
    try:
        sock.send(b"X-Slow: 1\r\n")
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_headers_are_cut_off_and_connections_beyond_the_cap_wait(guarded):
    held = slow_sockets(guarded, 25)  # 20 taken in, 5 left in the listen queue
    with ThreadPoolExecutor(1) as pool:
        honest = pool.submit(call, guarded + "/health")  # waits for a free connection
        time.sleep(3.0)  # past the header timeout of the first 20, not of the other 5
        first = [closed_by_server(sock) for sock in held]
        time.sleep(2.5)  # past theirs too
        second = [closed_by_server(sock) for sock in held]
        answered = honest.result(timeout=30)
    for sock in held:
        sock.close()
    assert sum(first) == 20 and all(second)
    assert answered[0] == 200


def test_behind_a_local_proxy_the_forwarded_address_is_the_client():
    from translator.deploy.server import create_app

    limited = ServeConfig(rate_limit=0.1, rate_burst=1, refusal_delay_s=0)
    app = create_app(LocalDecoder(Slow(0.0)), DecodeConfig(), limited, {})
    body = b'{"text": ["Hi."]}'
    with app_in_thread(app, limited) as url:
        found = [
            request(url + "/translate", body=body, **{"X-Forwarded-For": address})[0]
            for address in ("203.0.113.1", "203.0.113.2", "203.0.113.1")
        ]
    assert found == [200, 200, 429]  # a bucket each, not one for the proxy's 127.0.0.1
