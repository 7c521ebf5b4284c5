"""A small stateful Kubernetes API server on loopback, for controller tests.

It speaks the REST subset the controller uses, for any group and kind: list and watch,
get, create, replace, JSON merge patch on objects and on the status subresource, delete,
/version and /readyz. Where the dispatcher depends on it, it behaves as a real
kube-apiserver does (each rule names the upstream file it follows, kubernetes v1.32):
- a watch with nothing to report sends nothing; bookmarks only to a client that asked
  (allowWatchBookmarks), roughly once a minute and 2 s before the watch's timeout, and
  never for a resource that has had no event since the server started
  (staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go nextBookmarkTime,
  cacher.go dispatchEvents);
- a watch from a resourceVersion older than the kept history gets an ERROR event with a
  410 Expired Status; without a resourceVersion (or "0") it starts with a synthetic ADDED
  per existing object;
- a write carrying a stale metadata.resourceVersion (a replace, or a merge patch naming
  one) and a delete with stale preconditions get 409 Conflict
  (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go);
- kinds with a status subresource: a create drops status, a write to the object keeps
  the old status, a write to /status keeps everything but status; generation moves only
  when something besides metadata and status changed; a write that changes nothing is
  not stored and sends no event
  (staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/strategy.go and
  status_strategy.go);
- custom resources of the CRDs it serves (Kueue's real ones from the pinned release, the
  ClusterProfile's, the DispatchPolicy's; `served_crds`) are pruned to their structural
  schema, defaulted, and checked against the OpenAPI rules and the CEL rules, with oldSelf
  on update (components/checks/crd_schema.py); without those files it keeps what is sent.
Tests can inject failures (throttling, conflicts, outages, a server that stops answering)
and read every request made. One emulator is one cluster.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from components.checks.crd_schema import CrdSchemas
from controller.policy_api import crd as dispatch_policy_crd
from tests.helpers.upstream_data import find_upstream_crds

WRITES = ("POST", "PUT", "PATCH", "DELETE")
# API groups served by kube-apiserver itself; any other group is a CustomResourceDefinition,
# and every CRD the tests serve (Kueue's, the ClusterProfile, the DispatchPolicy) declares a
# status subresource.
BUILTIN_GROUPS = {
    "",
    "apps",
    "batch",
    "coordination.k8s.io",
    "events.k8s.io",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
}
# The built-in kinds with a status subresource among those tests write.
BUILTIN_WITH_STATUS = {
    ("", "namespaces"),
    ("", "pods"),
    ("", "nodes"),
    ("", "services"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
}
CONFLICT = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
CLUSTER_SCOPED = {
    "admissionchecks",
    "multikueueconfigs",
    "multikueueclusters",
    "clusterqueues",
    "resourceflavors",
    "dispatchpolicies",
    "namespaces",
}


@functools.cache
def served_crds() -> CrdSchemas | None:
    """What an emulator serves by default: Kueue's and the ClusterProfile's real CRDs (the
    pinned release or its Go module, tests/helpers/upstream_data.py; never the download cache that
    tests fill with synthetic releases) and the project's DispatchPolicy CRD; None (every
    kind kept as sent) when the upstream CRDs cannot be had: tests that depend on the real
    schema then skip, saying so (`real_crds_missing`)."""
    upstream, _ = find_upstream_crds()
    if upstream is None:
        return None
    return upstream.merged(CrdSchemas.from_documents([dispatch_policy_crd()]))


def real_crds_missing() -> str:
    """Why the emulators serve permissive CRDs ("" when they serve the real ones)."""
    return "" if served_crds() is not None else find_upstream_crds()[1]


# The field selectors the API server accepts for a list, per resource (every resource:
# metadata.name and metadata.namespace; Events add involvedObject.* and the rest of
# pkg/registry/core/event/strategy.go ToSelectableFields at v1.36).
FIELD_LABELS = {
    "events": {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    },
}


def _field(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def _selected(query: Any, gp: str) -> Any:
    """A list's labelSelector and fieldSelector (equality terms, `a=b,c!=d`) as a test of
    one object; an unknown field label is a ValueError, as the API server answers 400."""
    terms: list[tuple[str, str, bool, bool]] = []  # (key, value, equal, is a label)
    for param, is_label in (("labelSelector", True), ("fieldSelector", False)):
        for term in filter(None, (query.get(param) or "").split(",")):
            equal = "!=" not in term
            key, _, value = term.replace("!=", "=").replace("==", "=").partition("=")
            if not is_label and key not in FIELD_LABELS.get(gp, set()) | {
                "metadata.name",
                "metadata.namespace",
            }:
                raise ValueError(f'field label not supported: "{key}"')
            terms.append((key, value, equal, is_label))

    def test(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for key, value, equal, is_label in terms:
            have = labels.get(key, "") if is_label else _field(obj, key)
            if (have == value) != equal or (is_label and equal and key not in labels):
                return False
        return True

    return test


def has_status_subresource(group: str, plural: str) -> bool:
    return group not in BUILTIN_GROUPS or (group, plural) in BUILTIN_WITH_STATUS


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What a write changes, for telling a no-op write apart: all but the server's fields."""
    meta = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    return {**obj, "metadata": meta}


def _spec_part(obj: dict[str, Any]) -> dict[str, Any]:
    """What moves metadata.generation: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@dataclass
class Fault:
    method: str
    path_part: str
    status: int
    remaining: int


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str
    at: float = 0.0  # time.time() on arrival: benchmarks measure latency to the write
    status: int = 0  # the HTTP status it was answered with (0 while unanswered)


@dataclass
class Emulator:
    name: str = "cluster"
    version: str = "v1.36.4"
    # A real API server bookmarks a watch about once a minute (cacher bookmarkFrequency).
    bookmark_interval: float = 60.0
    objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = field(default_factory=dict)
    log: list[tuple[int, str, str, str, dict]] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    # Validation hooks: (group/plural, subresource) -> fn(old, new) -> error or None.
    rules: dict[tuple[str, str], Any] = field(default_factory=dict)
    revision: int = 1
    compacted: int = 0
    down: bool = False
    # When set, requests are received but not answered until it is cleared (or the
    # emulator stops): a server that hangs, as behind a lost network path.
    stalled: bool = False
    # The CRDs served: custom resources of these kinds are pruned, defaulted and validated
    # on every write; None serves every kind permissively (what is sent is kept).
    crds: CrdSchemas | None = field(default_factory=served_crds)
    # (method, path part) -> requests that match are held unanswered while listed; those
    # whose client gave up meanwhile (closed the connection) are logged in `abandoned`.
    hung: set[tuple[str, str]] = field(default_factory=set)
    abandoned: list[Request] = field(default_factory=list)
    # When set, requests must carry this bearer token (as a real server would refuse them).
    required_token: str | None = None
    _watchers: list[asyncio.Queue] = field(default_factory=list)
    # group/plural -> revision of its last event since the start (what a bookmark carries).
    _last_event: dict[str, int] = field(default_factory=dict)
    _write_log: list[Request] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0
    # What each container printed, (namespace, pod, container) -> text, for pods/log.
    logs: dict[tuple[str, str, str], str] = field(default_factory=dict)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.url

    async def stop(self) -> None:
        self.stalled = False
        for queue in self._watchers:
            queue.put_nowait(None)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, token: str = "test-token") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": self.name,
            "clusters": [{"name": self.name, "cluster": {"server": self.url}}],
            "users": [{"name": self.name, "user": {"token": token}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": self.name}}],
        }

    # --- direct access for tests --------------------------------------------------------

    def put(self, group_plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object, status included, as a controller on the cluster
        would (no faults, no preconditions); a custom resource is pruned, defaulted and
        checked against its CRD, and one the server would refuse is a ValueError (the
        test's object is wrong)."""
        meta = obj.setdefault("metadata", {})
        key = (meta.get("namespace", ""), meta["name"])
        group, plural = self._split(group_plural)
        store = self.objects.setdefault((group, plural), {})
        old = store.get(key)
        api_version = obj.get("apiVersion") or self._served_version(group, plural)
        obj, error = self._admit(api_version, plural, obj, old)
        if error:
            raise ValueError(error)
        meta = obj["metadata"]
        event = "MODIFIED" if old else "ADDED"
        if old:
            meta.setdefault("uid", old["metadata"]["uid"])
            meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
        return self._commit(group_plural, key, obj, event)

    def get(self, group_plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        found = self.objects.get(self._split(group_plural), {}).get((namespace, name))
        return copy.deepcopy(found) if found else None

    def items(self, group_plural: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.objects.get(self._split(group_plural), {}).values()]

    def remove(self, group_plural: str, name: str, namespace: str = "") -> None:
        obj = self.objects.get(self._split(group_plural), {}).pop((namespace, name))
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self._record(group_plural, "DELETED", obj)

    def fail(self, method: str, path_part: str, status: int, times: int = 1) -> None:
        self.faults.append(Fault(method, path_part, status, times))

    def compact(self) -> None:
        """Forget history: watches from an older resourceVersion get 410 Gone."""
        self.compacted = self.revision
        self.log.clear()
        for queue in self._watchers:
            queue.put_nowait("GONE")

    def writes(self, path_part: str = "") -> list[Request]:
        return [r for r in self._write_log if path_part in r.path]

    # --- internals ----------------------------------------------------------------------

    def _log(self, pod: dict[str, Any] | None, name: str, query: Any) -> web.StreamResponse:
        """GET pods/NAME/log as the API server answers it (pkg/registry/core/pod/rest
        log.go and the kubelet at v1.36): the container must be named when the pod has
        several; a container that has not started yet is a 400."""
        if pod is None:
            return self._status(404, f'pods "{name}" not found')
        namespace = pod["metadata"].get("namespace", "")
        names = [c["name"] for c in pod["spec"]["containers"]]
        container = query.get("container") or (names[0] if len(names) == 1 else "")
        if not container:
            return self._status(
                400,
                f"a container name must be specified for pod {name}, choose one of: "
                f"[{' '.join(names)}]",
            )
        if container not in names:
            return self._status(400, f"container {container} is not valid for pod {name}")
        if (namespace, name, container) not in self.logs:
            return self._status(
                400,
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        return web.Response(text=self.logs[(namespace, name, container)])

    def _kind(self, api_version: str, plural: str) -> str | None:
        """The kind a CRD serves as `plural` in `api_version`, when the CRD is known."""
        if self.crds is None:
            return None
        for version, kind in self.crds.kinds():
            lower = kind.lower()
            if version == api_version and plural in (
                lower + "s",
                lower[:-1] + "ies" if lower.endswith("y") else "",
            ):
                return kind
        return None

    def _served_version(self, group: str, plural: str) -> str:
        """The newest version of `group` a known CRD serves `plural` in ("" when none)."""
        versions = sorted(
            v
            for v, _ in (self.crds.kinds() if self.crds is not None else [])
            if v.startswith(group + "/")
        )
        return next((v for v in reversed(versions) if self._kind(v, plural)), "")

    def _moved_on(self, path: str) -> None:
        """What an injected 409 stands for: someone else wrote the object first. It gets a
        new resourceVersion (and its watchers an event), as after a real conflict."""
        parsed = self._parse(path)
        if parsed is None:
            return
        group, plural, namespace, name, _ = parsed
        found = self.objects.get((group, plural), {}).get((namespace, name))
        if found is not None:
            gp = f"{group}/{plural}" if group else plural
            self._commit(gp, (namespace, name), copy.deepcopy(found), "MODIFIED")

    def _serve_crd(self, crd: dict) -> None:
        """A created CRD is served at once and says so; an emulator that checks schemas
        checks its kind from now on (a permissive one stays permissive)."""
        if self.crds is not None:
            self.crds = self.crds.merged(CrdSchemas.from_documents([crd]))
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        crd["status"] = {
            "conditions": [
                {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": now}
                for t in ("NamesAccepted", "Established")
            ]
        }

    def _admit(
        self, api_version: str, plural: str, obj: dict, old: dict | None
    ) -> tuple[dict, str | None]:
        """What a server stores for a write of a custom resource whose CRD it knows:
        pruned to the schema, defaulted, then validated (OpenAPI rules and CEL, with
        oldSelf on update); or the 422 message. Rules the CEL engine cannot evaluate are
        not enforced. Unknown kinds are kept as sent."""
        kind = self._kind(api_version, plural) if api_version else None
        if kind is None or self.crds is None:
            return obj, None
        stored = self.crds.with_defaults({**obj, "apiVersion": api_version, "kind": kind})
        problems = [
            p for p in self.crds.problems(stored, old) if not p.startswith("unchecked rule")
        ]
        if problems:
            name = (obj.get("metadata") or {}).get("name", "")
            group = api_version.rpartition("/")[0]
            return obj, f'{kind}.{group} "{name}" is invalid: ' + "; ".join(problems)
        return stored, None

    @staticmethod
    def _split(group_plural: str) -> tuple[str, str]:
        group, _, plural = group_plural.rpartition("/")
        return group, plural

    def _commit(self, group_plural: str, key: tuple[str, str], obj: dict, event: str) -> dict:
        self.revision += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.revision)
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta.setdefault("generation", 1)
        self.objects.setdefault(self._split(group_plural), {})[key] = obj
        self._record(group_plural, event, obj)
        return copy.deepcopy(obj)

    def _record(self, group_plural: str, event: str, obj: dict) -> None:
        self._last_event[group_plural] = self.revision
        entry = (self.revision, group_plural, event, "", copy.deepcopy(obj))
        self.log.append(entry)
        for queue in self._watchers:
            queue.put_nowait(entry)

    @staticmethod
    def _parse(path: str) -> tuple[str, str, str, str, str] | None:
        """(group, plural, namespace, name, subresource) of a REST path."""
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, rest = parts[1], parts[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return None
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return group, plural, namespace, name, sub

    @staticmethod
    def _status(code: int, message: str) -> web.Response:
        reason = {
            400: "BadRequest",
            401: "Unauthorized",
            404: "NotFound",
            409: "Conflict",
            410: "Gone",
            422: "Invalid",
            429: "TooManyRequests",
        }.get(code, "InternalError")
        return web.json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code,
            },
            status=code,
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = None
        if request.can_read_body:
            text = await request.text()
            body = json.loads(text) if text else None
        self.requests.append(
            Request(
                request.method,
                request.path,
                dict(request.query),
                body,
                request.content_type,
                time.time(),
            )
        )
        if request.method in WRITES:
            self._write_log.append(self.requests[-1])
        logged = self.requests[-1]
        try:
            response = await self._serve(request, body)
        except web.HTTPException as refused:
            logged.status = refused.status
            raise
        logged.status = response.status
        return response

    async def _serve(self, request: web.Request, body: Any) -> web.StreamResponse:
        if request.path == "/_emulator/writes":
            # Not Kubernetes: lets a benchmark in another process read when writes arrived,
            # from the `after`-th on, so polling a long run stays cheap for both sides.
            after = int(request.query.get("after", "0"))
            return web.json_response(
                [
                    {
                        "method": r.method,
                        "path": r.path,
                        "at": r.at,
                        # Whether it wrote a nomination (the controller's writes).
                        "nominates": bool(
                            ((r.body or {}).get("status") or {}).get("nominatedClusterNames")
                        ),
                    }
                    for r in self._write_log[after:]
                ]
            )
        while self.stalled:
            await asyncio.sleep(0.02)
        while any(m == request.method and part in request.path for m, part in self.hung):
            if request.transport is None or request.transport.is_closing():
                self.abandoned.append(
                    Request(request.method, request.path, dict(request.query), None, "")
                )
                raise web.HTTPServiceUnavailable()  # nobody reads it
            await asyncio.sleep(0.02)
        if self.down:
            raise web.HTTPServiceUnavailable()
        if (
            self.required_token is not None
            and request.headers.get("Authorization") != f"Bearer {self.required_token}"
        ):
            return self._status(401, "Unauthorized")
        for fault in self.faults:
            if (
                fault.remaining > 0
                and fault.method == request.method
                and fault.path_part in request.path
            ):
                fault.remaining -= 1
                if fault.status == 409:
                    self._moved_on(request.path)
                return self._status(fault.status, "injected failure")
        if request.path == "/version":
            return web.json_response({"gitVersion": self.version})
        if request.path in ("/readyz", "/livez", "/healthz"):
            return web.Response(text="ok")
        parsed = self._parse(request.path)
        if parsed is None:
            return self._status(404, f"no route {request.path}")
        group, plural, namespace, name, sub = parsed
        gp = f"{group}/{plural}" if group else plural
        segments = request.path.split("/")
        api_version = f"{group}/{segments[3]}" if group else "v1"
        store = self.objects.setdefault((group, plural), {})
        with_status = has_status_subresource(group, plural)
        if request.method == "GET" and (gp, sub) == ("pods", "log") and name:
            return self._log(store.get((namespace, name)), name, request.query)
        if sub and (sub != "status" or not with_status):
            return self._status(404, f"the server could not find {plural}/{sub}")
        if request.method == "GET" and not name:
            if request.query.get("watch") in ("true", "1"):
                return await self._watch(request, gp, namespace)
            try:
                chosen = _selected(request.query, gp)
            except ValueError as exc:
                return self._status(400, str(exc))
            keys = [
                k
                for k in sorted(store)
                if (not namespace or k[0] == namespace) and chosen(store[k])
            ]
            # limit/continue as the API server pages: the token is where the page ended.
            start = int(request.query.get("continue") or 0)
            limit = int(request.query.get("limit") or 0) or len(keys)
            items = [copy.deepcopy(store[k]) for k in keys[start : start + limit]]
            meta: dict[str, Any] = {"resourceVersion": str(self.revision)}
            if start + limit < len(keys):
                meta["continue"] = str(start + limit)
            return web.json_response({"kind": "List", "items": items, "metadata": meta})
        key = (namespace, name)
        if request.method == "GET":
            return (
                web.json_response(store[key])
                if key in store
                else self._status(404, f"{plural} {name} not found")
            )
        if request.method == "POST":
            if name:
                return self._status(405, "method not allowed")
            meta = body.setdefault("metadata", {})
            if namespace:
                meta["namespace"] = namespace
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            key = (meta.get("namespace", ""), meta["name"])
            if key in store:
                return self._status(409, f"{plural} {meta['name']} already exists")
            for server_field in ("resourceVersion", "uid", "generation", "creationTimestamp"):
                meta.pop(server_field, None)
            if with_status:
                body.pop("status", None)  # only /status writes it
            body, error = self._admit(api_version, plural, body, None)
            if plural == "customresourcedefinitions" and not error:
                self._serve_crd(body)
            rule = self.rules.get((gp, ""))
            error = error or (rule(None, body) if rule is not None else None)
            if error:
                return self._status(422, error)
            return web.json_response(self._commit(gp, key, body, "ADDED"), status=201)
        if key not in store:
            return self._status(404, f"{plural} {name} not found")
        old = store[key]
        if request.method == "DELETE":
            wanted = (body or {}).get("preconditions") or {}
            for precondition in ("resourceVersion", "uid"):
                if wanted.get(precondition) and wanted[precondition] != old["metadata"].get(
                    precondition
                ):
                    return self._status(409, f"Precondition failed: {precondition} differs")
            self.remove(gp, name, namespace)
            return web.json_response(old)
        if request.method == "PUT":
            sent = copy.deepcopy(body or {})
        elif request.method == "PATCH":
            if request.content_type != "application/merge-patch+json":
                return self._status(415, f"unsupported patch type {request.content_type}")
            sent = merge_patch(old, body or {})
        else:
            return self._status(405, "method not allowed")
        # A resourceVersion in what was sent is a precondition (for a patch too: the patched
        # object carries it); none means an unconditional write, which CRDs allow.
        given = (sent.get("metadata") or {}).get("resourceVersion")
        if given and given != old["metadata"]["resourceVersion"]:
            return self._status(
                409, f"Operation cannot be fulfilled on {plural} {name}: {CONFLICT}"
            )
        new, error = self._admit(
            api_version, plural, self._prepare_update(old, sent, sub, with_status), old
        )
        rule = self.rules.get((gp, sub))
        error = error or (rule(old, new) if rule is not None else None)
        if error:
            return self._status(422, error)
        if _content(new) == _content(old):
            return web.json_response(copy.deepcopy(old))  # nothing changed: nothing stored
        return web.json_response(self._commit(gp, key, new, "MODIFIED"))

    @staticmethod
    def _prepare_update(old: dict, sent: dict, sub: str, with_status: bool) -> dict:
        """The object an update stores, as the registry's strategies make it."""
        if sub == "status":
            new = copy.deepcopy(old)
            if "status" in sent:
                new["status"] = sent["status"]
            else:
                new.pop("status", None)
            return new
        new = sent
        meta = new.setdefault("metadata", {})
        for server_field in ("uid", "creationTimestamp", "generation", "resourceVersion"):
            if server_field in old["metadata"]:
                meta[server_field] = old["metadata"][server_field]
        if with_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if _spec_part(new) != _spec_part(old):
            meta["generation"] = int(old["metadata"].get("generation") or 1) + 1
        return new

    async def _watch(self, request: web.Request, gp: str, namespace: str) -> web.StreamResponse:
        raw_since = request.query.get("resourceVersion") or ""
        since = int(raw_since) if raw_since not in ("", "0") else 0
        # With no timeoutSeconds a real server picks one of 30-60 minutes.
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)

        async def send(event: dict) -> None:
            await response.write((json.dumps(event) + "\n").encode())

        def gone(message: str) -> dict:
            return {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": 410,
                    "reason": "Expired",
                    "message": message,
                },
            }

        if since and since < self.compacted:
            await send(gone(f"too old resource version: {since} ({self.compacted})"))
            return response
        queue: asyncio.Queue = asyncio.Queue()
        self._watchers.append(queue)

        def wanted(entry: tuple[int, str, str, str, dict]) -> bool:
            rev, plural, _, _, obj = entry
            return (
                rev > since
                and plural == gp
                and (not namespace or obj["metadata"].get("namespace") == namespace)
            )

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        # Bookmarks: roughly every bookmark_interval, and 2 s before the deadline, so that a
        # client's next watch starts close to now.
        next_bookmark = min(loop.time() + self.bookmark_interval, deadline - 2)
        try:
            if since:
                backlog = [{"type": e[2], "object": e[4]} for e in self.log if wanted(e)]
            else:
                group, _, plural = gp.rpartition("/")
                since = self.revision
                backlog = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for (ns, _), o in sorted(self.objects.get((group, plural), {}).items())
                    if not namespace or ns == namespace
                ]
            for event in backlog:
                await send(event)
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                wake = min(deadline, next_bookmark) if bookmarks else deadline
                try:
                    entry = await asyncio.wait_for(queue.get(), max(wake - now, 0))
                except TimeoutError:
                    if bookmarks and loop.time() >= next_bookmark:
                        next_bookmark = (
                            loop.time() + self.bookmark_interval
                            if loop.time() < deadline - 2
                            else deadline + 1
                        )
                        last = self._last_event.get(gp)
                        if last is not None:  # the cacher bookmarks only after an event
                            await send(
                                {
                                    "type": "BOOKMARK",
                                    "object": {"metadata": {"resourceVersion": str(last)}},
                                }
                            )
                    continue
                if entry is None:
                    break
                if entry == "GONE":
                    await send(gone("the watch's history was compacted"))
                    break
                if wanted(entry):
                    await send({"type": entry[2], "object": entry[4]})
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.remove(queue)
        return response


async def _serve(names: list[str], out: str, schemas: bool) -> None:
    emulators = {name: Emulator(name, crds=served_crds() if schemas else None) for name in names}
    urls = {name: await e.start() for name, e in emulators.items()}
    with open(out, "w") as handle:
        json.dump(urls, handle)
    await asyncio.Event().wait()


if __name__ == "__main__":
    # python -m tests.helpers.kube_emulator [--no-schemas] OUT.json NAME... : serve one emulator per
    # name until killed, their URLs written to OUT.json (the controller benchmark runs them
    # apart). --no-schemas keeps custom resources as sent: the CEL rules cost ~30 ms a write
    # in Python (kube-apiserver spends well under 1 ms), which would make a benchmark of
    # the controller a benchmark of the emulator; the tests check the objects' validity.
    import sys

    args = sys.argv[1:]
    checked = "--no-schemas" not in args
    args = [a for a in args if a != "--no-schemas"]
    asyncio.run(_serve(args[1:], args[0], checked))
