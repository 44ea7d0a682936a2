"""A student's feedback page (`grades/feedback/<student>.html`) opened from disk in headless Chromium.

The page is written from rows made here (no grading run), with a check's message whose first line (of two) holds
HTML, a script and an image from another host, as a hostile or careless message could. Opened as a file, as a
student opens it from an e-mail, it must show every exercise and every line of the message, log no console error,
run no script and request nothing but itself. The
same page with the message left unescaped (the defence off) is opened first, to show that the test sees the
attack: its script runs and it requests the image.
"""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from course_lib.authoring.grading.canonical import load_canonical
from course_lib.authoring.grading.feedback_pages import write_feedback
from course_lib.authoring.grading.verdict import Row

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = 'reward_to_go: wrong <img src="http://198.51.100.1/x.png"><script>document.title = "ran"</script>'
CASE = "  seen on the case: rewards = [1, 0, <2>]"  # a message's later line, with its JupyterLab indentation


def test_a_feedback_page_opens_offline_with_nothing_from_elsewhere(chromium, tmp_path):
    submission = str(tmp_path / "subs" / "ann_00_warmup.ipynb")
    rows = [
        Row("ann", "00_warmup", "discounted_return", 1, 1, "passed", "✔ discounted_return: correct", "", submission),
        Row("ann", "00_warmup", "reward_to_go", 0, 1, "failed", HOSTILE, "", submission, f"{HOSTILE}\n{CASE}"),
    ]
    canonical = {"00_warmup": load_canonical(ROOT / "solutions" / "00_warmup.ipynb")}
    written = write_feedback(rows, canonical, tmp_path / "feedback", ROOT / "notebooks")
    page_path = written[0].with_suffix(".html")

    unescaped = tmp_path / "unescaped.html"
    escaped = page_path.read_text(encoding="utf-8")
    unescaped.write_text(escaped.replace(html.escape(HOSTILE), HOSTILE), encoding="utf-8")
    title, problems, _ = _open(chromium, unescaped)
    assert title == "ran" and "request: http://198.51.100.1/x.png" in problems  # the attack, seen

    title, problems, (headings, quoted, images, scripts) = _open(chromium, page_path)
    assert problems == []
    assert title == "Feedback for ann"  # the message's script did not run
    assert images == 0 and scripts == 0
    assert headings == [
        "✔ Exercise 1: The discounted return of an episode (discounted_return)",
        "✘ Exercise 2: The reward-to-go of every step (reward_to_go)",
    ]
    assert quoted[1] == f"{HOSTILE}\n{CASE.strip()}"  # shown as text, each line of the message on its own


def _open(chromium, path: Path):
    """(the page's title, what it did that it must not, what it shows) for a page opened from disk."""
    context = chromium.new_context()
    page = context.new_page()
    problems: list[str] = []
    url = path.as_uri()
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    page.on("request", lambda request: problems.append(f"request: {request.url}") if request.url != url else None)
    context.route(lambda target: target != url, lambda route: route.abort())  # nothing leaves the machine
    try:
        page.goto(url)
        page.wait_for_load_state("load")
        shown = (
            page.locator("h3").all_inner_texts(),
            page.locator("blockquote").all_inner_texts(),
            page.locator("img").count(),
            page.locator("script").count(),
        )
        return page.title(), problems, shown
    finally:
        context.close()
