"""The Kubernetes API server as this console uses it: pod lists and the pod proxy's ``/metrics``.

Synchronous (``httpx.Client``, called from the source's own thread), bounded by the source's
timeout, never following redirects. The bearer token is read from ``token_env`` at each request
and sent only in the Authorization header; every failure is one ``KubeError`` line that names
the request and, for a 401 or 403, the permission that is missing, never the token.
"""

from __future__ import annotations

import os
import ssl
from typing import Any
from urllib.parse import quote

import httpx
import orjson

from console.secrets import scrub
from console.sources import KubeTarget

# What each request needs (the RBAC rule the Role in docs/sources.md grants).
NEEDS_LIST = "list pods"
NEEDS_PROXY = "get pods/proxy"


class KubeError(Exception):
    """One line: which request failed and why."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(scrub(message))  # httpx's text names the URL it asked, credentials and all
        self.status = status


class KubeClient:
    """HTTP calls to one API server (one connection pool, reused)."""

    def __init__(self, target: KubeTarget) -> None:
        self.target = target
        verify: ssl.SSLContext | bool = True
        if target.ca_file:
            verify = ssl.create_default_context(cafile=os.path.expanduser(target.ca_file))
        self._client = httpx.Client(base_url=target.url, timeout=target.timeout, trust_env=False,
                                    follow_redirects=False, verify=verify)

    def close(self) -> None:
        self._client.close()

    def _headers(self) -> dict[str, str]:
        env = self.target.token_env
        if not env:
            return {}
        token = os.environ.get(env, "").strip()
        if not token:
            raise KubeError(f"${env} is not set (it holds the API server's bearer token)")
        return {"Authorization": f"Bearer {token}"}

    def _get(self, path: str, params: dict[str, str] | None, needs: str, where: str) -> httpx.Response:
        try:
            resp = self._client.get(path, params=params, headers=self._headers())
        except httpx.TimeoutException:
            raise KubeError(f"{where}: no answer within {self.target.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise KubeError(f"{where}: {type(exc).__name__}: {str(exc) or 'failed'}"[:200]) from None
        if resp.status_code == 401:
            who = f"the token in ${self.target.token_env}" if self.target.token_env else "an anonymous request"
            raise KubeError(f"{where}: HTTP 401 Unauthorized: {who} was refused", status=401)
        if resp.status_code == 403:
            raise KubeError(f"{where}: HTTP 403 Forbidden: RBAC lacks '{needs}'{self._ns_text()}"
                            f"{_status_message(resp)}", status=403)
        if resp.status_code != 200:
            raise KubeError(f"{where}: HTTP {resp.status_code}{_status_message(resp)}", status=resp.status_code)
        return resp

    def _ns_text(self) -> str:
        ns = self.target.namespace
        return f" in namespace {ns}" if ns else " (all namespaces: a ClusterRole)"

    def list_pods(self, selector: str) -> tuple[str, list[dict[str, Any]]]:
        """The pods matching ``selector`` in the target's namespace (or all): (resourceVersion, items)."""
        ns = self.target.namespace
        path = f"/api/v1/namespaces/{quote(ns, safe='')}/pods" if ns else "/api/v1/pods"
        resp = self._get(path, {"labelSelector": selector}, NEEDS_LIST, "pod list")
        try:
            doc = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise KubeError("pod list: the answer is not JSON (is this a Kubernetes API server?)") from None
        if not isinstance(doc, dict) or doc.get("kind") != "PodList":
            kind = doc.get("kind") if isinstance(doc, dict) else doc
            raise KubeError(f"pod list: expected a PodList, got {str(kind)[:40]}")
        version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
        return version, [i for i in doc.get("items") or () if isinstance(i, dict)]

    def metrics(self, namespace: str, pod: str, port: int, path: str = "/metrics") -> bytes:
        """The pod's metrics through the API server's pod proxy."""
        url = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}:{port}/proxy{path}"
        return self._get(url, None, NEEDS_PROXY, "pod proxy").content


def proxy_path(namespace: str, pod: str, port: int, path: str = "/metrics") -> str:
    """The pod-proxy path of a pod's endpoint (what the engine's URL shows)."""
    return f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}"


def _status_message(resp: httpx.Response) -> str:
    """A Kubernetes Status object's message (``pods is forbidden: User ... cannot list ...``)."""
    try:
        doc = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        return ""
    msg = doc.get("message") if isinstance(doc, dict) else None
    return f" ({str(msg)[:200]})" if msg else ""
