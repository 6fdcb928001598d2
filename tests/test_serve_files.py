"""Files over HTTP, as clients send them: the page at / uploads a file in a real browser
(headless Chromium driven by Playwright) and offers its translation as a download, with its
progress and a summary; POST /document takes multipart/form-data from real clients
(requests, httpx) and answers the file translated in its own format; LibreTranslate's
/lt/translate_file and /lt/download_file do the same its way. Every refusal is a 4xx JSON
error of one line."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import tiny_config

pytest.importorskip("fastapi")
pytest.importorskip("granian")
requests = pytest.importorskip("requests")

from test_serve import app_in_thread, call  # noqa: E402

LINE = "Tom can see the cat."
STORY = f"{LINE} I will buy the book.\n\nShe should draw the flower.\nWe will find the dog.\n"
KEY = "k1"
# The tiny model writes little real Chinese (its punctuation, the glossary's terms): a
# translation is taken for Chinese when it has Chinese characters or punctuation and no Latin.
ZH = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
SRT = (
    "1\n00:00:01,000 --> 00:00:02,500\nTom can see the cat.\n\n"
    "2\n00:00:03,000 --> 00:00:04,000\nShe should draw the flower.\nWe will find the dog.\n"
)


# `model` and `app_for` as test_page.py has them: copied, as importing test_page would skip
# this whole module where Playwright is missing (only the page's tests need it).
@pytest.fixture(scope="module")
def model(trained):
    from translator.inference.text import Translator

    config = tiny_config(trained.parents[2])
    return config, Translator.open(config, trained), trained


def app_for(model, **serve):
    """The server's app on the tiny model, with `serve` limits (in this process)."""
    from translator.deploy.decoder import LocalDecoder, model_identity
    from translator.deploy.server import create_app

    config, translator, checkpoint = model
    about = model_identity(translator, checkpoint, config.decode.engine)
    serve_cfg = replace(config.serve, **serve)
    return create_app(LocalDecoder(translator), config.decode, serve_cfg, about)


HELD = {"s": 0.0}  # how long `site` holds its answers to POST /document (the page's tests)


def held(app):
    """`app`, its answers to POST /document sent HELD["s"] after they are ready."""

    async def holding(scope, receive, send):
        async def later(message):
            if message["type"] == "http.response.start" and scope["path"] == "/document":
                await asyncio.sleep(HELD["s"])
            await send(message)

        await app(scope, receive, later if scope["type"] == "http" else send)

    return holding


@pytest.fixture(scope="module")
def site(model):
    with app_in_thread(held(app_for(model))) as url:
        yield url


@pytest.fixture(scope="module")
def strict(model):
    """A server that needs a key and takes files of at most 1 KB and 60 characters."""
    app = app_for(model, api_keys=[KEY], max_document_kb=1, max_document_chars=60)
    with app_in_thread(app) as url:
        yield url


def upload(url: str, name: str, data: bytes, key: str = "", **fields: str):
    """POST /document a multipart form with `data` as its file `name` (requests)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    files = {"file": (name, data, "application/octet-stream")}
    return requests.post(f"{url}/document", files=files, data=fields, headers=headers, timeout=60)


def as_json(url: str, text: str, **fields) -> str:
    """POST /document's JSON translation of `text` (what a .txt file must come back as)."""
    status, answer = call(url + "/document", json.dumps({"text": text, **fields}).encode())
    assert status == 200, answer
    return answer["translation"]


def chinese(text: str) -> bool:
    return bool(ZH.search(text)) and not re.search(r"[A-Za-z]", text)


def refused(response, status: int, *fragments: str) -> str:
    """Assert `response` is a `status` JSON error of one line holding each of `fragments`."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert "\n" not in error and "Traceback" not in error, error
    for fragment in fragments:
        assert fragment in error, error
    return error


def disposition_name(header: str) -> str:
    """The file name of a Content-Disposition header, from its filename* (RFC 6266)."""
    from urllib.parse import unquote

    return unquote(re.search(r"filename\*=UTF-8''(\S+)", header).group(1))


def docx_bytes(paragraphs: list[str]) -> bytes:
    docx = pytest.importorskip("docx")
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_paragraphs(data: bytes) -> list[str]:
    import docx

    return [p.text for p in docx.Document(io.BytesIO(data)).paragraphs]


# ---- the page, in Chromium ---------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, site):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(site + "/")
    page.wait_for_function("document.getElementById('model').textContent.startsWith('Model:')")
    yield page
    context.close()


def downloaded(page, path: Path):
    """Choose `path` in the page's file input; the download that follows (its name, bytes)."""
    page.evaluate(
        "() => { window.phases = []; const s = document.getElementById('file-state');"
        " new MutationObserver(() => window.phases.push(s.textContent))"
        ".observe(s, {childList: true, characterData: true, subtree: true}); }"
    )
    with page.expect_download() as download:
        page.set_input_files("#file", str(path))
    return download.value.suggested_filename, Path(download.value.path()).read_bytes()


def test_the_page_uploads_a_text_file_and_offers_its_translation(site, page, tmp_path):
    path = tmp_path / "story.txt"
    path.write_text(STORY, encoding="utf-8")
    with page.expect_request(lambda r: r.url.endswith("/document")) as sent:
        name, data = downloaded(page, path)
    assert sent.value.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert name == "story.zh.txt"
    text = data.decode("utf-8")
    assert text == as_json(site, STORY, beam=int(page.input_value("#beam"))) and chinese(text)
    assert len(text.split("\n")) == len(STORY.split("\n")) and text.split("\n")[1] == ""
    assert page.inner_text("#status") == "story.txt: 3 lines translated."
    assert page.get_attribute("#download", "download") == "story.zh.txt"
    assert page.inner_text("#download") == "Download story.zh.txt"
    assert page.get_attribute("#status", "class") == ""
    phases = page.evaluate("window.phases")
    assert any(re.fullmatch(r"uploading story\.txt: \d+%", p) for p in phases), phases
    assert page.is_hidden("#file-progress-row")  # the bar goes once the file is back
    assert page.inner_text("#timing").endswith(f" bytes, beam {page.input_value('#beam')}")
    formats = page.get_attribute("#file", "accept").split(",")
    assert ".txt" in formats and ".docx" in formats and ".pdf" not in formats


def test_the_page_sends_the_glossary_and_beam_and_shows_refusals(site, page, tmp_path):
    path = tmp_path / "cat.txt"
    path.write_text(LINE + "\n", encoding="utf-8")
    name, data = downloaded(page, path)
    assert "猫咪" not in data.decode("utf-8")
    page.click("#glossary-box summary")
    page.fill("#glossary", "cat\t猫咪")
    page.select_option("#beam", "2")
    with page.expect_download() as again:  # the same file again, with the new settings
        page.click("#file-go")
    data = Path(again.value.path()).read_bytes()
    expected = as_json(site, LINE + "\n", beam=2, glossary={"cat": "猫咪"})
    assert data.decode("utf-8") == expected and "猫咪" in expected
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Tom can see the caf\xe9.\n".encode("latin-1"))
    page.set_input_files("#file", str(bad))
    page.wait_for_function("document.getElementById('status').className === 'error'")
    assert page.inner_text("#status") == (
        "The server refused the request: the file is not valid UTF-8 (line 1)."
    )


def test_the_page_shows_the_translating_state_and_can_cancel(site, page, tmp_path):
    path = tmp_path / "慢 slow.txt"
    path.write_text(LINE, encoding="utf-8")
    HELD["s"] = 1.6  # the answer held a while: the page counts the seconds meanwhile
    try:
        name, data = downloaded(page, path)
        assert page.is_visible("#download")
        page.click("#file-go")
        page.wait_for_function(
            "document.getElementById('file-state').textContent.startsWith('translating')"
        )
        assert page.is_hidden("#download")  # the last translation's link goes meanwhile
        page.click("#file-cancel")
    finally:
        HELD["s"] = 0.0
    assert name == "慢 slow.zh.txt" and chinese(data.decode("utf-8"))
    phases = page.evaluate("window.phases")
    assert "translating 慢 slow.txt… 1 s" in phases, phases
    assert phases.index("translating 慢 slow.txt… 0 s") > phases.index("uploading 慢 slow.txt: 0%")
    assert page.inner_text("#status") == "慢 slow.txt: cancelled."
    assert page.is_hidden("#file-progress-row")


def test_the_page_uploads_subtitles(site, page, tmp_path):
    path = tmp_path / "film.srt"
    path.write_text(SRT, encoding="utf-8")
    name, data = downloaded(page, path)
    text = data.decode("utf-8")
    times = re.compile(r"\d\d:\d\d:\d\d,\d{3} --> .*")
    cues = [cue.split("\n", 2) for cue in text.split("\n\n")]
    assert name == "film.zh.srt" and times.findall(text) == times.findall(SRT)
    assert [cue[0] for cue in cues] == ["1", "2"] and all(chinese(cue[2]) for cue in cues)
    assert page.inner_text("#status").startswith("film.srt: 2 cues translated")


def test_the_page_uploads_a_word_document(site, page, tmp_path):
    paragraphs = ["Tom can see the cat.", "", "She should draw the flower."]
    path = tmp_path / "report.docx"
    path.write_bytes(docx_bytes(paragraphs))
    name, data = downloaded(page, path)
    got = docx_paragraphs(data)
    assert name == "report.zh.docx" and len(got) == len(paragraphs)
    assert chinese(got[0]) and got[1] == "" and chinese(got[2])
    assert page.inner_text("#status").startswith("report.docx: 2 paragraphs translated")


# ---- POST /document with a file ------------------------------------------------------------


def test_a_text_file_comes_back_translated_in_its_own_format(site):
    response = upload(site, "story.txt", STORY.encode(), beam="1")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    disposition = response.headers["content-disposition"]
    assert disposition.startswith('attachment; filename="story.zh.txt"')
    assert disposition_name(disposition) == "story.zh.txt"
    assert response.headers["x-translator-units"] == "3"
    assert response.headers["x-translator-spans-unplaced"] == "0"
    text = response.content.decode("utf-8")
    assert text == as_json(site, STORY, beam=1) and chinese(text)
    assert len(text.splitlines()) == len(STORY.splitlines())


def test_httpx_uploads_a_file_with_a_name_of_any_characters(site):
    try:
        import httpx
    except ImportError:
        httpx = pytest.importorskip("httpx2", reason="neither httpx nor httpx2 is installed")
    files = {"file": ("故事 “one”.txt", (LINE + "\r\n").encode(), "text/plain")}
    response = httpx.post(f"{site}/document", files=files, data={"beam": "1"}, timeout=60)
    assert response.status_code == 200, response.text
    assert disposition_name(response.headers["content-disposition"]) == "故事 “one”.zh.txt"
    assert response.content.decode("utf-8") == as_json(site, LINE + "\r\n", beam=1)
    assert response.content.endswith(b"\r\n")  # its line ending kept


def test_the_glossary_field_is_obeyed(site):
    response = upload(site, "cat.txt", f"{LINE}\n".encode(), glossary=json.dumps({"cat": "猫咪"}))
    assert response.status_code == 200, response.text
    assert "猫咪" in response.content.decode("utf-8")
    assert "猫咪" not in upload(site, "cat.txt", f"{LINE}\n".encode()).content.decode("utf-8")


def test_the_form_fields_are_checked(site):
    story = STORY.encode()
    refused(upload(site, "a.txt", story, beam="99"), 422, "beam")
    refused(upload(site, "a.txt", story, beam="two"), 422, "beam")
    refused(upload(site, "a.txt", story, glossary="{cat: 1"), 400, "JSON")
    refused(upload(site, "a.txt", story, glossary='["cat"]'), 422, "glossary")


def test_a_file_that_cannot_be_read_is_a_400_naming_why(site):
    latin1 = "Tom can see the cat.\nThe café.\n".encode("latin-1")
    refused(upload(site, "old.txt", latin1), 400, "not valid UTF-8 (line 2)")
    error = refused(upload(site, "paper.pdf", b"%PDF-1.4"), 400, "'paper.pdf'", "txt", "docx")
    assert error.startswith("no format reads")
    refused(upload(site, "README", STORY.encode()), 400, "no format reads")
    assert upload(site, "README", STORY.encode(), format="txt").status_code == 200
    from documents_common import zipped
    from test_documents import broken_deflate

    refused(upload(site, "damaged.docx", broken_deflate()), 400, "not a readable zip")
    bomb = zipped({"word/document.xml": b"\0" * 4_000_000})
    refused(upload(site, "bomb.docx", bomb), 400, "zip bomb")
    refused(upload(site, "laughs.xlf", b'<!DOCTYPE x [<!ENTITY a "a">]><x/>'), 400, "entities")
    page = {"q": "<p>x</p>" * 1, "format": "html"}
    assert requests.post(f"{site}/lt/translate", json=page, timeout=30).status_code == 200


def test_a_form_without_a_file_is_a_400(site):
    fields = {"beam": (None, "2")}
    response = requests.post(f"{site}/document", files=fields, timeout=30)
    refused(response, 400, "the form needs one file")
    nameless = {"file": (None, STORY)}  # a field named file, but no file in it
    refused(requests.post(f"{site}/document", files=nameless, timeout=30), 400, "needs one file")


def test_the_size_limits(strict):
    key = KEY
    assert upload(strict, "ok.txt", f"{LINE}\n".encode(), key).status_code == 200
    refused(upload(strict, "big.txt", b"x " * 1024, key), 413, "serve.max_document_kb (1 KB)")
    refused(
        upload(strict, "huge.txt", b"x " * 2**20, key),
        413,
        "the file is larger than serve.max_document_kb",
    )
    long = f"{LINE}\n".encode() * 4  # 80 characters to translate > 60, in 84 bytes
    refused(upload(strict, "long.txt", long, key), 400, "serve.max_document_chars")
    refused(upload(strict, "ok.txt", f"{LINE}\n".encode()), 401, "API key")


def test_the_json_document_is_answered_as_before(site):
    status, answer = call(site + "/document", json.dumps({"text": STORY}).encode())
    assert status == 200 and answer["lines"] == 3 and answer["beam"] == 1
    assert len(answer["translation"].split("\n")) == len(STORY.split("\n"))


# ---- LibreTranslate's /translate_file ------------------------------------------------------


def lt_upload(url: str, name: str, data: bytes, **fields: str):
    files = {"file": (name, data)}
    fields = {"source": "en", "target": "zh", **fields}
    return requests.post(f"{url}/lt/translate_file", files=files, data=fields, timeout=60)


def test_translate_file_leaves_the_translation_to_download(site):
    response = lt_upload(site, "my story.txt", STORY.encode())
    assert response.status_code == 200, response.text
    link = response.json()["translatedFileUrl"]
    assert link.startswith(f"{site}/lt/download_file/") and link.endswith(".my%20story.zh.txt")
    got = requests.get(link, timeout=30)
    assert got.status_code == 200
    assert got.headers["content-type"] == "text/plain; charset=utf-8"
    assert disposition_name(got.headers["content-disposition"]) == "my story.zh.txt"
    assert got.content.decode("utf-8") == as_json(site, STORY)
    assert requests.get(link, timeout=30).content == got.content  # for ten minutes


def test_translate_file_refusals(site, strict):
    refused(lt_upload(strict, "a.txt", b"Hi.\n", api_key="wrong"), 403, "Invalid API key")
    refused(lt_upload(strict, "a.txt", b"Hi.\n"), 403, "Invalid API key")
    assert lt_upload(strict, "a.txt", b"Hi.\n", api_key=KEY).status_code == 200
    refused(lt_upload(site, "a.txt", b"Hi.\n", target="fr"), 400, "fr is not supported")
    refused(lt_upload(site, "a.pdf", b"%PDF"), 400, "no format reads")
    for name in ("0123.nothing.txt", "nothing"):
        got = requests.get(f"{site}/lt/download_file/{name}", timeout=30)
        refused(got, 404, "no such file")
    traversal = requests.get(f"{site}/lt/download_file/{quote('../../etc/passwd', safe='')}")
    refused(traversal, 404, "Not Found")  # no route has that path: {"error": …} all the same


def test_translate_file_urls_survive_any_file_name(site):
    link = lt_upload(site, "notes #1?.txt", STORY.encode()).json()["translatedFileUrl"]
    assert requests.get(link, timeout=30).status_code == 200


def test_frontend_settings_list_the_formats(site, strict):
    settings = requests.get(f"{site}/lt/frontend/settings", timeout=30).json()
    assert settings["filesTranslation"] is True and settings["keyRequired"] is False
    assert {".txt", ".docx", ".srt", ".html"} <= set(settings["supportedFilesFormat"])
    assert requests.get(f"{strict}/lt/frontend/settings", timeout=30).json()["keyRequired"]
