"""`translator download` against a local HTTP server serving small files in the real
formats; no test touches the internet."""

import bz2
import gzip
import io
import json
import socket
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import assert_one_line_error, run_cli

from translator.corpus.download import download
from translator.corpus.fetcher import fetch
from translator.corpus.formats.readers import detect_format
from translator.errors import UserError

ENGLISH = {1: "Hi.", 2: "Run!", 3: "I'm home.", 5: 'She said "no".'}
CHINESE = {100: "你好。", 101: "您好。", 102: "跑！", 103: "我回來了。", 104: "她說「不」。"}
LINKS = [(100, 1), (101, 1), (102, 2), (103, 3), (103, 3), (104, 5), (102, 99)]  # 99: none


def tatoeba_files(padding: int = 20_000) -> dict[str, bytes]:
    english = [f"{i}\teng\t{text}" for i, text in ENGLISH.items()]
    english += [f"{1000 + i}\teng\tAn unlinked sentence number {i}." for i in range(padding)]
    chinese = [f"{i}\tcmn\t{text}" for i, text in CHINESE.items()]
    links = [f"{zh}\t{en}" for zh, en in LINKS]

    def packed(lines):
        return bz2.compress(("\n".join(lines) + "\n").encode())

    return {
        "/per_language/eng/eng_sentences.tsv.bz2": packed(english),
        "/per_language/cmn/cmn_sentences.tsv.bz2": packed(chinese),
        "/per_language/cmn/cmn-eng_links.tsv.bz2": packed(links),
    }


class Server:
    """Serves `files` with Range support; `drop[path] = n` cuts that file's next transfer
    after n bytes by closing the connection."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.drop, self.requests = files, {}, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                rng = self.headers.get("Range")
                outer.requests.append((self.path, rng))
                data = outer.files.get(self.path, outer.files.get(self.path.split("?")[0]))
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = int(rng.removeprefix("bytes=").rstrip("-")) if rng else 0
                if start >= len(data):
                    self.send_error(416, "Range Not Satisfiable")
                    return
                self.send_response(206 if rng else 200)
                self.send_header("Content-Length", str(len(data) - start))
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                body = data[start:]
                cut = outer.drop.pop(self.path, None)
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def do_HEAD(self):
                data = outer.files.get(self.path)
                self.send_response(200 if data is not None else 404)
                self.send_header("Content-Length", str(len(data or b"")))
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = Server(tatoeba_files())
    yield running
    running.close()


def expected_rows() -> list[str]:
    pairs = sorted({(en, zh) for zh, en in LINKS if en in ENGLISH})
    return [f"{en}\t{ENGLISH[en]}\t{zh}\t{CHINESE[zh]}" for en, zh in pairs]


def test_tatoeba_exports_are_joined_into_sentence_pairs(server, tmp_path):
    result = download("tatoeba", tmp_path, server.url, progress=False)
    lines = result.pairs_file.read_text(encoding="utf-8").splitlines()
    assert lines == expected_rows() and result.pairs == 5  # duplicate and dangling dropped
    assert detect_format(result.pairs_file) == "tatoeba"
    assert len(result.fetched) == 3


def test_a_dropped_connection_resumes_with_a_range_request(server, tmp_path):
    path = "/per_language/eng/eng_sentences.tsv.bz2"
    whole = server.files[path]
    server.drop[path] = len(whole) // 3
    fetch(server.url + path, tmp_path / "eng.tsv.bz2", progress=False)
    assert (tmp_path / "eng.tsv.bz2").read_bytes() == whole
    assert server.requests == [(path, None), (path, f"bytes={len(whole) // 3}-")]
    assert not (tmp_path / "eng.tsv.bz2.part").exists()


def test_a_partial_file_from_an_earlier_run_is_resumed(server, tmp_path):
    path = "/per_language/cmn/cmn_sentences.tsv.bz2"
    whole = server.files[path]
    (tmp_path / "cmn.bz2.part").write_bytes(whole[:10])
    fetch(server.url + path, tmp_path / "cmn.bz2", progress=False)
    assert (tmp_path / "cmn.bz2").read_bytes() == whole
    assert server.requests == [(path, "bytes=10-")]


def test_cached_files_are_checked_and_not_fetched_again(server, tmp_path):
    download("tatoeba", tmp_path, server.url, progress=False)
    count = len(server.requests)
    again = download("tatoeba", tmp_path, server.url, progress=False)
    assert len(server.requests) == count and again.fetched == []
    cached = tmp_path / "downloads/cmn_sentences.tsv.bz2"
    cached.write_bytes(cached.read_bytes()[:-1] + b"x")  # damaged: the checksum says so
    third = download("tatoeba", tmp_path, server.url, progress=False)
    assert third.fetched == ["cmn_sentences.tsv.bz2"]
    assert third.pairs_file.read_text(encoding="utf-8").splitlines() == expected_rows()


def test_anki_archive_and_the_environment_variable_mirror(tmp_path, monkeypatch):
    text = "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM)\n"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("cmn.txt", text * 3)
        z.writestr("_about.txt", "about")
    running = Server({"/cmn-eng.zip": archive.getvalue()})
    try:
        monkeypatch.setenv("TRANSLATOR_DOWNLOAD_URL", running.url)
        result = download("anki", tmp_path, progress=False)
    finally:
        running.close()
    assert result.pairs_file.read_text(encoding="utf-8") == text * 3 and result.pairs == 3
    assert detect_format(result.pairs_file) == "anki"


def test_server_errors_and_offline_are_one_line(server, tmp_path):
    with pytest.raises(UserError, match="the server answered 404"):
        fetch(server.url + "/missing.bz2", tmp_path / "m", progress=False)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: as good as offline
    result = run_cli("download", "--base-url", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert_one_line_error(result, "cannot reach", "--base-url")
    result = run_cli("download", "--source", "wiki", cwd=tmp_path)
    assert_one_line_error(result, "unknown source 'wiki'")


def test_cli_reports_pairs_and_the_next_step(server, tmp_path):
    result = run_cli("download", "--base-url", server.url, "-o", "raw", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "5 pairs in raw/en-cmn.tsv (downloaded " in result.stdout
    assert "next: translator prepare --input raw/en-cmn.tsv" in result.stdout


def opus_fixture(server, en_lines, zh_lines):
    """An OPUS-style Moses zip and the API answer that points at it."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("README", "News-Commentary\n")
        z.writestr("News-Commentary.en-zh.en", "".join(f"{e}\n" for e in en_lines))
        z.writestr("News-Commentary.en-zh.zh", "".join(f"{z_}\n" for z_ in zh_lines))
        z.writestr("News-Commentary.en-zh.ids", "")
    zip_path = "/OPUS-News-Commentary/v16/moses/en-zh.txt.zip"
    server.files[zip_path] = archive.getvalue()
    entry = {
        "alignment_pairs": len(en_lines),
        "corpus": "News-Commentary",
        "latest": "True",
        "preprocessing": "moses",
        "size": 1,
        "source": "en",
        "target": "zh",
        "url": server.url + zip_path,
        "version": "v16",
    }
    other = entry | {"corpus": "UNPC", "version": "v1.0", "alignment_pairs": 17_451_549}
    other["url"] = server.url + "/OPUS-UNPC/v1.0/moses/en-zh.txt.zip"
    server.files["/opusapi/"] = json.dumps({"corpora": [other, entry]}).encode()
    return zip_path


def test_an_opus_corpus_is_found_through_the_api_and_prepared_from_its_zip(server, tmp_path):
    from dataclasses import replace

    from conftest import generated_pairs, tiny_config

    from translator.corpus.preparer import prepare
    from translator.corpus.remote import fetch_corpus

    pairs = generated_pairs(300)
    zip_path = opus_fixture(server, [e for e, _ in pairs], [z for _, z in pairs])
    api = server.url + "/opusapi/"
    got = fetch_corpus("opus", "News-Commentary", tmp_path, api, "latest", progress=False)
    assert got.path == tmp_path / "News-Commentary-v16.en-zh.txt.zip" and got.fetched
    assert got.pairs == len(pairs)
    query = server.requests[0][0]
    assert "source=en" in query and "target=zh" in query and "corpus=News-Commentary" in query
    assert server.requests[-1] == (zip_path, None)
    again = fetch_corpus("opus", "News-Commentary", tmp_path, api, "latest", progress=False)
    assert not again.fetched  # from the cache
    config = replace(tiny_config(tmp_path).data, inputs=[str(got.path)])
    stats = prepare(config).stats
    assert stats["inputs"][0]["format"] == "moses" and stats["rows_read"] == len(pairs)
    with pytest.raises(UserError, match="OPUS has no English–Chinese Moses files for 'Nope'"):
        fetch_corpus("opus", "Nope", tmp_path, api, "latest", progress=False)


def test_a_wmt_corpus_and_the_list_with_sizes(server, tmp_path):
    rows = "".join(f"Sentence {i}.\t第{i}句。\n" for i in range(50)).encode()
    path = "/news-commentary/v18.1/training/news-commentary-v18.en-zh.tsv.gz"
    server.files[path] = gzip.compress(rows, mtime=0)
    opus_fixture(server, ["Hi."], ["你好。"])
    env = {"TRANSLATOR_OPUS_API": server.url + "/opusapi/", "TRANSLATOR_WMT_URL": server.url}
    result = run_cli("download", "--list", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.split()[:4] == ["opus", "UNPC", "v1.0", "17,451,549"] for line in lines)
    wmt = next(line for line in lines if line.startswith("wmt"))
    assert wmt.split()[1] == "news-commentary-v18" and wmt.endswith("0.0 MB")
    args = ["download", "--source", "wmt", "--corpus", "news-commentary-v18", "--out", "raw"]
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    got = tmp_path / "raw/news-commentary-v18.en-zh.tsv.gz"
    assert gzip.decompress(got.read_bytes()) == rows
    assert detect_format(got) == "anki"  # a plain en<TAB>zh table
    result = run_cli("download", "--source", "opus", cwd=tmp_path, env=env)
    assert_one_line_error(result, "--source opus needs --corpus NAME")
