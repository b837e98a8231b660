"""What the console's browser tests share: a `logflume console` subprocess, Debian's
headless Chromium driven by Selenium through the system chromedriver (Selenium
Manager never runs: no network), and checks of the rendered page."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from common.ports import free_port
from testkit.procs import ManagedProcess, wait_until

REPO = Path(__file__).resolve().parents[2]


class ConsoleProcess(ManagedProcess):
    """`logflume console` on a free loopback port, its output in `console.log`.
    With `ca` (a PEM file) it is reached over HTTPS trusting that CA; with `token`
    its JSON is read with that bearer token."""

    def __init__(
        self, tmp_path: Path, *args: str, ca: Path | None = None, token: str | None = None
    ):
        self.port = free_port()
        self.args = list(args)
        self.log_path = tmp_path / "console.log"
        self.context = ssl.create_default_context(cafile=str(ca)) if ca else None
        self.token = token

    @property
    def url(self) -> str:
        scheme = "https" if self.context else "http"
        return f"{scheme}://127.0.0.1:{self.port}/"

    def open(self, path: str, token: str | None = None):
        """urlopen of `path` (relative to the console's URL), with `token` (default:
        the console's) as a bearer token."""
        request = urllib.request.Request(self.url + path)
        if token or self.token:
            request.add_header("Authorization", f"Bearer {token or self.token}")
        return urllib.request.urlopen(request, timeout=20, context=self.context)

    def start(self) -> ConsoleProcess:
        cmd = [sys.executable, "-m", "logflume", "console", *self.args]
        cmd += ["--listen", f"127.0.0.1:{self.port}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=os.environ.copy()
            )
        wait_until(self._up, 30, lambda: f"the console to answer:\n{self.log_text()}", 0.1)
        return self

    def _up(self) -> bool:
        assert self.proc.poll() is None, f"console exited:\n{self.log_text()}"
        try:
            with urllib.request.urlopen(
                f"{self.url}health", timeout=2, context=self.context
            ) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def api(self, part: str) -> dict:
        with self.open(f"api/{part}") as resp:
            return json.loads(resp.read())


def chromium(tmp_path: Path):
    """A headless Chromium WebDriver with the browser console log kept. Fails (does
    not skip) without Debian's chromium and chromium-driver: `make test` installs them."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert browser and driver, (
        "the console tests need Debian's chromium and chromium-driver"
        " (bash deploy/system-deps.sh installs them)"
    )
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1400,2400")
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=driver, log_output=str(tmp_path / "chromedriver.log"))
    return webdriver.Chrome(service=service, options=options)


def text_of(driver, selector: str) -> str | None:
    """textContent of the first element matching `selector`, None when there is none."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
        selector,
    )


def wait_for_text(driver, selector: str, wanted, timeout: float = 30.0) -> str:
    """Until the element's text equals `wanted` (a str) or satisfies it (a callable)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def ok(d):
        text = text_of(d, selector)
        if text is None:
            return False
        return (wanted(text) if callable(wanted) else text == wanted) and text

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(ok)
    except Exception as exc:
        raise AssertionError(
            f"{selector}: wanted {wanted!r}, page shows {text_of(driver, selector)!r}"
        ) from exc


def chart_drawn(driver, minimum_points: int, timeout: float = 30.0) -> int:
    """Until the chart says it drew at least `minimum_points` and its canvas has
    coloured (non-white, non-grey) pixels: the line and its points. Returns the
    number of coloured pixels."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = """
        const c = document.getElementById('chart');
        if (Number(c.dataset.points) < arguments[0]) return 0;
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
          if (Math.abs(d[i] - d[i + 2]) > 40) n += 1;  // blue or orange, not grey
        }
        return n;
    """
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
            lambda d: d.execute_script(script, minimum_points)
        )
    except Exception as exc:
        shown = driver.execute_script("return document.getElementById('chart').dataset.points")
        raise AssertionError(f"chart not drawn: {shown} points") from exc


def save_screenshot(driver, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def severe_browser_logs(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
