"""Fixtures for the browser tests: a real JupyterLab server and Debian's Chromium, both local and headless.

`jupyterlab` starts one server for the whole session on a free loopback port with a random token. It serves a
temporary copy of `notebooks/`, so nothing a test does (autosave included) can reach the repository, and it has its
own settings, workspace, config, runtime and data folders, so a developer's own JupyterLab set-up changes nothing.
The settings switch off the news feed, the update check and the PyPI extension manager: all three would try the
network. The fixture waits until `/api/status` answers, and stops the server (terminate, then kill) afterwards; the
server's log goes to `test-artifacts/browser/jupyterlab.log`.

`chromium` drives `/usr/bin/chromium` (Debian's `chromium` package, which `.ci/install-chromium` installs) through
Playwright; no browser is downloaded. When Chromium is missing or will not start, every browser test skips with a
message that says why.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "browser"  # ignored by git (.gitignore: test-artifacts/)
CHROMIUM = Path(os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium keeps dialling Google's services, which a closed network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",  # the test machines run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_TIMEOUT_S = 60

# JupyterLab's user settings, one file per plugin: no news, no update check (both would fetch from the web).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}
# The server side of the same: no news feed, never check for updates, an extension manager that never asks PyPI;
# and kernels reached over CurveZMQ, as `make setup` configures them for `make lab` (no "running over TCP without
# encryption" warning at each kernel start).
SERVER_CONFIG = {
    "LabApp": {
        "news_url": None,
        "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        "extension_manager": "readonly",
    },
    "KernelManager": {"transport_encryption": "auto"},
}

# Slider-to-redraw times the tests record, with the machine's load average at the time (os.getloadavg(), 1 min),
# printed at the end of the run (see pytest_terminal_summary): other work on the cores slows every redraw.
REDRAW_TIMES: list[tuple[str, float, float]] = []
REDRAW_AIM_MS = 200.0


@dataclass
class LabServer:
    """A running JupyterLab: where it listens, its token, the folder it serves and its log."""

    url: str
    token: str
    root: Path
    log: Path

    def api(self, method: str, path: str) -> object:
        """Calls the server's REST API (`/api/...`) with the token; returns the decoded JSON (None when empty)."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def lab_url(self, notebook: str, workspace: str) -> str:
        """The address a student opens: the notebook in a workspace of its own, the token in the query."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{notebook}?token={self.token}"

    def shut_down_kernels(self, notebook: str) -> None:
        """Ends the sessions (and kernels) JupyterLab started for `notebook`, so they stop using the CPU."""
        for session in self.api("GET", "/api/sessions") or []:
            if session.get("path") == notebook:
                self.api("DELETE", f"/api/sessions/{session['id']}")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """`test-artifacts/browser/`: screenshots, the server log, the browser console and the redraw times."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def chromium():
    """Debian's headless Chromium driven by Playwright; skips, saying why, when it is missing or cannot start."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"Debian's chromium is not installed ({CHROMIUM} is missing): run .ci/install-chromium as root "
            "(or `apt-get install chromium`), or point COURSE_CHROMIUM at a Chromium binary"
        )
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        pytest.skip(f"the Python package playwright is not installed ({err}): run `make setup`")
    playwright = sync_playwright().start()
    try:
        # launch() gives every run a fresh, temporary user data dir, removed when the browser closes.
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    except PlaywrightError as err:
        playwright.stop()
        # Playwright's message repeats the whole command line; the lines after it (Chromium's own output) say why.
        lines = [line[:300] for line in str(err).splitlines() if line.strip() and not line.startswith("<launching>")]
        pytest.skip(f"Chromium at {CHROMIUM} failed to start: " + " | ".join(lines[:8]))
    yield browser
    browser.close()
    playwright.stop()


def _free_port() -> int:
    """A loopback port nobody listens on right now (the server is told not to try others: port_retries=0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _prepare_folders(base: Path) -> dict[str, Path]:
    """Creates the server's private folders under `base` and copies the notebooks into its root."""
    folders = {name: base / name for name in ("root", "settings", "workspaces", "config", "runtime", "data", "ipython")}
    for folder in folders.values():
        folder.mkdir(parents=True)
    notebooks = ROOT / "notebooks"
    if notebooks.is_dir():
        ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
        shutil.copytree(notebooks, folders["root"] / "notebooks", ignore=ignore)
    for relative, settings in LAB_SETTINGS.items():
        path = folders["settings"] / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    (folders["config"] / "jupyter_server_config.json").write_text(json.dumps(SERVER_CONFIG))
    return folders


def _wait_until_answering(server: LabServer, process: subprocess.Popen) -> None:
    """Polls `/api/status` until the server answers; fails with the log's tail if it exits or takes too long."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode} while starting")
        try:
            server.api("GET", "/api/status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.2)
    raise RuntimeError(f"JupyterLab did not answer /api/status within {SERVER_START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen) -> None:
    """Terminate (the server then shuts its kernels down), and kill if it is still there after 15 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="session")
def jupyterlab(tmp_path_factory, artifacts):
    """A JupyterLab server for the session, serving a temporary copy of `notebooks/`."""
    folders = _prepare_folders(tmp_path_factory.mktemp("jupyterlab"))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(folders["config"]),
        JUPYTER_RUNTIME_DIR=str(folders["runtime"]),
        JUPYTER_DATA_DIR=str(folders["data"]),  # kernelspecs and lab extensions still come from .venv (sys-prefix)
        IPYTHONDIR=str(folders["ipython"]),
    )
    env.pop("JUPYTER_TOKEN", None)
    token = secrets.token_hex(16)
    log_path = artifacts / "jupyterlab.log"
    for attempt in range(3):  # a new port if another process took ours between choosing it and binding it
        port = _free_port()
        command = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={folders['root']}",
            f"--LabApp.user_settings_dir={folders['settings']}",
            f"--LabApp.workspaces_dir={folders['workspaces']}",
            "--ServerApp.allow_root=True",  # the test machines run as root
        ]  # fmt: skip
        # The server writes to its own copy of the file descriptor; ours can close at once.
        with open(log_path, "w" if attempt == 0 else "a") as log:
            process = subprocess.Popen(command, cwd=folders["root"], env=env, stdout=log, stderr=subprocess.STDOUT)
        server = LabServer(url=f"http://127.0.0.1:{port}", token=token, root=folders["root"], log=log_path)
        try:
            _wait_until_answering(server, process)
            break
        except RuntimeError as err:
            _stop(process)
            port_taken = "already in use" in log_path.read_text()
            if not port_taken or attempt == 2:
                tail = "\n".join(log_path.read_text().splitlines()[-20:])
                pytest.fail(f"{err}; the end of its log ({log_path}):\n{tail}", pytrace=False)
    try:
        yield server
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def redraw_times() -> list[tuple[str, float, float]]:
    """Where the tests record (what moved, milliseconds from key press to the redrawn plot, load average)."""
    return REDRAW_TIMES


def pytest_terminal_summary(terminalreporter):
    if not REDRAW_TIMES:
        return
    terminalreporter.section("browser: slider key press to redrawn plot")
    lines = []
    for what, ms, load in REDRAW_TIMES:
        flag = "" if ms <= REDRAW_AIM_MS else f"   (over the {REDRAW_AIM_MS:.0f} ms aim)"
        lines.append(f"{ms:7.0f} ms  {what}   load {load:.1f}{flag}")
    times = sorted(ms for _, ms, _ in REDRAW_TIMES)
    loads = [load for _, _, load in REDRAW_TIMES]
    p95 = times[math.ceil(0.95 * len(times)) - 1]  # nearest rank
    lines.append(
        f"{times[len(times) // 2]:7.0f} ms  median of {len(times)}, p95 {p95:.0f} ms, worst {times[-1]:.0f} ms "
        f"(aim: p95 under {REDRAW_AIM_MS:.0f} ms); load average (1 min) {min(loads):.1f} to {max(loads):.1f} "
        f"on {os.cpu_count()} cores while the sliders moved"
    )
    for line in lines:
        terminalreporter.write_line(line)
    (ARTIFACTS / "redraw-times.txt").write_text("\n".join(lines) + "\n")
