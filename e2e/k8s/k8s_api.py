"""A small Kubernetes REST client for the test kubelet and the harness (urllib + TLS).

Only what they need: JSON GET/POST/PUT/PATCH/DELETE with a client certificate, errors
as ApiError with the HTTP status. Tests talk to the cluster through kubectl instead, so
they work with any kubeconfig.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

JSON = dict[str, Any]


# For plain HTTP to addresses on this machine (probes, health checks): no proxy, ever.
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


class Api:
    """One API server, authenticated by a client certificate, verified by the cluster CA."""

    def __init__(self, server: str, ca_file: str, cert_file: str, key_file: str) -> None:
        self.server = server.rstrip("/")
        tls = ssl.create_default_context(cafile=ca_file)
        tls.load_cert_chain(cert_file, key_file)
        # never through an HTTP(S)_PROXY of the environment: the server is on this machine
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls)
        )

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        query: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> JSON:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, method, path, e.read().decode("utf-8", "replace")) from None
        return json.loads(raw) if raw else {}

    def get(self, path: str, **query: str) -> JSON:
        return self.request("GET", path, query=query or None)

    def get_or_none(self, path: str) -> JSON | None:
        try:
            return self.get(path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def items(self, path: str, **query: str) -> list[JSON]:
        return list(self.get(path, **query).get("items") or [])

    def create(self, path: str, obj: JSON) -> JSON:
        return self.request("POST", path, obj)

    def merge_patch(self, path: str, patch: JSON) -> JSON:
        return self.request("PATCH", path, patch, content_type="application/merge-patch+json")

    def strategic_patch(self, path: str, patch: JSON) -> JSON:
        return self.request(
            "PATCH", path, patch, content_type="application/strategic-merge-patch+json"
        )

    def delete(self, path: str, options: JSON | None = None) -> JSON | None:
        try:
            return self.request("DELETE", path, options)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
