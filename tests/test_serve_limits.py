"""`translator serve` against hostile and overloading clients, on a real server process on
127.0.0.1: bodies refused before they are read, stalled bodies timed out, a bounded queue
answering 503 with Retry-After, dropped clients' requests never decoded, the request
schema published, and no traceback in the server's log."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import tiny_config, to_toml

pytest.importorskip("fastapi")
from test_serve import CountingTranslator, call, post, serving  # noqa: E402

from translator.deploy.batcher import Batcher  # noqa: E402
from translator.deploy.decoder import LocalDecoder, Settings  # noqa: E402
from translator.deploy.limits import BadRequest  # noqa: E402


@pytest.fixture(scope="module")
def strict_config(trained, tmp_path_factory):
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(max_body_kb=64, read_timeout_s=1.0, max_queue=8)
    path = tmp_path_factory.mktemp("strict") / "strict.toml"
    path.write_text(to_toml(config))
    return path


@pytest.fixture(scope="module")
def strict(strict_config):
    """A server with small limits, and its process."""
    with serving(strict_config, with_process=True) as (url, process):
        yield url, process


def raw(url: str, head: str, body: bytes = b"", wait: float = 10.0) -> tuple[str, float]:
    """Send a hand-written request; the status line's code and the seconds it took."""
    port = int(url.rsplit(":", 1)[1])
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = sock.recv(4096)
    return answer.split(b" ", 2)[1].decode(), time.perf_counter() - start


def test_a_body_over_the_limit_is_refused_from_its_content_length(strict):
    url, _ = strict
    head = "POST /translate HTTP/1.1\nHost: x\nContent-Type: application/json\n"
    status, seconds = raw(url, head + f"Content-Length: {200 * 1024 * 1024}\n")
    assert status == "413" and seconds < 2  # answered without waiting for the body


def test_a_streamed_body_is_cut_off_at_the_limit(strict):
    url, _ = strict
    head = "POST /translate HTTP/1.1\nHost: x\nTransfer-Encoding: chunked\n"
    chunk = b"a" * 65536
    body = b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2  # 128 KB > 64 KB, never terminated
    assert raw(url, head, body)[0] == "413"


def test_a_stalled_body_times_out(strict):
    url, _ = strict
    head = "POST /translate HTTP/1.1\nHost: x\nContent-Length: 1000\n"
    status, seconds = raw(url, head, b'{"text": [')
    assert status == "408" and 0.9 < seconds < 5


def test_an_over_full_queue_answers_503_with_retry_after_and_health_stays_up(strict):
    url, _ = strict
    body = {"text": [f"Tom can see the cat {i}." for i in range(8)], "beam": 4}
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: post(url, body), range(12)))
    statuses = sorted(status for status, _ in answers)
    assert 200 in statuses and 503 in statuses, statuses
    busy = next(body for status, body in answers if status == 503)
    assert "serve.max_queue" in busy["error"]
    assert call(url + "/health")[0] == 200


def test_retry_after_is_sent_with_503():
    async def scenario():
        batcher = Batcher(
            LocalDecoder(CountingTranslator()), wait=0.0, max_sentences=8, on=True, max_queue=4
        )
        waiting = asyncio.ensure_future(batcher.translate(["a"] * 4, Settings(1, True)))
        await asyncio.sleep(0)
        with pytest.raises(BadRequest) as refused:
            await batcher.translate(["b"], Settings(1, True))
        waiting.cancel()
        return refused.value

    refused = asyncio.run(scenario())
    assert refused.status == 503 and refused.headers == {"Retry-After": "1"}


def test_a_cancelled_request_is_not_decoded():
    fake = CountingTranslator()

    async def scenario():
        batcher = Batcher(LocalDecoder(fake), wait=0.05, max_sentences=64, on=True)
        task = asyncio.create_task(batcher.run())
        gone = asyncio.ensure_future(batcher.translate(["gone"], Settings(1, True)))
        kept = asyncio.ensure_future(batcher.translate(["kept"], Settings(1, True)))
        await asyncio.sleep(0.01)
        gone.cancel()  # what the middleware does when its client disconnects
        answer = await kept
        task.cancel()
        return answer, batcher.queued

    answer, queued = asyncio.run(scenario())
    assert [h.text for (h,) in answer] == ["KEPT"] and fake.calls == [["kept"]] and queued == 0


def test_the_openapi_schema_describes_the_request(strict):
    url, _ = strict
    status, schema = call(url + "/openapi.json")
    body = schema["paths"]["/translate"]["post"]["requestBody"]["content"]["application/json"]
    properties = {"text", "beam", "split", "nbest", "glossary"}
    assert status == 200 and set(body["schema"]["properties"]) == properties
    assert body["schema"]["additionalProperties"] is False


def test_the_server_log_has_no_traceback(strict_config):
    with serving(strict_config, with_process=True) as (url, process):
        hostile_then_normal(url)
        process.terminate()
        process.wait(timeout=30)
    log = process.log.read_text()
    assert "Traceback" not in log, log


def hostile_then_normal(url: str) -> None:
    for payload in (b"[" * 20_000 + b"]" * 20_000, b'{"text": ["Hi."], "beam": NaN}'):
        assert post(url, payload)[0] == 400
    head = "POST /translate HTTP/1.1\nHost: x\nContent-Length: 100\n"
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:  # leaves mid-body
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + b'{"te')
    time.sleep(0.3)
    assert post(url, {"text": ["Hi."]})[0] == 200


def run_limits(app, messages, request_timeout=5.0, disconnect_after=None):
    """Limits around `app`, fed `messages` (then a disconnect after `disconnect_after`
    seconds, or never); what it sent."""
    from translator.deploy.limits import Limits

    sent = []

    async def scenario():
        queue = list(messages)

        async def receive():
            if queue:
                return queue.pop(0)
            if disconnect_after is None:
                await asyncio.sleep(3600)
            await asyncio.sleep(disconnect_after)
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "headers": []}
        await Limits(app, 1024, 1.0, request_timeout)(scope, receive, send)

    asyncio.run(scenario())
    return sent


def test_an_answer_that_takes_too_long_is_a_503():
    async def slow(scope, receive, send):
        await asyncio.sleep(5)

    sent = run_limits(slow, [{"type": "http.request", "body": b"{}"}], request_timeout=0.1)
    assert sent[0]["status"] == 503 and b"serve.request_timeout_s" in sent[1]["body"]


def test_a_client_that_leaves_cancels_its_request():
    cancelled = []

    async def waits(scope, receive, send):
        assert (await receive())["body"] == b"{}"
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    sent = run_limits(waits, [{"type": "http.request", "body": b"{}"}], disconnect_after=0.1)
    assert cancelled == [True] and sent == []


def request(url: str, method: str = "POST", body: bytes | None = None, **headers: str):
    """(status, headers) of one request."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **headers}
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_api_keys_and_cors(trained, tmp_path, monkeypatch):
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(api_keys=["s3cret"], cors_origins=["https://ok.example"])
    path = tmp_path / "keys.toml"
    path.write_text(to_toml(config))
    monkeypatch.setenv("TRANSLATOR_API_KEYS", "other-key, ")
    body = b'{"text": ["Hi."]}'
    with serving(path) as url:
        api = url + "/translate"
        status, headers = request(api, body=body)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert request(api, body=body, Authorization="Bearer wrong")[0] == 401
        assert request(api, body=body, Authorization="Bearer s3cret")[0] == 200
        assert request(api, body=body, **{"X-API-Key": "other-key"})[0] == 200  # from env
        assert request(url + "/health", method="GET")[0] == 200  # open without a key
        big = {"Content-Length": str(10**9)}
        assert request(api, body=body, **big)[0] == 401  # no key: refused before the body
        preflight = {
            "Origin": "https://ok.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-api-key",
        }
        status, headers = request(api, method="OPTIONS", **preflight)
        assert status == 200 and headers["access-control-allow-origin"] == "https://ok.example"
        preflight["Origin"] = "https://evil.example"
        assert "access-control-allow-origin" not in request(api, "OPTIONS", **preflight)[1]


def test_no_cors_headers_by_default(strict):
    url, _ = strict
    headers = {"Origin": "https://any.example"}
    status, got = request(url + "/translate", body=b'{"text": ["Hi."]}', **headers)
    assert status == 200 and "access-control-allow-origin" not in {k.lower() for k in got}


def test_metrics_and_one_access_line_per_request(strict_config):
    with serving(strict_config, with_process=True) as (url, process):
        assert post(url, {"text": ["Tom can see the cat.", "Hi."]})[0] == 200
        assert post(url, b"{not json")[0] == 400
        status, text = call(url + "/metrics")
        process.terminate()
        process.wait(timeout=30)
    assert status == 200
    assert 'translator_requests_total{path="/translate",status="200"} 1.0' in text
    assert 'translator_requests_total{path="/translate",status="400"} 1.0' in text
    assert "translator_sentences_total 2.0" in text and "translator_queue_sentences 0.0" in text
    assert 'translator_request_seconds_bucket{le="60.0",path="/translate"} 2.0' in text
    assert "translator_batch_sentences_count 1.0" in text
    tokens = float(text.split("\ntranslator_source_tokens_total ")[1].split()[0])
    assert tokens > 2
    lines = [json.loads(line) for line in process.log.read_text().splitlines() if '"path"' in line]
    posts = [line for line in lines if line["path"] == "/translate"]
    assert [line["status"] for line in posts] == [200, 400]
    assert all(line["client"] == "127.0.0.1" and line["ms"] >= 0 for line in posts)


def test_sigterm_finishes_what_was_admitted_then_exits_0(trained, tmp_path):
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(batch_wait_ms=1000)  # the request waits a second to be decoded
    path = tmp_path / "slow.toml"
    path.write_text(to_toml(config))
    body = {"text": [f"Tom can see the cat and the dog {i}." for i in range(8)]}
    with serving(path, with_process=True) as (url, process):
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(post, url, body)
            time.sleep(0.3)  # admitted, waiting in the batcher
            process.terminate()
            status, got = answer.result(timeout=60)
        code = process.wait(timeout=60)
    assert status == 200 and len(got["translations"]) == 8
    assert code == 0


def slow_server_config(trained, tmp_path, **serve):
    """A config whose batcher waits a second before decoding (requests stay queued)."""
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"].update(batch_wait_ms=1000, **serve)
    path = tmp_path / "slow.toml"
    path.write_text(to_toml(config))
    return path


def test_a_request_past_its_time_is_a_503_on_a_real_server(trained, tmp_path):
    path = slow_server_config(trained, tmp_path, request_timeout_s=0.3)
    with serving(path) as url:
        status, body = post(url, {"text": ["Tom can see the cat."]})
    assert status == 503 and "serve.request_timeout_s" in body["error"]


def test_a_client_that_leaves_is_not_translated_for_on_a_real_server(trained, tmp_path):
    path = slow_server_config(trained, tmp_path)
    with serving(path) as url:
        port = int(url.rsplit(":", 1)[1])
        body = b'{"text": ["Tom can see the cat."]}'
        head = f"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(head.encode() + body)
            time.sleep(0.2)  # admitted and queued; then the client goes
        time.sleep(1.5)  # the batch would have been decoded by now
        metrics = call(url + "/metrics")[1]
    assert "translator_sentences_total 0.0" in metrics
    assert "translator_batch_sentences_count 0.0" in metrics
