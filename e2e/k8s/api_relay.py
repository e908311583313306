"""The apiserver made reachable from pods on the harness's node.

The harness's kube-apiserver listens on 127.0.0.1 only, and there is no kube-proxy: a pod
that talks to `https://kubernetes.default.svc` (an in-cluster client: kopf's service-
account login) finds that name in its /etc/hosts at the `kubernetes` Service's endpoint,
the node's bridge address, on port 443. TcpRelay listens there and pipes each connection
to the apiserver; its serving certificate names kubernetes.default.svc and that address.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpRelay:
    """Accepts on (host, port) and pipes each connection to `target`."""

    def __init__(self, host: str, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server((host, port))
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        self.listener.close()
