"""Screenshots of `translator serve`'s page at a desktop's and a phone's width, as a person
uses it: four lines typed (a URL among them), a glossary entry, and the n-best list of the
first line opened. Written to docs/serve-page.png and docs/serve-page-phone.png (what
docs/deploy.md shows).

    python scripts/page_screenshots.py
    python scripts/page_screenshots.py --checkpoint runs/tatoeba-cpu/checkpoints/average5.pt

The model is the config's run best.pt (or --checkpoint); without one, a model is trained for
a minute, as scripts/load_test.py does. Needs Playwright (make install) and the system's
Chromium (make test installs it with apt where it can).
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT
from load_test import Server, model_for

LINES = (
    "I have to go to sleep.",
    "Where is the station?",
    "My GPU is too slow.",
    "Read the guide at https://example.com/start first.",
)
GLOSSARY = "GPU\t显卡"
SIZES = {"serve-page.png": (1280, 760), "serve-page-phone.png": (390, 844)}


def wait_ready(port: int, seconds: float = 120.0) -> None:
    """Until GET /ready says 200 (the decoding process has warmed up)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/ready")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            connection.close()
        time.sleep(0.2)
    sys.exit(f"the server did not say ready within {seconds:g} s")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-c", "--config", default=str(ROOT / "configs/tatoeba-cpu.toml"))
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("needs Playwright: make install (or pip install playwright)")
    if chromium is None:
        sys.exit("needs the system's Chromium: apt-get install chromium fonts-noto-cjk")
    checkpoint = args.checkpoint.resolve() if args.checkpoint else None
    with tempfile.TemporaryDirectory() as work:
        checkpoint = model_for(str(Path(args.config).resolve()), checkpoint, Path(work))
        server = Server(str(Path(args.config).resolve()), checkpoint, True)
        try:
            wait_ready(server.port)
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
