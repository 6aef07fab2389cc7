"""Drive Debian's ``chromium`` headless from its own command line (no driver library, no browser
download): load a file, dump the DOM after its scripts ran, collect console messages from the
log, see every network request the page makes, take a screenshot.

Requests: every connection goes to a local proxy that refuses it, and chromium's net log
(``--log-net-log``) says who asked: a request the page made carries the page's initiator
origin (``"null"`` for a file), while the browser's own service traffic (component updater,
network time, account checks — which Debian's build makes whatever the page does) carries
"not an origin". A page request is one with an initiator.

``.ci/run`` installs chromium; locally a test that needs it is skipped when it is absent, but
under CI (``ROOFLINE_CI=1``) its absence is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = ["chromium", "Load", "load", "need_chromium"]

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
          "--enable-logging=stderr", "--v=0", "--proxy-bypass-list=<-loopback>")
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]?\s*(.*)")


def chromium() -> str | None:
    for name in _CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


def need_chromium() -> str:
    exe = chromium()
    if exe is None:
        if os.environ.get("ROOFLINE_CI"):
            pytest.fail("chromium is not installed; .ci/run must install it (apt-get install "
                        "chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return exe


class _Proxy:
    """An HTTP proxy that records each request line and refuses it (403)."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    first = "<unreadable request>"
                self.requests.append(first)
                try:
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


@dataclass
class Load:
    dom: str  #: the DOM after the page's scripts ran
    console: list[str] = field(default_factory=list)  #: console messages (errors included)
    requests: list[str] = field(default_factory=list)  #: URLs the page itself requested
    browser_requests: list[str] = field(default_factory=list)  #: what reached the proxy
    screenshot: Path | None = None


def page_requests(netlog: Path) -> list[str]:
    """URLs requested by a page (not by the browser itself), from a chromium net log."""
    try:
        d = json.loads(netlog.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AssertionError(f"chromium wrote no readable net log at {netlog}: {e}") from None
    start = d["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    out = []
    for e in d["events"]:
        p = e.get("params") or {}
        if e.get("type") == start and p.get("url"):
            init = p.get("initiator")
            if init is not None and init != "not an origin":
                out.append(p["url"])
    return out


def _run(exe: str, proxy: _Proxy, args: list[str], cwd: Path, timeout: float, netlog: Path
         ) -> subprocess.CompletedProcess[str]:
    profile = cwd / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [exe, *_FLAGS, f"--proxy-server=http://127.0.0.1:{proxy.port}",
         f"--user-data-dir={profile}", f"--log-net-log={netlog}", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, "HOME": str(cwd)})


def load(path: Path, *, screenshot: Path | None = None, size: tuple[int, int] = (1280, 2200),
         timeout: float = 120.0) -> Load:
    """Open ``path`` in headless chromium: its DOM, console messages, requests and (optionally)
    a screenshot."""
    exe = need_chromium()
    proxy = _Proxy()
    try:
        url = Path(path).resolve().as_uri()
        here = Path(path).parent
        res = _run(exe, proxy, ["--dump-dom", url], here, timeout, here / "netlog-dom.json")
        console = [m.group(1) for m in map(_CONSOLE.search, res.stderr.splitlines()) if m]
        requests = page_requests(here / "netlog-dom.json")
        if screenshot is not None:
            shot = _run(exe, proxy, [f"--window-size={size[0]},{size[1]}",
                                     f"--screenshot={screenshot}", url],
                        here, timeout, here / "netlog-shot.json")
            console += [m.group(1) for m in map(_CONSOLE.search, shot.stderr.splitlines())
                        if m]
            requests += page_requests(here / "netlog-shot.json")
    finally:
        proxy.close()
    return Load(dom=res.stdout, console=console, requests=requests,
                browser_requests=list(proxy.requests),
                screenshot=screenshot if screenshot is not None and screenshot.exists()
                else None)
