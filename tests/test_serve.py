"""`translator serve` as a user meets it: a real server on 127.0.0.1 in its own process,
called over HTTP; concurrent requests decoded together; every bad request a 4xx JSON
error (the page at / in a browser: test_page.py). The batching itself is also tested
in-process, without HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cli_process
import pytest
import torch
from conftest import assert_one_line_error, run_cli, tiny_config, to_toml

from translator.config import DecodeConfig, ServeConfig
from translator.inference.hypothesis import Hypothesis
from translator.inference.text import Translator

pytest.importorskip("fastapi")
pytest.importorskip("granian")
from translator.deploy.batcher import Batcher  # noqa: E402
from translator.deploy.decoder import (
    LocalDecoder,  # noqa: E402
    Settings,  # noqa: E402
)
from translator.deploy.intake import check_request  # noqa: E402
from translator.deploy.limits import BadRequest  # noqa: E402

SENTENCES = ["Tom can see the cat.", "I will buy the book.", "", "She should draw the flower."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, body: bytes | None = None) -> tuple[int, dict | str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


@contextlib.contextmanager
def serving(config_file: Path, *options: str, with_process: bool = False):
    """`translator serve` on a free port in its own process; yields its base URL (and the
    process, `with_process`)."""
    port = free_port()
    args = ["serve", "-c", str(config_file), *options, "--port", str(port)]
    process = cli_process.Forked(args, Path.cwd(), None, dict(os.environ))  # as run_cli runs
    process.log = process.stderr  # a file, not a pipe: one line a request would fill a pipe
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if call(url + "/health")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if process.poll() is not None:
                pytest.fail(process.log.read_text())
            time.sleep(0.1)
        yield (url, process) if with_process else url
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def app_in_thread(app, serve_cfg: ServeConfig | None = None):
    """`app` (create_app's) served as `serve` serves it (listen.py), in a thread on a free
    port, without the decoding process `serve` spawns (ten seconds less a server); yields
    its base URL."""
    from translator.deploy.listen import server_for

    port = free_port()
    server = server_for(app, dataclasses.replace(serve_cfg or ServeConfig(), port=port))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),))
    thread.start()
    try:
        for _ in range(500):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(server.stop)
        thread.join(30)
        loop.close()


@pytest.fixture(scope="module")
def config_file(trained, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("serve") / "tiny.toml"
    path.write_text(to_toml(tiny_config(trained.parents[2]).to_dict()))
    return path


@pytest.fixture(scope="module")
def server(config_file):
    with serving(config_file) as url:
        yield url


def post(url: str, payload) -> tuple[int, dict]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return call(url + "/translate", body)


def test_translations_equal_the_library_and_the_page_is_served(server, trained):
    ours = Translator.from_checkpoint(trained, torch.device("cpu"))
    status, body = post(server, {"text": SENTENCES})
    assert status == 200, body
    assert body["translations"] == ours.translate(SENTENCES) and body["translations"][2] == ""
    status, beam = post(server, {"text": SENTENCES, "beam": 3})
    assert status == 200 and beam["beam"] == 3
    assert beam["translations"] == ours.with_decode(beam=3).translate(SENTENCES)
    status, nbest = post(server, {"text": SENTENCES, "beam": 3, "nbest": 2, "split": False})
    expected = ours.translate(SENTENCES, beam=3, nbest=2, split=False)
    assert status == 200 and nbest["translations"] == beam["translations"]
    assert nbest["hypotheses"] == [
        [
            {**h._asdict(), "lost": list(h.lost), "appended": list(h.appended), "missed": []}
            for h in line
        ]
        for line in expected
    ]
    status, health = call(server + "/health")
    assert status == 200 and health["status"] == "ok" and health["engine"] == "torch"
    status, page = call(server + "/")
    assert status == 200 and "English → Chinese" in page and 'post("translate"' in page


@pytest.mark.parametrize(
    ("payload", "status", "fragment"),
    [
        (b"{not json", 400, "not valid JSON"),
        (b"\xff\xfe", 400, "not UTF-8"),
        (b'{"text": ["Hi."], "text": ["Ho."]}', 400, "key 'text' is given more than once"),
        (b'{"text": ["Hi."], "beam": NaN}', 400, "NaN is not a JSON number"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
        (b'{"text": ["Hi."], "beam": 1' + b"0" * 5000 + b"}", 400, "not acceptable JSON"),
        ({"text": ["Hi."], "beam": True}, 422, '"beam"'),
        ({"text": ["Hi."], "beam": 2.0}, 422, '"beam"'),
        (["Hello."], 422, "JSON object"),
        ({"text": "Hello."}, 422, "list of strings"),
        ({"text": [1, 2]}, 422, "list of strings"),
        ({"text": []}, 422, "is empty"),
        ({"text": ["Hi."], "beam": 0}, 422, '"beam"'),
        ({"text": ["Hi."], "beam": "5"}, 422, '"beam"'),
        ({"text": ["Hi."], "beam": 99}, 422, '"beam"'),
        ({"text": ["Hi."], "lang": "fr"}, 422, "unknown field(s): lang"),
        ({"text": ["Hi."] * 257}, 413, "too many texts: 257 > 256"),
        ({"text": ["Hi. " * 250] * 2}, 413, "hold 500 after splitting > 256 (serve.max_"),
        ({"text": 5}, 422, '"text" must be a list of strings'),
        ({"text": True}, 422, '"text" must be a list of strings'),
        ({"text": ["a" * 1001]}, 413, "1001 characters > 1000"),
        ({"text": ["a\ud800"]}, 422, '"text"[0] holds a lone surrogate'),
        ({"text": ["Hi."], "glossary": {"\udc00": "x"}}, 422, 'a key of "glossary" holds'),
        ({"text": ["Hi."], "glossary": {"GPU": ""}}, 400, "entry 'GPU': the Chinese side is empty"),
        ({"text": ["Hi."], "glossary": {"GPU": "显卡", "gpu": "卡"}}, 400, "'gpu' is given twice"),
        ({"text": ["Hi."], "glossary": {"GPU": 3}}, 422, '"glossary" must be an object'),
        ({"text": ["Hi."], "glossary": ["GPU"]}, 422, '"glossary" must be an object'),
        (
            {"text": ["Hi."], "glossary": {f"t{i}": "x" for i in range(1001)}},
            413,
            "too many glossary entries: 1001 > 1000",
        ),
        (
            {"text": ["Hi."], "glossary": {f"t{i}": "字" * 400 for i in range(60)}},
            413,
            "the glossary has 72,",
        ),
    ],
)
def test_bad_requests_get_a_4xx_json_error(server, payload, status, fragment):
    got, body = post(server, payload)
    assert got == status, body
    assert fragment in body["error"]


def test_a_request_glossary_is_laid_over_the_servers(config_file, tmp_path):
    """`serve --glossary FILE`: the server's glossary for every request and for /lt; a
    request's own entries win where both have one; what a translation misses is named."""
    glossary = tmp_path / "server.tsv"
    glossary.write_text("cat\t狗\nbook\t花\n", encoding="utf-8")
    lines = ["Tom can see the cat.", "I will buy the book."]
    with serving(config_file, "--glossary", str(glossary)) as url:
        status, body = post(url, {"text": lines})
        assert status == 200 and "狗" in body["translations"][0] and "花" in body["translations"][1]
        assert body["missed"] == [[], []]
        status, body = post(url, {"text": lines, "glossary": {"Cat": "车"}, "beam": 2, "nbest": 2})
        assert status == 200 and "车" in body["translations"][0] and "花" in body["translations"][1]
        assert all(h["missed"] == [] for h in body["hypotheses"][0][:1])
        status, lt = call(url + "/lt/translate", json.dumps({"q": lines[0]}).encode())
        assert status == 200 and "狗" in lt["translatedText"]
        page = {"q": f"<p><b>{lines[0]}</b></p>", "format": "html"}
        status, lt = call(url + "/lt/translate", json.dumps(page).encode())
        assert (
            status == 200
            and lt["translatedText"].startswith("<p><b>")
            and "狗" in lt["translatedText"]
        )
        status, health = call(url + "/health")
        assert health["glossary"] == 2
    bad = tmp_path / "bad.tsv"
    bad.write_text("cat\n", encoding="utf-8")
    result = run_cli("serve", "-c", str(config_file), "--glossary", str(bad), cwd=tmp_path)
    assert_one_line_error(result, "bad.tsv:1: no tab or comma")


def test_concurrent_requests_are_decoded_together(server):
    before = call(server + "/health")[1]["decodes"]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda i: post(server, {"text": [SENTENCES[i % 2]]}), range(32)))
    assert all(status == 200 for status, _ in answers)
    assert {body["translations"][0] for _, body in answers[::2]} == {
        answers[0][1]["translations"][0]
    }
    decodes = call(server + "/health")[1]["decodes"] - before
    assert decodes < 32, decodes  # requests that arrived together shared a decode


class CountingTranslator:
    """Stands in for a model: records each decode's sentences."""

    def __init__(self):
        self.decode_cfg = DecodeConfig()
        self.calls: list[list[str]] = []

    def with_decode(self, **changes):
        return self

    def translate(self, sentences):
        self.calls.append(list(sentences))
        time.sleep(0.01)
        return [[Hypothesis(s.upper(), 0.0)] for s in sentences]


@pytest.mark.parametrize("on", [True, False])
def test_batcher_groups_what_arrives_together_and_keeps_each_answer(on):
    fake = CountingTranslator()

    async def scenario():
        batcher = Batcher(LocalDecoder(fake), wait=0.05, max_sentences=256, on=on)
        task = asyncio.create_task(batcher.run())
        requests = [[f"s{i}a", f"s{i}b"] for i in range(10)]
        settings = Settings(beam=1, split=True)
        answers = await asyncio.gather(*(batcher.translate(r, settings) for r in requests))
        task.cancel()
        return requests, answers

    requests, answers = asyncio.run(scenario())
    assert answers == [[[Hypothesis(s.upper(), 0.0)] for s in r] for r in requests]
    assert len(fake.calls) == (1 if on else 10)


def test_ready_answers_200_once_the_decoding_process_is_warm(server):
    for _ in range(200):
        status, body = call(server + "/ready")
        if status == 200:
            break
        assert status == 503 and body == {"status": "warming"}
        time.sleep(0.05)
    assert status == 200 and body["status"] == "ready" and body["warm_up_s"] > 0


DECODER_ALONE = """
import sys
from pathlib import Path
from translator.config import load
from translator.deploy.decoder import DecoderProcess, Settings

if __name__ == "__main__":
    decoder = DecoderProcess(load(sys.argv[1]), Path(sys.argv[2]))  # loaded, not yet warm
    outputs, tokens = decoder.decode(["Tom can see the cat."], Settings(beam=1, split=True))
    print(decoder.ready, decoder.warm_s > 0, bool(outputs[0][0].text), tokens > 0)
    print("torch" in sys.modules)
    decoder.close()
"""


def test_a_decode_waits_for_the_warm_up_and_the_answer_needs_no_torch(config_file, trained):
    """As `serve`'s HTTP process meets it, in a fresh interpreter: a decode asked for at once
    comes after the warm-up, and reading its answer imports no PyTorch (a first request
    that did took two seconds more than the next)."""
    script = config_file.parent / "decoder_alone.py"
    script.write_text(DECODER_ALONE)
    done = subprocess.run(
        [sys.executable, str(script), str(config_file), str(trained)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True", "True", "False"]


def test_warming_up_decodes_texts_of_several_lengths_in_several_batch_sizes():
    from translator.deploy.decoder import WARM_UP_BATCHES, warm_up

    fake = CountingTranslator()
    settings = [Settings(beam=4, split=True), Settings(beam=1, split=True)]
    assert warm_up(LocalDecoder(fake), settings, batch_size=16) > 0
    assert [len(batch) for batch in fake.calls] == [min(n, 16) for n in WARM_UP_BATCHES] * 2
    assert len({len(text) for batch in fake.calls for text in batch}) > 8


def test_ready_says_warming_with_retry_after_until_the_decoder_is_ready():
    from translator.deploy.server import create_app

    class Warming(LocalDecoder):
        ready, warm_s = False, 0.0

    decoder = Warming(CountingTranslator())
    app = create_app(decoder, DecodeConfig(), ServeConfig(), {"model": "fake"})
    with app_in_thread(app) as url:
        request = urllib.request.Request(url + "/ready")
        with pytest.raises(urllib.error.HTTPError) as warming:
            urllib.request.urlopen(request, timeout=10)
        health = call(url + "/health")[0]
        decoder.ready, decoder.warm_s = True, 1.234
        ready = call(url + "/ready")
    assert warming.value.code == 503 and warming.value.headers["Retry-After"] == "1"
    assert json.loads(warming.value.read()) == {"status": "warming"}
    assert health == 200  # liveness, whatever the warm-up
    assert ready == (200, {"status": "ready", "warm_up_s": 1.23})


class MarkingTranslator(CountingTranslator):
    """CountingTranslator whose hypotheses name a lost span for texts with a URL."""

    def translate(self, sentences):
        self.calls.append(list(sentences))
        lost = lambda s: tuple(w for w in s.split() if w.startswith("http"))  # noqa: E731
        return [[Hypothesis(s.upper(), 0.0, lost(s))] for s in sentences]


def test_a_document_comes_back_line_for_line_in_chunks_of_max_sentences():
    from translator.deploy.server import create_app

    fake = MarkingTranslator()
    serve_cfg = ServeConfig(max_sentences=2, max_document_chars=200)
    app = create_app(LocalDecoder(fake), DecodeConfig(), serve_cfg, {"model": "fake"})
    text = "One. Two.\r\n\r\nsee http://x.y\r\nfour\r\n  \r\nfive\r\n"
    with app_in_thread(app) as url:
        status, done = call(url + "/document", json.dumps({"text": text}).encode())
        too_long = call(url + "/document", json.dumps({"text": "x" * 201}).encode())
        not_text = call(url + "/document", json.dumps({"text": ["a list"]}).encode())
        bad_beam = call(url + "/document", json.dumps({"text": "Hi.", "beam": 99}).encode())
        empty = call(url + "/document", json.dumps({"text": ""}).encode())
    assert status == 200, done
    expected = "ONE.TWO.\r\n\r\nSEE HTTP://X.Y\r\nFOUR\r\n  \r\nFIVE\r\n"  # as sentences join
    assert done["translation"] == expected and done["lines"] == 4  # blank lines kept as given
    assert done["notes"] == [{"line": 3, "lost": ["http://x.y"], "appended": [], "missed": []}]
    assert fake.calls == [["One.", "Two."], ["see http://x.y", "four"], ["five"]]  # 2 at a time
    assert too_long[0] == 413 and "200 (serve.max_document_chars)" in too_long[1]["error"]
    assert not_text == (422, {"error": '"text" must be a string'})
    assert bad_beam[0] == 422 and '"beam"' in bad_beam[1]["error"]
    assert empty[0] == 200 and empty[1]["translation"] == "" and empty[1]["lines"] == 0


def test_info_names_the_model_the_limits_and_whether_keys_are_needed(monkeypatch):
    from translator.deploy.server import create_app

    monkeypatch.setenv("TRANSLATOR_API_KEYS", "k1")
    model = {"run": "exp1", "checkpoint": "best.pt", "sha256": "0123456789ab", "engine": "torch",
             "precision": "fp32", "decodes_from": "best.pt"}  # fmt: skip
    about = {**model, "glossary": 3, "model": "/r/exp1/checkpoints/best.pt"}  # not a field
    serve_cfg = ServeConfig(max_chars=300)
    app = create_app(LocalDecoder(CountingTranslator()), DecodeConfig(beam=4), serve_cfg, about)
    with app_in_thread(app) as url:
        status, info = call(url + "/info")  # open, as the page is
        health = call(url + "/health")[1]
        page = call(url + "/")[0]
        refused = [
            call(url + path, b'{"text": ["Hi."]}')[0] for path in ("/translate", "/document")
        ]
    assert status == 200 and page == 200 and refused == [401, 401]
    assert info["model"] == model and {**model, "glossary": 3}.items() <= health.items()
    assert "/r/exp1" not in json.dumps([info, health])  # only the model's fields reach clients
    assert info["beam"] == 4 and info["keys"] is True and info["glossary"] == 3
    assert info["limits"]["max_chars"] == 300 and info["limits"]["max_document_chars"] == 100_000
    assert set(info["features"]) == {"nbest", "glossary", "document"}


def strings_in(value) -> list[str]:
    """Every string of a parsed JSON answer, keys included."""
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return [value] if isinstance(value, str) else []


OPEN_ANSWERS = ("/", "/ready", "/metrics", "/openapi.json", "/lt/languages", "/nowhere")


def test_the_probes_name_the_model_by_name_and_hash_and_carry_no_path(
    server, config_file, trained, monkeypatch
):
    from translator.model.checkpoint import digest

    monkeypatch.setenv("TRANSLATOR_API_KEYS", "k1")
    with serving(config_file) as keyed:  # the same model, with keys
        probes = {
            (keys, probe): call(url + probe)
            for keys, url in (("off", server), ("on", keyed))
            for probe in ("/health", "/info")
        }
        others = [call(url + path) for url in (server, keyed) for path in OPEN_ANSWERS]
        bad = call(keyed + "/translate", b'{"text": ["Hi."]}')  # no key: 401
    short = digest(trained)[:12]
    run_dir, tmp = trained.parents[1], trained.parents[2]
    for (keys, probe), (status, body) in probes.items():
        assert status == 200, (keys, probe, body)
        model = body["model"] if probe == "/info" else body
        assert (model["run"], model["checkpoint"], model["sha256"]) == ("run", "best.pt", short)
        assert model["decodes_from"] == "best.pt" and model["engine"] == "torch"
        for value in strings_in(body):
            assert "/" not in value and os.sep not in value, (keys, probe, value)
    for status, body in [*others, bad]:
        text = json.dumps(body) if isinstance(body, (dict, list)) else body
        assert status != 500 and str(tmp) not in text and str(run_dir) not in text, body
    assert bad[0] == 401 and probes["on", "/info"][1]["keys"] is True


def test_an_export_beside_the_checkpoint_is_named_and_its_recorded_hash_read(
    trained, tmp_path, monkeypatch
):
    pytest.importorskip("ctranslate2")
    import shutil

    from translator.deploy.decoder import model_identity
    from translator.deploy.export import export
    from translator.inference.ct2_engine import beside
    from translator.inference.text import Translator
    from translator.model import checkpoint

    mine = tmp_path / "tatoeba-cpu/checkpoints/average5.pt"
    mine.parent.mkdir(parents=True)
    shutil.copy(trained, mine)
    export(mine, beside(mine))
    short = checkpoint.digest(mine)[:12]
    config = tiny_config(trained.parents[2])  # decode.engine auto: it takes average5.ct2
    translator = Translator.open(config, mine)

    def hashed_again(path):
        raise AssertionError(f"{path} hashed a second time")

    monkeypatch.setattr(checkpoint, "digest", hashed_again)
    assert model_identity(translator, mine, "auto") == {
        "run": "tatoeba-cpu",
        "checkpoint": "average5.pt",
        "sha256": short,
        "engine": "ctranslate2",
        "precision": translator.engine.about.precision,
        "decodes_from": "average5.ct2",
    }


def test_a_decoding_process_that_cannot_start_again_is_a_503_naming_no_file(monkeypatch):
    from translator.deploy.decoder import DecoderProcess
    from translator.errors import UserError

    def cannot_start(self):
        raise UserError("no checkpoint at /srv/runs/exp1/checkpoints/best.pt: train first")

    decoder = DecoderProcess.__new__(DecoderProcess)  # as after a crash: no process
    decoder.lock, decoder.process = threading.Lock(), None
    monkeypatch.setattr(DecoderProcess, "_start", cannot_start)
    with pytest.raises(BadRequest) as refused:
        decoder.decode(["Hi."], Settings(1, True))
    assert refused.value.status == 503 and refused.value.headers["Retry-After"] == "5"
    assert "could not be started again" in refused.value.message
    assert "/" not in refused.value.message


def test_check_request_reads_the_defaults_and_checks_split_and_nbest():
    limits, defaults = ServeConfig(), Settings(beam=5, split=True)
    assert check_request({"text": ["Hi."]}, limits, defaults) == (["Hi."], defaults, [1])
    asked = {"text": ["Hi. Ho."], "beam": 3, "split": False, "nbest": 2}
    assert check_request(asked, limits, defaults) == (["Hi. Ho."], Settings(3, False, 2), [1])
    for bad in ({"beam": True}, {"split": 1}, {"nbest": 4, "beam": 3}, {"nbest": -1}):
        with pytest.raises(BadRequest):
            check_request({"text": ["Hi."], **bad}, limits, defaults)


def test_missing_checkpoint_and_busy_port_are_one_line_errors(tmp_path, trained):
    config = tiny_config(tmp_path)
    (tmp_path / "tiny.toml").write_text(to_toml(config.to_dict()))
    missing = run_cli("serve", "-c", "tiny.toml", cwd=tmp_path)
    assert_one_line_error(missing, "no checkpoint at", "train first")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        taken = run_cli(
            "serve", "-c", "tiny.toml", "--checkpoint", str(trained), "--port", port, cwd=tmp_path
        )
    assert_one_line_error(taken, f"cannot serve on 127.0.0.1:{port}")


def test_the_ctranslate2_engine_serves_the_same_translations(
    server, config_file, trained, tmp_path
):
    pytest.importorskip("ctranslate2")
    from translator.deploy.export import export
    from translator.model.checkpoint import digest

    model_dir = export(trained, tmp_path / "ct2")
    with serving(config_file, "--engine", "ctranslate2", "--model", str(model_dir)) as ct2:
        status, body = post(ct2, {"text": SENTENCES})
        health = call(ct2 + "/health")[1]
    assert status == 200 and health["engine"] == "ctranslate2"
    assert health["decodes_from"] == "ct2"  # the export, by its name: the checkpoint it is of
    assert (health["run"], health["checkpoint"]) == ("run", "best.pt")
    assert health["sha256"] == digest(trained)[:12]
    assert body["translations"] == post(server, {"text": SENTENCES})[1]["translations"]
