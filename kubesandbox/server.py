"""The HTTP side of the sandbox: a threaded stdlib HTTP/1.1 server (keep-alive), plain or TLS,
that routes Kubernetes API paths to :class:`~kubesandbox.api.Api`, answers discovery and OpenAPI,
checks the optional bearer token, injects faults and exposes a small control API under
``/sandbox/`` for servers running in another process.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import os
import shutil
import socket
import ssl
import sys
import tempfile
import threading
import weakref
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import yaml

from kubesandbox import errors
from kubesandbox.api import Api, ApiRequest
from kubesandbox.discovery import SERVER_VERSION, Discovery, table
from kubesandbox.faults import FaultRule, Faults, Stats
from kubesandbox.store import Store

if TYPE_CHECKING:
    from kubesandbox.tls import TlsFiles

logger = logging.getLogger(__name__)

_JSON = "application/json"
_HANDSHAKE_SECONDS = 10
_HEALTH = ("/healthz", "/readyz", "/livez")
_STATUS_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class _Answer:
    __slots__ = ("body", "code", "content_type", "headers")

    def __init__(
        self, code: int, body: Any, content_type: str = _JSON, headers: dict[str, str] | None = None
    ):
        self.code = code
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":")).encode()


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        sandbox: SandboxServer,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.ssl_context = ssl_context
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        if self.ssl_context is not None:
            # The handshake happens in the connection's own thread (_Handler.setup): a client
            # that connects and says nothing must not hold up accepting the next one.
            conn = self.ssl_context.wrap_socket(
                conn, server_side=True, do_handshake_on_connect=False
            )
        return conn, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that does not trust the CA, or hangs up mid-handshake, is not a server error.
        if isinstance(sys.exc_info()[1], OSError):
            logger.debug("sandbox: connection from %s failed", client_address, exc_info=True)
            return
        logger.exception("sandbox: error serving %s", client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self.connections_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-sandbox"
    sys_version = ""
    server: _HttpServer

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(_HANDSHAKE_SECONDS)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()
        # Answers go out in one write; without NODELAY, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- plumbing ------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, answer: _Answer, method: str) -> None:
        data = _encode(answer.body)
        self.send_response(answer.code)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in answer.headers.items():
            self.send_header(key, value)
        # Headers and body in one write (end_headers() would flush the headers on their own).
        self._headers_buffer.append(b"\r\n")
        if method != "HEAD":
            self._headers_buffer.append(data)
        self.wfile.write(b"".join(self._headers_buffer))
        self._headers_buffer = []

    def _hang_up(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _authorized(self) -> bool:
        token = self.server.sandbox.token
        if not token:
            return True
        header = self.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), token.encode()
        )

    def _serve(self, method: str) -> None:
        sandbox = self.server.sandbox
        try:
            body = self._read_body()
        except (ValueError, OSError):
            self._hang_up()
            return
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        if path in _HEALTH or path.startswith(tuple(h + "/" for h in _HEALTH)):
            self._send(_Answer(200, b"ok", "text/plain; charset=utf-8"), method)
            return
        if not self._authorized():
            self._send(_Answer(401, errors.unauthorized().status()), method)
            return
        if path.startswith("/sandbox/") or path == "/sandbox":
            self._send(self._control(method, path, body), method)
            return
        sandbox.stats.count_request(method)
        fault = sandbox.faults.pick(method, self.path)
        if fault is not None:
            sandbox.stats.count_fault()
            if fault.kind == "status":
                self._send(_fault_answer(fault), method)
                return
            if fault.kind == "drop":
                self._hang_up()
                return
            if fault.kind == "timeout":
                sandbox.stopping.wait(fault.seconds or 0)
                self._hang_up()
                return
            if fault.kind == "latency":
                sandbox.stopping.wait(fault.seconds or 0)
        try:
            answer = self._route(method, path, query, body)
        except errors.ApiError as exc:
            answer = _Answer(exc.code, exc.status(), headers=exc.headers)
        except Exception:
            logger.exception("sandbox: unexpected error serving %s %s", method, url.path)
            answer = _Answer(500, errors.internal("unexpected error in the sandbox").status())
        if fault is not None and fault.kind == "drop_after_write":
            self._hang_up()
            return
        self._send(answer, method)

    # -- control API ---------------------------------------------------------------------

    def _control(self, method: str, path: str, body: bytes) -> _Answer:
        sandbox = self.server.sandbox
        try:
            payload = json.loads(body) if body.strip() else {}
        except ValueError:
            return _Answer(400, errors.bad_request("invalid JSON").status())
        if path == "/sandbox/stats" and method == "GET":
            return _Answer(
                200,
                {
                    **sandbox.stats.as_dict(),
                    "objects": sandbox.store.counts(),
                    "faults": [r.to_json() for r in sandbox.faults.rules],
                },
            )
        if path == "/sandbox/stats/reset" and method == "POST":
            sandbox.stats.reset()
            return _Answer(200, sandbox.stats.as_dict())
        if path == "/sandbox/faults":
            if not sandbox.allow_faults:
                # Any local process could otherwise break the demo's "cluster" at will.
                return _Answer(
                    403,
                    errors.ApiError(
                        403,
                        "Forbidden",
                        "fault injection is off: start the sandbox with --allow-faults",
                        {},
                    ).status(),
                )
            if method == "GET":
                return _Answer(200, {"faults": [r.to_json() for r in sandbox.faults.rules]})
            if method == "DELETE":
                sandbox.faults.clear()
                return _Answer(200, {"faults": []})
            if method == "POST":
                allowed = {
                    "kind",
                    "count",
                    "ratio",
                    "methods",
                    "path_contains",
                    "status",
                    "seconds",
                    "seed",
                    "retry_after",
                }
                unknown = sorted(set(payload) - allowed)
                if unknown or "kind" not in payload:
                    return _Answer(
                        400,
                        errors.bad_request(
                            f"fault needs 'kind'; unknown fields: {unknown}"
                        ).status(),
                    )
                try:
                    rule = sandbox.faults.add(payload.pop("kind"), **payload)
                except (TypeError, ValueError) as exc:
                    return _Answer(400, errors.bad_request(str(exc)).status())
                return _Answer(201, rule.to_json())
        if path == "/sandbox/reset" and method == "POST":
            sandbox.reset()
            return _Answer(200, {"status": "reset"})
        return _Answer(
            404,
            errors.ApiError(
                404, "NotFound", "the server could not find the requested resource", {}
            ).status(),
        )

    # -- Kubernetes API ------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes) -> _Answer:
        sandbox = self.server.sandbox
        discovery = sandbox.discovery
        segments = [s for s in path.split("/") if s]
        if method in ("GET", "HEAD"):
            if path == "/version":
                return _Answer(200, SERVER_VERSION)
            if path == "/api":
                return _Answer(200, discovery.api_versions(f"{sandbox.host}:{sandbox.port}"))
            if path == "/apis":
                return _Answer(200, discovery.api_group_list())
            if path == "/openapi/v3":
                return _Answer(200, discovery.openapi_index())
            if path.startswith("/openapi/v3/"):
                rendered = discovery.openapi_document_bytes(path.removeprefix("/openapi/v3/"))
                if rendered is None:
                    raise _not_found_path()
                headers = {"Etag": f'"{rendered[1]}"'}
                if "hash" in query:
                    headers["Cache-Control"] = "public, immutable"
                return _Answer(200, rendered[0], headers=headers)
            if segments[:1] == ["api"] and len(segments) == 2:
                listed = discovery.resource_list("", segments[1])
                if listed is None:
                    raise _not_found_path()
                return _Answer(200, listed)
            if segments[:1] == ["apis"] and len(segments) == 2:
                group = discovery.api_group(segments[1])
                if group is None:
                    raise _not_found_path()
                return _Answer(200, group)
            if segments[:1] == ["apis"] and len(segments) == 3:
                listed = discovery.resource_list(segments[1], segments[2])
                if listed is None:
                    raise _not_found_path()
                return _Answer(200, listed)
        request = self._api_request(method, segments, query, body)
        if request is None:
            raise _not_found_path()
        api = sandbox.api
        if method in ("GET", "HEAD"):
            if query.get("watch") in ("1", "true"):
                raise errors.method_not_allowed("watch is not supported by the sandbox")
            if request.name is None:
                accept = self.headers.get("Accept", "")
                if "as=Table" in accept:
                    meta, items = api.list(request)
                    return _Answer(
                        200,
                        table(
                            request.resource, items, meta, query.get("includeObject", "Metadata")
                        ),
                    )
                return _Answer(200, api.list_object(request))
            obj = api.get(request)
            if "as=Table" in self.headers.get("Accept", ""):
                meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
                return _Answer(
                    200,
                    table(request.resource, [obj], meta, query.get("includeObject", "Metadata")),
                )
            return _Answer(200, obj)
        try:
            answer = self._write(api, method, request)
        except errors.ApiError as exc:
            if request.warnings:
                exc.headers = {**exc.headers, "Warning": warning_header(request.warnings)}
            raise
        if request.warnings:
            answer.headers["Warning"] = warning_header(request.warnings)
        return answer

    def _write(self, api: Api, method: str, request: ApiRequest) -> _Answer:
        if method == "POST" and request.name is None:
            if request.resource.info.namespaced and request.namespace is None:
                raise errors.method_not_allowed()
            return _Answer(201, api.create(request))
        if method == "PUT" and request.name is not None:
            return _Answer(200, api.replace(request))
        if method == "PATCH" and request.name is not None:
            code, obj = api.patch(request)
            return _Answer(code, obj)
        if method == "DELETE":
            if request.name is None:
                return _Answer(200, api.delete_collection(request))
            return _Answer(200, api.delete(request))
        raise errors.method_not_allowed()

    def _api_request(
        self, method: str, segments: list[str], query: dict[str, str], body: bytes
    ) -> ApiRequest | None:
        if segments[:1] == ["api"] and len(segments) >= 3:
            group, version, rest = "", segments[1], segments[2:]
        elif segments[:1] == ["apis"] and len(segments) >= 4:
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            return None
        namespace = None
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        resource = self.server.sandbox.discovery.resource(group, version, rest[0])
        if resource is None or (namespace is not None and not resource.info.namespaced):
            return None
        subresource = rest[2] if len(rest) == 3 else None
        if subresource is not None and subresource not in resource.info.subresources:
            return None
        return ApiRequest(
            method=method,
            resource=resource,
            namespace=namespace,
            name=rest[1] if len(rest) >= 2 else None,
            subresource=subresource,
            query=query,
            body=body,
            content_type=self.headers.get("Content-Type", ""),
            user_agent=self.headers.get("User-Agent", ""),
        )


def warning_header(warnings: list[str]) -> str:
    """The ``Warning`` header value kube-apiserver sends: ``299 - "text"`` per warning."""
    quoted = []
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        quoted.append(f'299 - "{escaped}"')
    # http.server writes headers as latin-1: send the UTF-8 bytes of the text, as Go does.
    return ", ".join(quoted).encode().decode("latin-1")


def _not_found_path() -> errors.ApiError:
    return errors.ApiError(404, "NotFound", "the server could not find the requested resource", {})


def _fault_answer(rule: FaultRule) -> _Answer:
    code = int(rule.status or 500)
    try:
        phrase = HTTPStatus(code).phrase.replace(" ", "")
    except ValueError:
        phrase = "Unknown"
    reason = _STATUS_REASONS.get(code, phrase)
    headers: dict[str, str] = {}
    details: dict[str, Any] = {}
    message = f"injected fault: {code} {reason}"
    if code in (429, 503):
        # The client retries these after Retry-After, as with a real API server under load.
        headers["Retry-After"] = str(rule.retry_after)
        details = {"retryAfterSeconds": rule.retry_after}
    if code == 429:
        message = "Too many requests, please try again later."
    return _Answer(code, errors.ApiError(code, reason, message, details).status(), headers=headers)


class SandboxServer:
    """A Kubernetes API test server for the portal's kinds, served over real HTTP.

    >>> server = SandboxServer().start()
    >>> server.url  # doctest: +SKIP
    'http://127.0.0.1:40123'
    >>> server.stop()

    ``state_file`` keeps the objects across restarts (JSON, written atomically shortly after each
    write and on stop). With ``token`` set, every request but the health checks needs
    ``Authorization: Bearer <token>``. ``allow_faults`` opens ``/sandbox/faults`` (fault
    injection over HTTP; refused with 403 otherwise; ``faults`` stays usable in-process).
    ``omit_api_versions`` (e.g. ``("kueue.x-k8s.io/v1beta2",)``)
    leaves group-versions out of discovery and answers their paths 404, like a cluster without
    that CRD or with an older one. A deleted namespace stays ``Terminating`` for
    ``namespace_finalize_seconds`` before its objects and itself go away (0: within the DELETE).

    With ``tls_dir`` (or ``tls=True``: a temporary directory) it serves HTTPS with a self-signed
    CA and a server certificate for 127.0.0.1, ::1 and localhost, made on start in that directory
    or reused from it (:mod:`kubesandbox.tls`); ``ca_file`` is then the CA clients trust, and the
    kubeconfig carries it. kubectl sends a bearer token only over TLS.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        state_file: str | os.PathLike[str] | None = None,
        token: str | None = None,
        omit_api_versions: Iterable[str] = (),
        namespace_finalize_seconds: float = 0.0,
        allow_faults: bool = False,
        tls_dir: str | os.PathLike[str] | None = None,
        tls: bool = False,
    ) -> None:
        self.host = host
        self.tls = tls or tls_dir is not None
        self._tls_dir = Path(tls_dir) if tls_dir is not None else None
        self._tls_files: TlsFiles | None = None
        self.allow_faults = allow_faults
        self._requested_port = port
        self.token = token or None
        self.stats = Stats()
        self.faults = Faults()
        self.store = Store(state_file)
        self.discovery = Discovery.get(frozenset(omit_api_versions))
        self.api = Api(
            self.store,
            self.stats,
            self.discovery,
            namespace_finalize_seconds=namespace_finalize_seconds,
        )
        self.stopping = threading.Event()
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:  # never shows the token
        return f"SandboxServer(url={self.url if self._httpd else None!r})"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> SandboxServer:
        if self._httpd is not None:
            return self
        self.stopping.clear()
        self.api.load_objects(self.store.load())
        self.api.finish_terminating_namespaces()
        self.api.ensure_default_namespaces()
        self._httpd = _HttpServer(
            (self.host, self._requested_port), self, self._ssl_context() if self.tls else None
        )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="kube-sandbox",
            daemon=True,
        )
        self._thread.start()
        self.store.start_flusher()
        return self

    def _ssl_context(self) -> ssl.SSLContext:
        # Imported here: plain HTTP needs no cryptography package.
        from kubesandbox.tls import ensure_certificates

        if self._tls_dir is None:
            # Kept across stop and start (clients keep trusting the same CA); removed with the
            # server object.
            self._tls_dir = Path(tempfile.mkdtemp(prefix="kube-sandbox-tls-"))
            weakref.finalize(self, shutil.rmtree, self._tls_dir, ignore_errors=True)
        self._tls_files = ensure_certificates(self._tls_dir)
        return self._tls_files.server_context()

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate clients trust (PEM), once a TLS server has started; else None."""
        return self._tls_files.ca_cert if self._tls_files is not None else None

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.close_connections()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None
        self.api.finish_terminating_namespaces()
        self.store.stop_flusher()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            return self._requested_port
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{self.port}"

    @property
    def write_log(self) -> list[dict[str, Any]]:
        """Every persisted write since the last stats reset, in order."""
        return self.stats.writes_in_order()

    def reset(self) -> None:
        """Empty the store (the default namespaces come back), the stats and the faults."""
        with self.store.lock:
            self.store.clear()
            self.api.ensure_default_namespaces()
        self.stats.reset()
        self.faults.clear()

    # -- helpers for tests and the demo ----------------------------------------------------

    def kubeconfig(self, context: str = "sandbox") -> dict[str, Any]:
        """A kubeconfig for this server: its URL, its token, and (TLS) the CA to trust."""
        if self.tls and self.ca_file is None:
            raise RuntimeError("start the server first: its certificates are made on start")
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        cluster: dict[str, Any] = {"server": self.url}
        if self.ca_file is not None:
            cluster["certificate-authority-data"] = base64.b64encode(
                self.ca_file.read_bytes()
            ).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": user}],
            "contexts": [
                {
                    "name": context,
                    "context": {"cluster": context, "user": context, "namespace": "default"},
                }
            ],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | os.PathLike[str], context: str = "sandbox") -> Path:
        """Write a kubeconfig for this server (0600, it may hold the token); returns the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yaml.safe_dump(self.kubeconfig(context), fh, sort_keys=False)
        return target

    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The stored object (as stored, not a copy to mutate), or None."""
        resource = self.discovery.by_kind[(api_version, kind)]
        with self.store.lock:
            return self.store.get(resource.key, namespace or "", name)
