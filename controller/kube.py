"""Talking to a Kubernetes API server: requests with bounded retries, and reflectors that
keep a local copy of one kind current by list + watch.

The official asyncio client (kubernetes_asyncio) does authentication, TLS and transport;
the list/watch loop is written here, the way client-go's reflector does it, so that
resourceVersion, bookmarks, relist on 410 Gone and reconnect backoff are explicit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import re
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import RESTResponse

from controller.kinds import Kind

log = logging.getLogger("controller.kube")

RETRYABLE = {429, 500, 502, 503, 504}


# The first "resourceVersion" key of an object's JSON is its metadata's: metadata comes before
# spec and status whether a server writes a type's fields in order or an object's keys
# sorted, no key before it in metadata has that name (managedFields' keys start with "f:"),
# and inside a string value the quotes would be escaped.
_RESOURCE_VERSION = re.compile(rb'"resourceVersion"\s*:\s*"([^"\\]*)"')

# What of an answer to read: all of it, decoded; only the object's resourceVersion; nothing.
Answer = Literal["object", "version", "none"]


def version_in(body: bytes) -> str:
    """The resourceVersion of the object in `body` (JSON), without decoding the rest."""
    found = _RESOURCE_VERSION.search(body)
    return found.group(1).decode() if found else ""


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def connection_reason(exc: BaseException) -> str:
    """Why a connection failed, in the words of the system ("connection refused", "name or
    service not known", a certificate's complaint), not the client's repr of its pool key."""
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"certificate not accepted: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"cannot resolve {exc.host}: {exc.os_error.strerror or exc.os_error}"
    error = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else exc
    if isinstance(error, OSError) and error.errno and error.errno > 0:
        return os.strerror(error.errno).lower()
    return str(exc) or type(exc).__name__


class Gone(Exception):
    """The watch's resourceVersion is too old: the only way on is a fresh list."""


def _skip_proxy_lookups(api: client.ApiClient) -> None:
    """The client's aiohttp session trusts the environment, so every request looks up a
    proxy for its URL in a worker thread: a thread hop per request, a fifth of the
    controller's time per nomination. With no proxy in the environment there is nothing
    to find, so the lookup is turned off; with one, it stays as it is."""
    session = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if session is not None and hasattr(session, "_trust_env") and not urllib.request.getproxies():
        session._trust_env = False


# A reader kubeconfig of a kind worker has this context besides its current one: the
# worker's API server as this machine reaches it (components/objects/kubeconfig.py).
FROM_HOST_CONTEXT = "from-host"


def host_context(kubeconfig: Mapping[str, Any]) -> str | None:
    """FROM_HOST_CONTEXT outside a pod when the kubeconfig has it (the in-network name of a
    kind cluster resolves only on the kind network); None, the current context, otherwise.
    The kubelet sets KUBERNETES_SERVICE_HOST in every container it starts."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    names = {c.get("name") for c in kubeconfig.get("contexts") or [] if isinstance(c, Mapping)}
    return FROM_HOST_CONTEXT if FROM_HOST_CONTEXT in names else None


class Kube:
    """One cluster's API server."""

    def __init__(
        self, api: client.ApiClient, cluster: str, attempts: int = 5, base_delay: float = 0.2
    ) -> None:
        _skip_proxy_lookups(api)
        self.api = api
        self.cluster = cluster
        self.attempts = attempts
        self.base_delay = base_delay

    @classmethod
    async def from_kubeconfig(cls, kubeconfig: Mapping[str, Any], cluster: str) -> Kube:
        configuration = client.Configuration()
        await config.load_kube_config_from_dict(
            dict(kubeconfig), context=host_context(kubeconfig), client_configuration=configuration
        )
        return cls(client.ApiClient(configuration), cluster)

    @classmethod
    async def in_cluster(cls, cluster: str) -> Kube:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return cls(client.ApiClient(configuration), cluster)

    async def close(self) -> None:
        await self.api.close()

    async def _call(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None,
        body: Any,
        content_type: str | None,
        stream: bool,
        timeout: float | None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return await self.api.call_api(
            path,
            method,
            query_params=query or [],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            response_types_map={200: "object", 201: "object"},
            _return_http_data_only=True,
            _preload_content=not stream,
            _request_timeout=timeout,
        )

    async def _undecoded(
        self,
        method: str,
        path: str,
        query: list[tuple[str, Any]] | None,
        body: Any,
        content_type: str | None,
        timeout: float,
    ) -> bytes:
        """The answer's body as it came, failing as `_call` does on an error status."""
        response = await self._call(method, path, query, body, content_type, True, timeout)
        try:
            data = await response.read()
        finally:
            response.release()
        if not 200 <= response.status <= 299:
            error = client.ApiException(http_resp=RESTResponse(response, data))
            error.body = data.decode("utf-8", "replace")
            raise error
        return data

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float = 30,
        answer: Answer = "object",
    ) -> dict[str, Any]:
        """One call, retried with jittered backoff on throttling, server errors and lost
        connections; other errors are raised as ApiError at once. Returns the answer decoded,
        or with `answer="version"` only the object's resourceVersion read from it
        ({"metadata": {"resourceVersion": ...}}), or with "none" nothing ({}): a Workload's
        JSON costs more to decode than the rest of a write to send."""
        delay = self.base_delay
        for attempt in range(1, self.attempts + 1):
            try:
                if answer != "object":
                    data = await self._undecoded(method, path, query, body, content_type, timeout)
                    version = version_in(data) if answer == "version" else ""
                    return {"metadata": {"resourceVersion": version}} if version else {}
                result = await self._call(method, path, query, body, content_type, False, timeout)
                return result if isinstance(result, dict) else {}
            except client.ApiException as exc:
                status = exc.status or 0
                if status not in RETRYABLE or attempt == self.attempts:
                    raise ApiError(status, _message(exc)) from exc
                retry_after = (exc.headers or {}).get("Retry-After")
                wait = float(retry_after) if retry_after and retry_after.isdigit() else delay
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if attempt == self.attempts:
                    raise ApiError(0, connection_reason(exc)) from exc
                wait = delay
            await asyncio.sleep(wait * (0.5 + random.random()))
            delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any]:
        return await self.request("GET", kind.path(namespace, name))

    async def read(
        self, path: str, timeout: float = 30, query: list[tuple[str, Any]] | None = None
    ) -> bytes:
        """A GET whose answer is not JSON (a pod's /metrics through the API server's proxy,
        a container's log), as it came; one attempt, errors raised as ApiError."""
        try:
            return await self._undecoded("GET", path, query, None, None, timeout)
        except client.ApiException as exc:
            raise ApiError(exc.status or 0, _message(exc)) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, connection_reason(exc)) from exc

    async def create(
        self,
        kind: Kind,
        obj: Mapping[str, Any],
        namespace: str | None = None,
        answer: Answer = "object",
    ) -> dict[str, Any]:
        return await self.request("POST", kind.path(namespace), body=dict(obj), answer=answer)

    async def replace(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return await self.request(
            "PUT", kind.path(meta.get("namespace"), meta["name"]), body=dict(obj)
        )

    async def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        status: bool = False,
        answer: Answer = "object",
    ) -> dict[str, Any]:
        return await self.request(
            "PATCH",
            kind.path(namespace, name, "status" if status else None),
            body=dict(patch),
            content_type="application/merge-patch+json",
            answer=answer,
        )

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        page: int = 500,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout: float = 120,
    ) -> tuple[list[dict], str]:
        """Every object, a page at a time (limit/continue), each passed through
        `transform` as it arrives: listing 10,000 Workloads never holds them all in full.
        `label_selector` and `field_selector` are the API's own (`a=b,c!=d`): the server
        filters, so a job's pods or an object's events are not all of a namespace's.
        `timeout` bounds each page's request: a command a person waits on asks for less."""
        selectors: list[tuple[str, Any]] = [
            (param, value)
            for param, value in (
                ("labelSelector", label_selector),
                ("fieldSelector", field_selector),
            )
            if value
        ]
        items: list[dict] = []
        token = ""
        while True:
            query: list[tuple[str, Any]] = [*selectors, ("limit", page)]
            if token:
                query.append(("continue", token))
            result = await self.request("GET", kind.path(namespace), query=query, timeout=timeout)
            chunk = result.get("items") or []
            items.extend(transform(o) for o in chunk) if transform else items.extend(chunk)
            meta = result.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, meta.get("resourceVersion", "")

    async def lines(
        self, path: str, query: list[tuple[str, Any]] | None = None
    ) -> AsyncIterator[bytes]:
        """A GET whose answer streams until the server ends it (a followed log), a line at a
        time as it arrives; errors raised as ApiError."""
        try:
            response = await self._call("GET", path, query, None, None, True, None)
        except client.ApiException as exc:
            raise ApiError(exc.status or 0, _message(exc)) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, connection_reason(exc)) from exc
        async with contextlib.aclosing(_streamed(response, _refused_read)) as stream:
            async for line in stream:
                yield line

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        timeout_seconds: int = 300,
        known: Callable[[bytes], Awaitable[dict[str, Any] | None]] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The raw event stream from `resource_version`, bookmarks included. `known(line)`
        may answer for an event before it is decoded (an event it already knows)."""
        query = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", timeout_seconds),
        ]
        try:
            response = await self._call(
                "GET", kind.path(namespace), query, None, None, True, timeout_seconds + 30
            )
        except client.ApiException as exc:
            if exc.status == 410:
                raise Gone() from exc
            raise ApiError(exc.status or 0, _message(exc)) from exc
        async with contextlib.aclosing(_streamed(response, _refused_watch)) as stream:
            async for line in stream:
                if line.strip():
                    event = await known(line) if known is not None else None
                    yield event if event is not None else json.loads(line)

    async def version(self) -> str:
        return (await self.request("GET", "/version")).get("gitVersion", "")

    async def probe(self, timeout: float) -> str:
        """One GET /version within `timeout` seconds, not retried: the cheapest request a
        server answers (any authenticated identity may, through the built-in
        system:public-info-viewer role), so whether it answers says whether the server is up.
        Returns the server's version; raises ApiError (status 0 when nothing answered).
        asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that
        arrives as the answer does (or as the refusal does), and the prober, so the
        controller's stop, then never ends."""
        try:
            async with asyncio.timeout(timeout):
                result = await self._call("GET", "/version", None, None, None, False, timeout)
        except client.ApiException as exc:
            raise ApiError(exc.status or 0, _message(exc)) from exc
        except TimeoutError as exc:
            raise ApiError(0, f"no answer within {timeout:g}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise ApiError(0, connection_reason(exc)) from exc
        return str((result if isinstance(result, dict) else {}).get("gitVersion", ""))


async def _refused_read(response: Any) -> None:
    """A streamed read's error status as ApiError, with the server's message when it sent
    a Status object."""
    if not 200 <= response.status <= 299:
        text = await response.text()
        try:
            message = json.loads(text).get("message") or text
        except ValueError:
            message = text
        raise ApiError(response.status, message[:300])


async def _refused_watch(response: Any) -> None:
    """A watch's error status: 410 is Gone (relist), any other but 200 an ApiError."""
    if response.status == 410:
        raise Gone()
    if response.status != 200:
        raise ApiError(response.status, (await response.text())[:200])


async def _streamed(
    response: Any, refused: Callable[[Any], Awaitable[None]]
) -> AsyncIterator[bytes]:
    """The lines of a streamed answer (a followed log, a watch) as they arrive, until the
    server ends it, once `refused(response)` has passed its status (it raises for one that
    is not read on). The response goes back to the pool however the reading ends: the
    server's end, an error, or the reader stopping early (its callers close this with
    contextlib.aclosing, so that happens when they stop, not when this is collected)."""
    try:
        await refused(response)
        while True:
            line = await response.content.readline()
            if not line:
                return
            yield line
    finally:
        response.release()


@contextlib.asynccontextmanager
async def connected(
    kubeconfigs: Mapping[str, Mapping[str, Any]], attempts: int
) -> AsyncIterator[dict[str, Kube]]:
    """A client per cluster (kubeconfigs by cluster name), each trying a request at most
    `attempts` times: the commands a person waits on choose how long that is. Every client
    made is closed on the way out, also when a later kubeconfig fails to load."""
    kubes: dict[str, Kube] = {}
    try:
        for name, kubeconfig in kubeconfigs.items():
            kubes[name] = await Kube.from_kubeconfig(dict(kubeconfig), name)
            kubes[name].attempts = attempts
        yield kubes
    finally:
        for kube in kubes.values():
            await kube.close()


def _message(exc: client.ApiException) -> str:
    try:
        return json.loads(exc.body).get("message") or exc.reason or ""
    except (TypeError, ValueError):
        return str(exc.body or exc.reason or "")


class Prober:
    """Whether a server is up, asked every `interval` seconds with a bounded request
    (`Kube.probe`). A watch that brings nothing is normal (a real API server sends nothing
    on an idle watch, and bookmarks only now and then), so the watches' silence is never
    taken for an outage; probes that fail or time out are: `failures_allowed` in a row are
    forgiven (one slow answer from a busy server is not an outage). `on_change()` is
    called when the verdict flips. `clock` is injectable so tests let minutes pass at once."""

    def __init__(
        self,
        kube: Kube,
        on_change: Callable[[], None],
        interval: float = 3.0,
        timeout: float = 2.0,
        failures_allowed: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.on_change = on_change
        self.interval = interval
        self.timeout = timeout
        self.failures_allowed = failures_allowed
        self.clock = clock
        self.ok = False
        self.reason = "not asked yet"
        self.failures = 0  # in a row
        self.answered_at = 0.0  # clock() of the last answer
        self.version = ""
        self.probes = 0  # probes finished, answered or not

    async def run(self) -> None:
        while True:
            await self.probe_once()
            await asyncio.sleep(self.interval)

    async def probe_once(self) -> None:
        was = self.ok
        try:
            self.version = await self.kube.probe(self.timeout)
        except ApiError as exc:
            self.failures += 1
            # No count or time in it: the reason ends up in Events and must not tick.
            self.reason = f"GET /version failed: {exc}"
            if self.failures > self.failures_allowed or not self.answered_at:
                self.ok = False
        else:
            self.ok, self.reason, self.failures, self.answered_at = True, "", 0, self.clock()
        self.probes += 1
        if self.ok != was:
            log.info("%s: %s", self.kube.cluster, "answers again" if self.ok else self.reason)
            self.on_change()

    def silence(self) -> float:
        """Seconds since the server last answered (infinite before its first answer)."""
        return self.clock() - self.answered_at if self.answered_at else float("inf")


_TRANSFORMED = object()  # in a watch event made from an expected object (Reflector.expect)
# How long a watch event waits for the answer to a write of ours to the same object: the
# server sends both at once, so a few milliseconds; longer (the write is being retried),
# and the event is decoded as any other.
WRITE_ANSWER_WAIT = 1.0


class Reflector:
    """Keeps `store` equal to the server's objects of one kind: list, then watch from the
    list's resourceVersion; relist on 410 Gone; reconnect with backoff on any other
    failure, reporting itself unhealthy meanwhile. `on_change(event_type, obj)` is called
    for every change ("SYNC" with None after each list)."""

    def __init__(
        self,
        kube: Kube,
        kind: Kind,
        on_change: Callable[[str, Any], None],
        namespace: str | None = None,
        watch_timeout: int = 300,
        max_backoff: float = 30.0,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.namespace = namespace
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.max_backoff = max_backoff
        # Applied to each object before it is stored: keep only what is read, so a cache of
        # tens of thousands of objects stays small.
        self.transform = transform or (lambda obj: obj)
        self.store: dict[str, dict[str, Any]] = {}
        # Objects that writes of ours made, by the resourceVersion the server gave them, and
        # each one's key: see expect().
        self._expected: dict[str, tuple[str, dict[str, Any]]] = {}
        self._expected_version: dict[str, str] = {}  # key -> its expected resourceVersion
        # Writes of ours under way: key -> (its name, quoted, as JSON has it; answered).
        self._writes: dict[str, tuple[bytes, asyncio.Future[None]]] = {}
        self.recognised = 0  # events taken from what was expected, not decoded
        self.synced = asyncio.Event()
        self.healthy = False
        self.last_error = "not listed yet"
        self.last_seen = 0.0  # monotonic time of the last list, event or bookmark
        self.relists = 0

    @staticmethod
    def key(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace")
        return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))

    async def run(self) -> None:
        backoff = 0.2
        while True:
            try:
                resource_version = await self._list()
                backoff = 0.2
                while True:
                    resource_version = await self._watch(resource_version)
            except Gone:
                log.info(
                    "%s %s: resourceVersion expired, relisting", self.kube.cluster, self.kind.plural
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 (any failure: mark unhealthy, retry)
                self.healthy = False
                self.last_error = str(exc) or exc.__class__.__name__
                self.on_change("UNHEALTHY", None)
                log.warning(
                    "%s %s: %s; retrying in %.1fs",
                    self.kube.cluster,
                    self.kind.plural,
                    self.last_error,
                    backoff,
                )
                await asyncio.sleep(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, self.max_backoff)

    def expect(self, obj: dict[str, Any]) -> None:
        """`obj` (transformed already) is what the watch will bring at its resourceVersion:
        a write of ours made that version from one we knew, with nothing else changed (the
        write carried the resourceVersion it was made on). That event is then stored as
        `obj`, neither decoded nor transformed: a Workload is kilobytes of JSON, and during
        a backlog nearly every event is the echo of a nomination."""
        key = self.key(obj)
        version = obj["metadata"]["resourceVersion"]
        self._forget_expected(key)
        self._expected[version] = (key, obj)
        self._expected_version[key] = version

    def _forget_expected(self, key: str) -> None:
        version = self._expected_version.pop(key, None)
        if version is not None:
            self._expected.pop(version, None)

    def writing(self, obj: Mapping[str, Any]) -> Callable[[dict[str, Any] | None], None]:
        """A write of ours to `obj` is under way. The server sends its event to the watch as
        it answers the write, and the watch may be read first: until the answer is in, an
        event that names the object waits for it (at most WRITE_ANSWER_WAIT seconds), so
        that the answer can say what to expect. Returns the call that gives the answer: the
        object the write made (as for expect()), or None (none, or not known)."""
        key = self.key(obj)
        name = json.dumps((obj.get("metadata") or {}).get("name", "")).encode()
        answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writes[key] = (name, answered)

        def answer(made: dict[str, Any] | None) -> None:
            if self._writes.get(key, (b"", None))[1] is answered:
                del self._writes[key]
            if made is not None:
                self.expect(made)
            if not answered.done():
                answered.set_result(None)

        return answer

    async def _known(self, line: bytes) -> dict[str, Any] | None:
        """The event in `line` if it brings an expected object (checked by its
        resourceVersion and name, before any decoding), else None."""
        waiting = [answered for name, answered in self._writes.values() if name in line]
        if waiting:
            # Its name is in it (its own event, or one that mentions it): the write's answer
            # first.
            await asyncio.wait(waiting, timeout=WRITE_ANSWER_WAIT)
        if not self._expected:
            return None
        found = self._expected.get(version_in(line))
        if found is None:
            return None
        key, obj = found
        name = obj["metadata"].get("name", "")
        if f'"{name}"'.encode() not in line:
            return None
        self._expected_version.pop(key, None)
        del self._expected[obj["metadata"]["resourceVersion"]]
        self.recognised += 1
        return {"type": "MODIFIED", "object": obj, _TRANSFORMED: True}

    async def _list(self) -> str:
        items, resource_version = await self.kube.list(self.kind, self.namespace, self.transform)
        # What was expected came before this list, or will never come.
        self._expected.clear()
        self._expected_version.clear()
        self.store = {self.key(o): o for o in items}
        self.relists += 1
        self._seen()
        self.synced.set()
        self.on_change("SYNC", None)
        return resource_version

    def _seen(self) -> None:
        self.healthy = True
        self.last_error = ""
        self.last_seen = time.monotonic()

    async def _watch(self, resource_version: str) -> str:
        async for event in self.kube.watch(
            self.kind, resource_version, self.namespace, self.watch_timeout, self._known
        ):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone()
                raise ApiError(int(obj.get("code") or 0), str(obj.get("message")))
            resource_version = (obj.get("metadata") or {}).get("resourceVersion", resource_version)
            self._seen()
            if kind == "BOOKMARK":
                continue
            if kind == "DELETED":
                key = self.key(obj)
                self.store.pop(key, None)
                self._forget_expected(key)
            elif _TRANSFORMED in event:
                self.store[self.key(obj)] = obj
            else:
                obj = self.transform(obj)
                key = self.key(obj)
                self.store[key] = obj
                # A version of it came decoded: whatever was expected of it is past (or came
                # before expect() was called and went this way).
                self._forget_expected(key)
            self.on_change(kind, obj)
        return resource_version
