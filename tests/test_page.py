"""The page at / (translator/deploy/static/index.html) in a real browser, headless
Chromium driven by Playwright, against the server's app on a tiny trained model: typing
translates without a click, a stale answer never overwrites a newer one, the glossary box
reaches the request, a click shows the n-best list, a .txt file comes back translated as a
download, each refusal is one sentence, and everything works from the keyboard.

`make test` installs Playwright (the development set) and the system's Chromium where apt
can; where either is missing these tests skip and say which."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import tiny_config

pytest.importorskip("fastapi")
pytest.importorskip("granian")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (make install installs it)"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed: make test installs it with apt where it can "
    "(apt-get install chromium)",
)

from test_serve import app_in_thread, call, post  # noqa: E402

LINE = "Tom can see the cat."
OTHER = "She should draw the flower."


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
    return create_app(
        LocalDecoder(translator), config.decode, replace(config.serve, **serve), about
    )


@pytest.fixture(scope="module")
def site(model):
    with app_in_thread(app_for(model)) as url:
        yield url


@pytest.fixture(scope="module")
def guarded(model):
    """A server that needs a key, takes short lines and small documents, and three
    requests a client before it refuses with 429."""
    app = app_for(
        model,
        api_keys=["secret"],
        max_chars=40,
        max_document_chars=100,
        rate_limit=0.01,
        rate_burst=3,
        refusal_delay_s=0.0,
    )
    with app_in_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()


def opened(page, url: str):
    """The page at `url`, once it has read the server's /info."""
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('model').textContent.startsWith('Model:')")
    return page


def shown(page, translation: str) -> None:
    """Wait until the first translation on the page is `translation`."""
    page.wait_for_function(
        "(t) => document.querySelector('#out li .zh')?.textContent === t", arg=translation
    )


def said(page, sentence: str) -> None:
    """Wait until the status line says `sentence`, as an error."""
    page.wait_for_function(
        "(s) => { const e = document.getElementById('status');"
        " return e.textContent === s && e.className === 'error'; }",
        arg=sentence,
    )


def translation(url: str, body: dict) -> str:
    status, answer = post(url, body)
    assert status == 200, answer
    return answer["translations"][0]


def test_typing_translates_without_a_click(site, page, trained):
    from translator.model.checkpoint import digest

    expected = translation(site, {"text": [LINE]})
    opened(page, site)
    sent = []
    page.on("request", lambda r: sent.append(r) if r.url.endswith("/translate") else None)
    page.focus("#text")
    page.keyboard.type(LINE, delay=20)
    shown(page, expected)
    assert expected and len(sent) < len(LINE) / 2  # debounced: not a request a key
    assert " ms (server " in page.inner_text("#timing")
    assert page.inner_text("#count").startswith(f"{len(LINE)} characters")
    named = f"Model: run run, checkpoint best.pt ({digest(trained)[:12]}), engine torch"
    assert named in page.inner_text("#model")
    assert page.get_attribute("#model", "title").startswith("decodes from best.pt;")


def test_a_stale_answer_never_overwrites_a_newer_one(site, page):
    opened(page, site)
    page.evaluate(
        "() => { window.seen = []; const out = document.getElementById('out');"
        " new MutationObserver(() => window.seen.push(out.textContent))"
        ".observe(out, {childList: true, subtree: true, characterData: true}); }"
    )
    held = []

    def hold_the_first(route):
        if held:
            route.continue_()
        else:
            held.append(route)  # answered below, after the newer request's answer

    page.route("**/translate", hold_the_first)
    page.fill("#text", LINE)
    page.wait_for_function("() => true", polling=50)  # let the debounced request go out
    while not held:
        page.wait_for_timeout(50)
    page.fill("#text", OTHER)
    newer = translation(site, {"text": [OTHER]})
    shown(page, newer)
    stale = {"translations": ["STALE"], "lost": [[]], "appended": [[]], "missed": [[]]}
    with contextlib.suppress(sync_api.Error):  # the page may have aborted it already
        held[0].fulfill(status=200, content_type="application/json", body=json.dumps(stale))
    page.wait_for_timeout(500)
    assert page.inner_text("#out li .zh") == newer
    assert not any("STALE" in text for text in page.evaluate("window.seen"))


def test_the_glossary_box_reaches_the_request(site, page):
    opened(page, site)
    page.click("#glossary-box summary")
    page.fill("#glossary", "cat\t猫咪\n# a comment\nbook, 书本\n")
    with page.expect_request(lambda r: r.url.endswith("/translate")) as request:
        page.fill("#text", LINE)
    glossary = {"cat": "猫咪", "book": "书本"}
    assert request.value.post_data_json["glossary"] == glossary
    shown(page, translation(site, {"text": [LINE], "glossary": glossary}))
    page.fill("#glossary", "cat")
    said(page, "Glossary line 1 needs the English, a tab (or a comma), then the Chinese.")


def test_a_click_on_a_translation_shows_its_n_best_with_scores(site, page):
    opened(page, site)
    page.select_option("#beam", "3")
    page.fill("#text", LINE)
    shown(page, translation(site, {"text": [LINE], "beam": 3}))
    page.click("#out li .zh")
    page.wait_for_selector("#out li .nbest li")
    status, answer = post(site, {"text": [LINE], "beam": 5, "nbest": 5})  # at least beam 5
    expected = answer["hypotheses"][0]
    assert status == 200 and len(expected) == 5
    assert page.locator("#out li .nbest .hyp").all_inner_texts() == [h["text"] for h in expected]
    scores = [f"score {h['score']:.3f}" for h in expected]
    assert page.locator("#out li .nbest .score").all_inner_texts() == scores
    assert page.get_attribute("#out li .zh", "aria-expanded") == "true"
    page.click("#out li .zh")  # a second click hides it
    assert page.locator("#out li .nbest").count() == 0


def test_a_text_file_comes_back_translated_as_a_download(site, page, tmp_path):
    text = f"{LINE} I will buy the book.\n\n{OTHER}\n"
    path = tmp_path / "story.txt"
    path.write_text(text, encoding="utf-8")
    opened(page, site)
    with page.expect_download() as download:
        page.set_input_files("#file", str(path))
    got = Path(download.value.path()).read_text(encoding="utf-8")
    assert download.value.suggested_filename == "story.zh.txt"
    status, answer = call(site + "/document", json.dumps({"text": text}).encode())
    assert status == 200 and got == answer["translation"] and answer["lines"] == 2
    first, blank, last, end = got.split("\n")
    assert first == translation(site, {"text": [f"{LINE} I will buy the book."], "split": True})
    assert (blank, end) == ("", "") and last == translation(site, {"text": [OTHER]})
    assert page.inner_text("#status").startswith("story.txt: 2 lines translated")
    assert page.is_visible("#download")


def test_each_refusal_is_one_sentence(guarded, page, tmp_path):
    opened(page, guarded)
    assert page.is_visible("#key")  # /info says the server needs keys
    page.fill("#text", LINE)
    said(page, "This server needs an API key: enter it in the API key field.")
    page.fill("#key", "wrong")
    said(page, "The server did not accept this API key: check it in the API key field.")
    page.fill("#key", "secret")  # three requests from here on: the rate limit's burst
    page.wait_for_selector("#out li .zh")
    page.fill("#text", "x" * 50)
    said(page, "Line 1 is too long: this server takes at most 40 characters a line (it has 50).")
    assert page.get_attribute("#count", "class") == "over"
    big = tmp_path / "big.txt"
    big.write_text("Tom can see the cat.\n" * 6, encoding="utf-8")
    page.set_input_files("#file", str(big))
    said(page, "The file is too large: this server takes documents of at most 100 characters.")
    page.fill("#text", LINE)
    page.wait_for_function("document.getElementById('status').textContent.startsWith('Too many')")
    assert re.fullmatch(
        r"Too many requests from you: wait (9\d|100) s and try again\.", page.inner_text("#status")
    )


def tab_to(page, selector: str, most: int = 40) -> None:
    """Press Tab until `selector` has the focus (fails if it never does)."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
    pytest.fail(f"{selector} cannot be reached with Tab")


def test_the_page_works_from_the_keyboard_alone(site, page):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    opened(page, site)
    for label in ("Beam", "Translate as I type", "Translate a file"):
        assert page.get_by_label(label, exact=True).count() == 1, label
    assert page.get_by_role("textbox", name="English", exact=True).count() == 1
    for button in ("Translate", "Clear", "Copy"):
        assert page.get_by_role("button", name=button, exact=True).count() == 1, button
    assert page.get_by_label("One term a line", exact=False).count() == 1  # the glossary
    tab_to(page, "#beam")
    page.keyboard.press("ArrowDown")  # beam 2
    tab_to(page, "#live")
    page.keyboard.press("Space")  # translate only when asked
    tab_to(page, "#text")
    page.keyboard.type(LINE)
    page.wait_for_timeout(800)
    assert page.locator("#out li").count() == 0  # not while live translation is off
    page.keyboard.press("Control+Enter")
    expected = translation(site, {"text": [LINE], "beam": 2})
    shown(page, expected)
    tab_to(page, "#out li .zh")
    page.keyboard.press("Enter")
    page.wait_for_selector("#out li .nbest li")
    page.keyboard.press("Escape")
    assert page.locator("#out li .nbest").count() == 0
    tab_to(page, "#glossary-box summary")
    page.keyboard.press("Enter")
    tab_to(page, "#glossary")
    tab_to(page, "#copy")
    page.keyboard.press("Enter")
    page.wait_for_function("document.getElementById('status').textContent === 'Copied.'")
    assert page.evaluate("navigator.clipboard.readText()") == expected


def test_the_panes_stand_side_by_side_and_stack_on_a_phone(site, browser):
    for width, side_by_side in ((1280, True), (390, False)):
        page = browser.new_page(viewport={"width": width, "height": 800})
        opened(page, site)
        english = page.locator(".pane").nth(0).bounding_box()
        chinese = page.locator(".pane").nth(1).bounding_box()
        assert (chinese["x"] > english["x"] + english["width"] - 1) == side_by_side
        assert (chinese["y"] >= english["y"] + english["height"]) == (not side_by_side)
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways
        page.close()


def test_the_page_is_small_and_needs_nothing_from_elsewhere():
    from importlib import resources

    page = resources.files("translator.deploy").joinpath("static/index.html").read_bytes()
    assert len(page) < 60_000
    text = page.decode("utf-8")
    assert "http://" not in text and "https://" not in text.replace("https://example", "")
    assert "<script src" not in text and "<link" not in text
