"""The API server's way to the processes that stand in for pods.

A kube-apiserver calls a webhook or an aggregated API named by a Service at the Service's
ClusterIP and checks the serving certificate against `<service>.<namespace>.svc`
(k8s.io/apiserver v0.36 pkg/util/webhook and kube-aggregator's ClusterIP resolver). With no
kube-proxy a ClusterIP leads nowhere, and Endpoints may not name loopback addresses
(pkg/apis/core/validation ValidateEndpointIP, v1.36), so each API server is given an egress
selector for its "cluster" traffic (`--egress-selector-config-file`: HTTPConnect over a Unix
socket, as over TCP it needs a client certificate; pkg/server/egressselector at v0.36): this
proxy answers its CONNECT and joins ClusterIP:port to the 127.0.0.1 port the process listens
on, from a routes file the launcher writes once the Services have their addresses. Kueue's
webhooks, its conversion webhook and its visibility API are then called exactly as in a
cluster: by Service, with the certificates Kueue makes itself.

Run as `python -m loopback.egress ROUTES_FILE SOCKET`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path


def read_routes(path: Path) -> dict[str, int]:
    """ "<clusterIP>:<port>" -> the local port; empty until the launcher has written it."""
    try:
        return {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _serve(
    routes_file: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        port = read_routes(routes_file).get(target) if method == "CONNECT" else None
        if port is None:
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            await writer.drain()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
    except (TimeoutError, OSError, ValueError, asyncio.IncompleteReadError):
        with contextlib.suppress(Exception):
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            writer.close()
        return
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await writer.drain()
    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def serve(routes_file: Path, socket_path: Path) -> None:
    socket_path.unlink(missing_ok=True)
    server = await asyncio.start_unix_server(
        lambda r, w: _serve(routes_file, r, w), path=str(socket_path)
    )
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m loopback.egress ROUTES_FILE SOCKET", file=sys.stderr)
        return 2
    socket_path = Path(argv[1])
    # SIGTERM (`loopback down`, processes.stop_all) ends it as Ctrl-C does, so that the
    # socket goes with it: a deep state folder puts it in /tmp (ControlPlane.egress_socket).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(Path(argv[0]), socket_path))
    finally:
        socket_path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
