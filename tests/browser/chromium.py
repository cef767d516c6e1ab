"""Headless Chromium for the report's browser test and the README's screenshot: Debian's
``chromium`` driven by Playwright (Playwright's own browser download is not used). Where either
is missing, :func:`browser_or_skip` skips — or fails, when ``PTXALLOC_REQUIRE_BROWSER`` is set,
as CI sets it (.ci/run)."""

from __future__ import annotations

import contextlib
import os
import shutil

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    """``$PTXALLOC_CHROMIUM``, else Debian's ``chromium`` (or ``chromium-browser``)."""
    return os.environ.get("PTXALLOC_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")


@contextlib.contextmanager
def chromium():
    """A launched headless Chromium (Playwright's Browser); raises RuntimeError naming what is
    missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise RuntimeError("the Python package playwright is not installed "
                           "(pip install -e '.[test]')") from None
    path = chromium_path()
    if path is None:
        raise RuntimeError("no chromium on the PATH (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(html_path: str, png_path: str, width: int = 1240, height: int = 1400,
               hover_point: int | None = None) -> None:
    """A PNG of the top of a report page, hovering plot point ``hover_point`` of the first
    plot when given (its tooltip then shows)."""
    with chromium() as browser:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto("file://" + os.path.abspath(html_path))
        if hover_point is not None:
            page.hover(f"svg.plot circle.pt >> nth={hover_point}")
        page.screenshot(path=png_path)


if __name__ == "__main__":
    import sys

    # python3 tests/browser/chromium.py REPORT.html OUT.png [POINT]: the README's screenshot
    screenshot(sys.argv[1], sys.argv[2],
               hover_point=int(sys.argv[3]) if len(sys.argv) > 3 else None)
