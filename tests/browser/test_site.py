"""The course's website (`make site`) in a real browser: every page opens, whole, with nothing from another host.

The site is built once per test session, into a temporary folder, and served from 127.0.0.1 by a thread of this
process. Each page of the reading order (the landing page, the 12 lectures and 12 exercise notebooks, the
instructors', grading and contributors' pages) is opened in headless Chromium, MathJax is waited for, and the page
fails on:
- a console error or an uncaught exception, a response of 400 or more, a request to any other host (each is
  refused, so no test waits on a network);
- an image that did not load, a link into the site to a file that does not exist or to an anchor its page lacks;
- a formula MathJax did not typeset: a math element with no typeset maths in it, a MathJax error, or TeX left in the
  text outside code (`$$`, `$x$`, `\\frac`, `\\(`);
- an output that shows a traceback, an object's repr (`<Figure size ...>`, `SliderPlot(...)`) or a widget's model;
- a widget without its stored picture and its line saying that the slider moves in JupyterLab;
- a "next" link that does not lead to the following page of the reading order;
- a code cell without its copy button or with a test marker left in it (`# NBVAL_CHECK_OUTPUT`), a figure without
  alt text in words or without its link to the full-size picture, a chapter page without its "Get the course" box.
A click on chapter 09's widest figure must open its picture, drawn at 150 dpi (1.5 times the size the page gives it
when the column is wide enough).
At 1280 px no code cell and no output may be wider than its box; at 390 px (a phone) the counts of what scrolls
sideways are reported (`test-artifacts/site/cut.json`), and no page may be wider than the screen.
It also saves screenshots of the landing page and of chapter 04 (its slider's picture and maths) to
`test-artifacts/site/`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from course_lib.authoring import site

pytestmark = pytest.mark.browser

ARTIFACTS = site.ROOT / "test-artifacts" / "site"  # ignored by git, as test-artifacts/browser/
PAGES = site.reading_order(site.chapters())
SCREENSHOT_CHAPTER = "lectures/04_gae_by_hand"

# What the page reports, in one call once MathJax is done and every image has been decoded (or failed to).
INSPECT = r"""async () => {
  if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  const images = [...document.images];
  await Promise.all(images.map(img => { img.loading = "eager"; return img.decode().catch(() => null); }));
  const prose = document.querySelector("main").cloneNode(true);
  prose.querySelectorAll("pre, code, script, style, mjx-container, .cell_output").forEach(el => el.remove());
  const notes = [...document.querySelectorAll("p.widget-note")];
  return {
    brokenImages: images.filter(img => !(img.complete && img.naturalWidth > 0)).map(img => img.src),
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
    untypeset: [...document.querySelectorAll(".math")].filter(el => !el.querySelector("mjx-container"))
      .map(el => el.textContent.slice(0, 80)),
    mathErrors: [...document.querySelectorAll("mjx-merror")].map(el => el.textContent.slice(0, 80)),
    formulas: document.querySelectorAll("mjx-container").length,
    prose: prose.textContent,
    outputs: [...document.querySelectorAll(".cell_output")].map(el => el.textContent),
    tracebacks: document.querySelectorAll(".cell_output .traceback, .cell_output .output.error").length,
    notes: notes.map(p => p.textContent),
    pictured: notes.filter(p => p.closest(".cell_output").querySelector("img")).length,
    next: document.querySelector("a.right-next")?.href ?? null,
    codeCells: document.querySelectorAll("div.cell_input").length,
    copyButtons: document.querySelectorAll("div.cell_input button.copybtn").length,
    markers: [...document.querySelectorAll("div.cell_input")].filter(el => /NBVAL_/.test(el.textContent)).length,
    figures: [...document.querySelectorAll(".cell_output img")].map(img => ({
      alt: img.alt, linked: img.closest("a.figure-full")?.href === img.src})),
    boxes: document.querySelectorAll("div.get-the-course").length,
  };
}"""
# What is wider than its box, counted once MathJax is done: a box "cuts" when its content is wider than it.
MEASURE_CUT = r"""async () => {
  if (window.MathJax && MathJax.startup) { await MathJax.startup.promise; }
  const cut = (selector) => [...document.querySelectorAll(selector)].filter(el => el.scrollWidth > el.clientWidth + 1);
  return {
    code: document.querySelectorAll("div.cell_input div.highlight pre").length,
    codeCut: cut("div.cell_input div.highlight pre").length,
    outputs: document.querySelectorAll("div.cell_output pre").length,
    outputsCut: cut("div.cell_output pre").length,
    equations: document.querySelectorAll("mjx-container[display='true']").length,
    equationsCut: cut("mjx-container[display='true']").length,
    pageWider: document.documentElement.scrollWidth > window.innerWidth + 1,
  };
}"""
WIDE = {"width": 1280, "height": 860}  # the pages' viewport (a laptop), the one the site's pages are opened at
# MEASURE_CUT of each page at WIDE, taken by test_page_is_whole on its own visit: the cut test opens them again only
# at a phone's width (and any page not measured yet, when run alone).
CUT_WIDE: dict[str, dict] = {}
# Alt text that is no description: empty, a file name or a hash.
NO_ALT = re.compile(r"^(|[0-9a-f]{16,}(\.\w+)?|\S+\.(png|jpe?g|svg))$")
RAW_TEX = re.compile(
    r"\$\$|(?<![\\\w])\$[^$\s][^$\n]*\$|\\(frac|sum|begin|mathbb|hat|left|right|cdot|gamma|lambda)\b|\\[(\[]"
)
STRAY_OUTPUT = re.compile(
    r"Traceback \(most recent call last\)|<[\w.]+ (object at 0x|size \d)|SliderPlot\(|model_id|"
    r"application/vnd\.jupyter|\w+Model\b.*_view_name"
)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """`make site`'s build, once per session, into a temporary folder; fails on any Sphinx warning."""
    out = tmp_path_factory.mktemp("site") / "site"
    warnings = out.parent / "warnings.txt"
    status = site.build(out, warnings=warnings)
    assert status == 0, f"the site's build failed (Sphinx's exit status {status}); see its output above"
    text = warnings.read_text().strip() if warnings.exists() else ""
    assert text == "", f"Sphinx warned while building the site:\n{text}"
    return out


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # no line on stderr per request
        pass


@pytest.fixture(scope="session")
def site_url(built_site):
    """The built site, served from 127.0.0.1 on a free port by a thread of this process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(built_site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def site_browser(chromium, site_url):
    """One browser context for the site's pages, recording what a page must never do.

    Requests to other hosts are refused and recorded; console errors, uncaught exceptions and failed responses
    are recorded too. Each test takes the records its pages made (`problems.clear()` after reading them)."""
    context = chromium.new_context(viewport=WIDE)
    problems: list[str] = []

    def refuse(route):
        problems.append(f"request to another host: {route.request.url}")
        route.abort()

    context.route(lambda url: not url.startswith(site_url), refuse)
    page = context.new_page()
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    yield page, problems
    context.close()


def _target(built_site: Path, site_url: str, href: str) -> tuple[Path, str] | None:
    """The file a link into the site points to, and its anchor; None for a link elsewhere (not followed)."""
    if not href.startswith(site_url):
        return None
    parsed = urlparse(href)
    path = built_site / unquote(parsed.path).lstrip("/")
    return (path / "index.html" if path.is_dir() else path), parsed.fragment


@functools.cache
def _ids(path: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\sid="([^"]+)"', path.read_text(errors="replace")))


def _page_url(site_url: str, docname: str) -> str:
    return urljoin(site_url, f"{docname}.html")


def _problems(page, recorded: list[str], url: str, built_site: Path, site_url: str) -> list[str]:
    """Opens ``url`` and returns what is wrong with it, one line each (nothing when the page is whole)."""
    page.goto(url, wait_until="load")
    report = page.evaluate(INSPECT)
    found = recorded[:]
    recorded.clear()
    found += [f"image did not load: {src}" for src in report["brokenImages"]]
    for href in report["links"]:
        target = _target(built_site, site_url, href)
        if target is None:
            continue
        path, anchor = target
        if not path.is_file():
            found.append(f"link to a missing file: {href}")
        elif anchor and path.suffix == ".html" and anchor not in _ids(path):
            found.append(f"link to a missing anchor: {href}")
    found += [f"untypeset formula: {text!r}" for text in report["untypeset"]]
    found += [f"MathJax error: {text!r}" for text in report["mathErrors"]]
    found += [f"TeX left in the text: {m.group(0)!r}" for m in RAW_TEX.finditer(report["prose"])]
    found += [f"an output shows {m.group(0)!r}" for text in report["outputs"] for m in STRAY_OUTPUT.finditer(text)]
    found += [f"{report['tracebacks']} output(s) show an error"] if report["tracebacks"] else []
    if report["pictured"] != len(report["notes"]):
        found.append(f"{len(report['notes'])} widget notes, but only {report['pictured']} with their picture")
    found += [f"a widget note says nothing of JupyterLab: {n!r}" for n in report["notes"] if "JupyterLab" not in n]
    if report["copyButtons"] != report["codeCells"]:
        found.append(f"{report['codeCells']} code cells, but {report['copyButtons']} copy buttons")
    found += [f"{report['markers']} code cell(s) show a test marker"] if report["markers"] else []
    found += [f"a figure without alt text in words: {f['alt']!r}" for f in report["figures"] if NO_ALT.match(f["alt"])]
    unlinked = sum(not figure["linked"] for figure in report["figures"])
    if unlinked:
        found.append(f"{unlinked} figure(s) do not open at full size")
    chapter = re.search(r"/(lectures|exercises)/[^/]+\.html$", url)
    if chapter and report["boxes"] != 1:
        found.append(f'{report["boxes"]} "Get the course" boxes, not 1')
    return found


@pytest.mark.parametrize("docname", PAGES)
def test_page_is_whole(docname, site_browser, site_url, built_site):
    page, recorded = site_browser
    found = _problems(page, recorded, _page_url(site_url, docname), built_site, site_url)
    CUT_WIDE[docname] = page.evaluate(MEASURE_CUT)
    assert found == [], f"{docname}: " + "\n".join(found)


BROKEN_PAGE = r"""<!DOCTYPE html><html><head><script src="https://cdn.example.org/lib.js"></script></head><body><main>
<p>Raw $$x^2$$, \frac{1}{2} and $y$ in the text.</p><span class="math">\(x\)</span>
<img src="_images/no-such-picture.png"><a href="lectures/no-such-page.html">a</a><a href="index.html#no-such-id">b</a>
<div class="cell_output"><pre>&lt;Figure size 640x480 with 1 Axes&gt;</pre></div>
<div class="cell_output"><p class="widget-note">A slider.</p></div>
<div class="cell_input"><pre># NBVAL_CHECK_OUTPUT
x = 1</pre></div><div class="cell_output"><img src="_static/favicon.svg" alt="abc.png"></div>
<script>console.error("something broke");</script></main></body></html>"""


def test_the_checks_see_a_broken_page(site_browser, site_url, built_site):
    """A page with one of each fault, served beside the site: every check must report its fault."""
    page, recorded = site_browser
    path = built_site / "broken-on-purpose.html"
    path.write_text(BROKEN_PAGE)
    try:
        found = "\n".join(_problems(page, recorded, site_url + path.name, built_site, site_url))
    finally:
        path.unlink()
        page.goto("about:blank")  # the broken page's late events (a second 404) must not reach the next test
        recorded.clear()
    for fault in [
        "request to another host: https://cdn.example.org/lib.js",
        "console error: something broke",
        "HTTP 404: " + site_url + "_images/no-such-picture.png",
        "image did not load",
        "link to a missing file: " + site_url + "lectures/no-such-page.html",
        "link to a missing anchor: " + site_url + "index.html#no-such-id",
        "untypeset formula: '\\\\(x\\\\)'",
        "TeX left in the text: '$$'",
        "TeX left in the text: '\\\\frac'",
        "TeX left in the text: '$y$'",
        "an output shows '<Figure size 6'",
        "1 widget notes, but only 0 with their picture",
        "a widget note says nothing of JupyterLab",
        "1 code cells, but 0 copy buttons",
        "1 code cell(s) show a test marker",
        "a figure without alt text in words: 'abc.png'",
        "1 figure(s) do not open at full size",
    ]:
        assert fault in found, f"the checks missed: {fault}\n(they found:\n{found})"


SIZED_FIGURES = "a.figure-full img[style*='width']"  # the figures stored with the size to show them at
WIDEST_FIGURE = r"""(selector) => {
  const images = [...document.querySelectorAll(selector)];
  const widest = images.reduce((a, b) => (b.naturalWidth > a.naturalWidth ? b : a));
  widest.scrollIntoView({behavior: "instant"});
  return {index: images.indexOf(widest), natural: widest.naturalWidth, shown: widest.clientWidth,
    sized: parseFloat(widest.style.width), src: widest.src};
}"""


def test_a_figure_opens_at_full_size(site_browser, site_url):
    """Chapter 09's widest figure is shown narrower than it is drawn; a click opens the picture itself, drawn at
    150 dpi: 1.5 times the width its notebook stores it to be shown at."""
    page, recorded = site_browser
    page.goto(_page_url(site_url, "lectures/09_scaling_up"), wait_until="load")
    page.evaluate(INSPECT)
    widest = page.evaluate(WIDEST_FIGURE, SIZED_FIGURES)
    assert widest["natural"] == pytest.approx(1.5 * widest["sized"], abs=2), widest
    assert widest["shown"] < widest["natural"], widest
    page.locator(SIZED_FIGURES).nth(widest["index"]).click()
    page.wait_for_load_state("load")
    opened = page.evaluate("() => ({url: location.href, width: document.images[0].naturalWidth})")
    assert opened == {"url": widest["src"], "width": widest["natural"]}
    assert recorded == []


def test_nothing_is_cut_at_1280_px_and_a_phone_scrolls_only_inside_boxes(chromium, site_url, capsys):
    """At 1280 px every code cell and every output is whole; at 390 px the page never scrolls sideways, and what
    scrolls inside its own box (a code cell, an output, a display equation) is counted and reported, the lectures'
    code cells and the exercises' apart."""
    counts = {}
    for width in (WIDE["width"], 390):
        context = chromium.new_context(viewport={**WIDE, "width": width})
        page = context.new_page()
        total = {"exerciseCode": 0, "exerciseCodeCut": 0}
        for docname in PAGES:
            measured = dict(CUT_WIDE[docname]) if width == WIDE["width"] and docname in CUT_WIDE else None
            if measured is None:
                page.goto(_page_url(site_url, docname), wait_until="load")
                measured = page.evaluate(MEASURE_CUT)
            if docname.startswith("exercises/"):
                total["exerciseCode"] += measured.pop("code")
                total["exerciseCodeCut"] += measured.pop("codeCut")
            for key, value in measured.items():
                total[key] = total.get(key, 0) + int(value)
        context.close()
        counts[width] = total
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "cut.json").write_text(json.dumps(counts, indent=1) + "\n")
    with capsys.disabled():
        for width, total in counts.items():
            print(
                f"\nsite at {width} px: {total['codeCut']} of {total['code']} lecture code cells, "
                f"{total['exerciseCodeCut']} of {total['exerciseCode']} exercise code cells, {total['outputsCut']} "
                f"of {total['outputs']} outputs and {total['equationsCut']} of {total['equations']} display "
                f"equations scroll sideways; {total['pageWider']} pages wider than the screen"
            )
    assert counts[1280]["codeCut"] == 0 and counts[1280]["exerciseCodeCut"] == 0, counts[1280]
    assert counts[1280]["outputsCut"] == 0, counts[1280]
    assert counts[390]["pageWider"] == 0 and counts[1280]["pageWider"] == 0, counts


def _next_page(built_site: Path, docname: str) -> str | None:
    """Where the "next" link of a built page leads, as a page name (None on the last page)."""
    html = (built_site / f"{docname}.html").read_text()
    link = re.search(r'<a class="right-next"\s+href="([^"#]+)', html)
    if link is None:
        return None
    return urlparse(urljoin(f"http://site/{docname}.html", link.group(1))).path.lstrip("/").removesuffix(".html")


def test_reading_order(built_site):
    """The sidebar lists the lectures in the chapter list's order, and "next" walks the whole reading order."""
    index = (built_site / "index.html").read_text()
    sidebar = re.search(r'<nav class="bd-links bd-docs-nav".*?</nav>', index, flags=re.DOTALL).group(0)
    lectures = re.findall(r'href="(lectures/[^"#]+)\.html"', sidebar)
    assert lectures == [name for name in PAGES if name.startswith("lectures/")], "sidebar out of the chapters' order"
    walked = [_next_page(built_site, docname) for docname in PAGES]
    assert walked == PAGES[1:] + [None]


def test_pages_name_no_other_host(built_site):
    """No page's script, stylesheet, icon or image comes from another host (even one a visit would not load)."""
    pattern = re.compile(r'<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"')
    for path in sorted(built_site.rglob("*.html")):
        assert pattern.findall(path.read_text()) == [], path.relative_to(built_site)


def test_screenshots(site_browser, site_url):
    """The landing page and a chapter as a reader sees them, for people to look at (test-artifacts/site/)."""
    page, recorded = site_browser
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.goto(site_url + "index.html", wait_until="load")
    page.evaluate(INSPECT)
    page.screenshot(path=ARTIFACTS / "landing.png")
    page.goto(_page_url(site_url, SCREENSHOT_CHAPTER), wait_until="load")
    page.evaluate(INSPECT)
    # The slider's stored picture under its line, with the maths of the text above it.
    page.evaluate("""() => {
      document.querySelector("p.widget-note").scrollIntoView({behavior: "instant"});
      window.scrollBy({top: -330, behavior: "instant"});
    }""")
    page.screenshot(path=ARTIFACTS / "chapter-04.png")
    assert recorded == []
