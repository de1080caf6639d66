"""A local HTTP server for download tests: serves a directory on 127.0.0.1, answers ``Range`` requests when
asked to, and records every request, so a test can see what a download fetched."""

from __future__ import annotations

import contextlib
import http.server
import io
import re
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path


class ArchiveServer(http.server.ThreadingHTTPServer):
    directory: Path
    ranges: bool  # answer "Range: bytes=N-" with 206 (else always the whole file, 200)
    requests: list[tuple[str, str | None]]  # (path, Range header)
    sent: int  # body bytes sent

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ArchiveServer

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        header = self.headers.get("Range")
        self.server.requests.append((self.path, header))
        path = self.server.directory / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", header or "")
        if self.server.ranges and match:
            start = int(match.group(1))
            if start >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.server.sent += len(body)


@contextlib.contextmanager
def serve(directory: Path, ranges: bool = True) -> Iterator[ArchiveServer]:
    """Serve ``directory`` on a free port of 127.0.0.1 for the duration of the block."""
    server = ArchiveServer(("127.0.0.1", 0), _Handler)
    server.directory, server.ranges, server.requests, server.sent = Path(directory), ranges, [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def write_tgz(path: Path, files: dict[str, str | bytes]) -> Path:
    """A gzipped tar at ``path`` holding ``files`` (member path → text or bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, content in files.items():
            data = content.encode("utf-8") if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path
