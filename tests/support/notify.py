"""A real webhook receiver: an HTTP server on 127.0.0.1 that records every delivery."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = "test-webhook-secret-3f9a1c"


class Receiver:
    """An HTTP server on 127.0.0.1 that records every request and answers scripted statuses."""

    def __init__(self, statuses=(), delay: float = 0.0, headers: dict[str, str] | None = None):
        self.statuses = list(statuses)  # answered in order, then 200
        self.delay = delay
        self.headers = headers or {}  # on every answer
        self.requests: list[dict] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._changed:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": body,
                            "status": status,
                        }
                    )
                    receiver._changed.notify_all()
                if receiver.delay:
                    time.sleep(receiver.delay)
                self.send_response(status)
                if status in (301, 302, 307, 308):
                    self.send_header("Location", f"http://127.0.0.1:{self.server.server_port}/x")
                for name, value in receiver.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def wait_for(self, count: int, timeout: float = 60) -> list[dict]:
        with self._changed:
            self._changed.wait_for(lambda: len(self.requests) >= count, timeout=timeout)
            return list(self.requests)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
