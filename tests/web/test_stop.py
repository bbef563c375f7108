"""`cabal serve` stopped (Ctrl-C) while a page's live stream is open: the stream ends as a response
should, and the server says nothing but that it stopped (no ASGI error, no traceback)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from tests.polling import wait_until

CABAL = Path(sys.executable).with_name("cabal")


def _opened(url: str):
    """The response of ``url``, or None while the server does not listen yet."""
    try:
        return urllib.request.urlopen(url, timeout=20)
    except urllib.error.URLError:
        return None


def test_stopping_the_server_with_a_live_stream_open_ends_the_stream_cleanly(graph_server) -> None:
    server = subprocess.Popen([str(CABAL), "serve", "--port", "0", "--home", str(graph_server.home)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    banner = [server.stdout.readline() for _ in range(3)]
    address = re.search(r"(http://127\.0\.0\.1:\d+/)", banner[2])
    assert address, banner
    received: list[bytes] = []
    ended = threading.Event()

    def read_the_stream() -> None:
        stream = wait_until(lambda: _opened(address.group(1) + "live"), timeout=20, what="the server to listen")
        with stream:
            received.append(stream.readline())  # the first event: the stream is open
            received.append(stream.read())  # the rest, up to the response's end
        ended.set()

    reader = threading.Thread(target=read_the_stream, daemon=True)
    reader.start()
    try:
        wait_until(lambda: received, timeout=20, what="the live stream's first event")
    finally:
        server.send_signal(signal.SIGINT)
        output = "".join(banner) + server.communicate(timeout=20)[0]
    assert ended.wait(10), "the stream did not end with the server"
    assert received[0].startswith(b"id: ")
    assert "cabal: stopped serving" in output
    assert "ERROR" not in output and "Traceback" not in output, output
