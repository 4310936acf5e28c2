"""A threaded HTTP server on 127.0.0.1 (a free port) for the test fakes of real services
(:mod:`tests.fake_gemini`, :mod:`tests.fake_openai`): started on a daemon thread, stopped and closed."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    def serve(self, handler: type[BaseHTTPRequestHandler], *, path: str = "") -> None:
        """Bind ``handler`` on 127.0.0.1 (``self.server``, ``self.base_url`` ending in ``path``); not yet started."""

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # a benchmark opens dozens of connections at once
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.base_url = f"http://127.0.0.1:{self.server.server_port}{path}"

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
