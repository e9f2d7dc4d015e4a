"""A small Kubernetes API server stand-in on 127.0.0.1 for the Kubernetes-source tests.

It answers pod lists (``/api/v1/pods``, ``/api/v1/namespaces/NS/pods``) from the PodList files in
tests/fixtures/k8s/, filtered by ``labelSelector`` as the real server filters them (existence,
``=``/``==``/``!=``, ``in``/``notin``); a pod's proxy path ``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/...``
is forwarded to a real simulator (the port must be one the pod declares, as a real pod's must
listen on it); a pod's ``/log`` answers recorded lines, and the discovery paths kubectl asks
first. With ``token`` set, a request without ``Authorization: Bearer TOKEN`` gets the recorded
401; ``forbid`` ("list", "proxy") answers the recorded 403 Status objects.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests import procgroup

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "k8s"
_REQ = re.compile(r"^(!?)([^\s!=,()]+)\s*(?:(==|=|!=)\s*(\S*)|\s+(in|notin)\s*\(([^)]*)\))?$")


def self_signed(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 made now with openssl (its own CA): (cert file, key file)."""
    cert, key = directory / "apiserver.crt", directory / "apiserver.key"
    procgroup.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                   "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                  check=True, capture_output=True, timeout=60)
    return str(cert), str(key)


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return doc


def matches(selector: str, labels: dict[str, str]) -> bool:
    """The API server's labelSelector semantics, for the forms the console sends."""
    depth, start, parts = 0, 0, []
    for i, c in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    for p in (x.strip() for x in parts if x.strip()):
        m = _REQ.match(p)
        if not m:
            raise ValueError(f"bad selector {p!r}")
        neg, key, op, value, setop, values = m.groups()
        have = labels.get(key)
        if op in ("=", "=="):
            ok = have == value
        elif op == "!=":
            ok = have != value
        elif setop:
            vals = {v.strip() for v in values.split(",")}
            ok = have in vals if setop == "in" else have not in vals
        else:
            ok = (have is None) if neg else (have is not None)
        if not ok:
            return False
    return True


class FakeApiServer:
    """Serves ``pod_files`` merged; ``backends[(namespace, pod)]`` is the simulator URL its proxy reaches."""

    def __init__(self, pod_files: list[str], backends: dict[tuple[str, str], str], *, token: str | None = None,
                 tls: tuple[str, str] | None = None) -> None:
        self.lists = [load(f) for f in pod_files]
        self.backends = backends
        self.token = token
        self.forbid: set[str] = set()
        self.auth_seen: list[str] = []  # the Authorization headers received
        self.paths: list[str] = []
        self.logs: dict[tuple[str, str], list[str]] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                outer._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:  # (certificate, key) files: https, as a real API server answers
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(3)

    def remove(self, namespace: str, name: str) -> None:
        """The pod is deleted (gone from every later list)."""
        for doc in self.lists:
            doc["items"] = [i for i in doc["items"] if (i["metadata"]["namespace"], i["metadata"]["name"])
                            != (namespace, name)]

    def items(self) -> list[dict[str, Any]]:
        return [i for doc in self.lists for i in doc["items"]]

    # -- requests ------------------------------------------------------------------------------

    def _send(self, h: BaseHTTPRequestHandler, code: int, body: bytes, ctype: str = "application/json") -> None:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _json(self, h: BaseHTTPRequestHandler, code: int, doc: Any) -> None:
        self._send(h, code, json.dumps(doc).encode())

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        path, query = parts.path, parse_qs(parts.query)
        self.paths.append(h.path)
        auth = h.headers.get("Authorization", "")
        self.auth_seen.append(auth)
        if self.token is not None and auth != f"Bearer {self.token}":
            return self._json(h, 401, load("unauthorized.json"))
        if path == "/api":
            return self._json(h, 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if path == "/apis":
            return self._json(h, 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            return self._json(h, 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
                 "verbs": ["get", "list", "watch"], "shortNames": ["po"]},
                {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
                {"name": "pods/proxy", "singularName": "", "namespaced": True, "kind": "PodProxyOptions",
                 "verbs": ["get"]}]})
        m = re.fullmatch(r"/api/v1(?:/namespaces/([^/]+))?/pods", path)
        if m:
            if "list" in self.forbid:
                return self._json(h, 403, load("forbidden-list.json"))
            ns, sel = m.group(1), query.get("labelSelector", [""])[0]
            items = [i for i in self.items() if (ns is None or i["metadata"]["namespace"] == ns)
                     and matches(sel, i["metadata"].get("labels") or {})]
            version = max((d["metadata"]["resourceVersion"] for d in self.lists), default="1")
            return self._json(h, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": version},
                                       "items": items})
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/:]+)(?::(\d+))?/proxy(/.*)?", path)
        if m:
            return self._proxy(h, m.group(1), m.group(2), int(m.group(3) or 0), m.group(4) or "/")
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)(/log)?", path)
        if m:
            pod = self._pod(m.group(1), m.group(2))
            if pod is None:
                return self._json(h, 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                                           "reason": "NotFound", "message": f"pods \"{m.group(2)}\" not found"})
            if not m.group(3):
                return self._json(h, 200, {"kind": "Pod", "apiVersion": "v1", **pod})
            lines = self.logs.get((m.group(1), m.group(2)), [])
            tail = int(query.get("tailLines", ["0"])[0] or 0)
            out = lines[-tail:] if tail else lines
            return self._send(h, 200, "".join(line + "\n" for line in out).encode(), "text/plain")
        self._json(h, 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
                            "reason": "NotFound", "message": "the server could not find the requested resource"})

    def _pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return next((i for i in self.items() if i["metadata"]["namespace"] == ns and i["metadata"]["name"] == name),
                    None)

    def _proxy(self, h: BaseHTTPRequestHandler, ns: str, name: str, port: int, rest: str) -> None:
        if "proxy" in self.forbid:
            return self._json(h, 403, load("forbidden-proxy.json"))
        pod = self._pod(ns, name)
        containers = (pod or {}).get("spec", {}).get("containers", ())
        ports = {p["containerPort"] for c in containers for p in c.get("ports", ())}
        backend = self.backends.get((ns, name))
        if pod is None or backend is None or port not in ports:
            ip = pod["status"]["podIP"] if pod else "?"
            msg = f"error trying to reach service: dial tcp {ip}:{port}: connect: connection refused"
            return self._json(h, 503, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 503,
                                       "reason": "ServiceUnavailable", "message": msg})
        with urllib.request.urlopen(backend + rest, timeout=5) as r:
            body = r.read()
        self._send(h, 200, body, "text/plain; version=0.0.4")
