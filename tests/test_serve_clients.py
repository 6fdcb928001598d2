"""`translator serve` with the clients and tools users bring: LibreTranslate's own Python
client against the API at /lt, and schemathesis generating requests from the published
OpenAPI schema (no answer may be a 500, none may break the schema it documents)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
from conftest import tiny_config, to_toml

pytest.importorskip("fastapi")
from test_serve import serving  # noqa: E402

from translator.inference.text import Translator  # noqa: E402


@pytest.fixture(scope="module")
def server(trained, tmp_path_factory):
    path = tmp_path_factory.mktemp("clients") / "tiny.toml"
    path.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    with serving(path) as url:
        yield url


def lt_post(url: str, fields: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url + "/lt/translate", json.dumps(fields).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_libretranslate_client_translates_detects_and_lists(server, trained):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(server + "/lt/")
    ours = Translator.from_checkpoint(trained, "cpu")
    text = "Tom can see the cat. I will buy the book."
    assert client.translate(text, "en", "zh") == ours.translate(text)
    assert client.detect(text) == [{"confidence": 100.0, "language": "en"}]
    assert client.languages()[0] == {"code": "en", "name": "English", "targets": ["zh"]}
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.translate(text, "fr", "zh")
    assert refused.value.code == 400 and "error" in json.loads(refused.value.read())


def test_libretranslate_lists_auto_and_html(server, trained):
    ours = Translator.from_checkpoint(trained, "cpu")
    status, got = lt_post(server, {"q": ["Tom can see the cat.", ""], "source": "auto"})
    assert status == 200 and got["translatedText"] == ours.translate(["Tom can see the cat.", ""])
    assert got["detectedLanguage"] == {"confidence": 100.0, "language": "en"}
    page = '<p class="x">Tom can see the cat. <b>I will buy the book.</b></p><script>a<b</script>'
    status, got = lt_post(server, {"q": page, "format": "html"})
    cat, book = ours.translate(["Tom can see the cat.", "I will buy the book."])
    expected = f'<p class="x">{cat}<b>{book}</b></p><script>a<b</script>'  # Chinese: no blank
    assert status == 200 and got["translatedText"] == expected


def test_libretranslate_keys_come_in_the_body_or_a_header(trained, tmp_path):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    config = tiny_config(trained.parents[2]).to_dict()
    config["serve"]["api_keys"] = ["k1"]
    path = tmp_path / "keys.toml"
    path.write_text(to_toml(config))
    with serving(path) as url:
        assert libretranslatepy.LibreTranslateAPI(url + "/lt/", "k1").translate("Hi.", "en", "zh")
        status, got = lt_post(url, {"q": "Hi."})
        assert status == 403 and got == {"error": "Invalid API key"}
        assert libretranslatepy.LibreTranslateAPI(url + "/lt/").languages()  # open


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_generated_request_gets_a_500_or_breaks_the_schema(server, mode):
    """schemathesis: examples, boundary values and random data for every operation of
    /openapi.json, derandomised (the same cases every run); in negative mode, requests that
    break the schema on purpose (wrong types, values out of range, missing and unknown
    fields), each of which must be refused with a 4xx, never a 500. Left out, by design: its
    check that every schema-valid request is accepted (nbest above the request's beam is
    refused, which the schema cannot say) and its list of the statuses that refuse invalid
    data (too many sentences is 413 here, which it does not list)."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    schema = schemathesis.openapi.from_url(server + "/openapi.json")
    checks = schemathesis.checks
    excluded = [checks.positive_data_acceptance, checks.negative_data_rejection]
    failures, calls, operations, statuses = [], [], set(), []
    for operation in schema.get_all_operations():
        operation = operation.ok()
        if mode == "negative" and operation.method.upper() != "POST":
            continue  # a GET takes nothing that could break its schema
        operations.add(f"{operation.method.upper()} {operation.path}")

        @settings(
            max_examples=25,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(generation_mode=schemathesis.GenerationMode(mode)))
        def run(case):
            where = f"{case.operation.method.upper()} {case.operation.path}"
            calls.append(where)
            try:
                response = case.call()
                statuses.append(response.status_code)
                case.validate_response(response, excluded_checks=excluded)
            except Exception as exc:  # noqa: BLE001 - collected and reported together
                failures.append(f"{where}: {exc}")

        try:
            run()
        except Exception as exc:
            failures.append(f"{operation.method} {operation.path}: {type(exc).__name__}")
    assert not failures, "\n\n".join(failures[:5])
    assert 500 not in statuses
    assert set(calls) == operations and len(calls) > 50  # every operation, most often
    assert "POST /document" in operations and "POST /lt/translate" in operations
    if mode == "negative":
        assert sum(400 <= status < 500 for status in statuses) > 40


def test_protected_spans_lost_are_named_and_counted_on_both_apis(server):
    """An entity-bearing request: /translate names each text's spans missing from its
    translation (as the library's check finds them), /lt (text and html) translates with
    them, and /metrics counts every span lost on either."""
    from test_serve import call, post

    from translator.data.spans import find, missing

    def counted() -> float:  # the server serves other tests of this module too
        metrics = call(server + "/metrics")[1]
        return float(re.search(r"^translator_spans_lost_total (\S+)$", metrics, re.M).group(1))

    before = counted()
    texts = ["Order KX-4821 costs 12.50 dollars.", "Visit <b>https://example.com</b> today."]
    status, body = post(server, {"text": texts[:1]})
    assert status == 200, body
    assert body["lost"] == [missing(texts[0], body["translations"][0])]
    status, nbest = post(server, {"text": texts[:1], "nbest": 1})
    assert status == 200 and nbest["lost"] == body["lost"]
    assert nbest["hypotheses"][0][0]["lost"] == body["lost"][0]
    status, html = lt_post(
        server, {"q": texts[1], "source": "en", "target": "zh", "format": "html"}
    )
    assert status == 200 and "<b>" in html["translatedText"]
    spans_in = len(find(texts[0])) * 2 + 1  # the text twice, the html's one text node with a URL
    assert len(body["lost"][0]) * 2 <= counted() - before <= spans_in
