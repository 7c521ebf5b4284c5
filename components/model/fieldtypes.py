"""Constrained value types of the stack file, as pydantic annotated types.

Each type checks a value the way the API server (or the tool that receives it) would, and
refuses it with a message and a fix in the project's form: `fail(message, fix)`. Each also
carries the JSON Schema that editors use to check stack files as they are typed
(components/cli/schema.py).

Sources of the rules:
- names and labels: Kubernetes apimachinery validation (IsDNS1123Label, IsDNS1123Subdomain,
  IsQualifiedName, IsValidLabelValue);
- quantities: apimachinery resource.Quantity syntax; Kueue counts quotas as int64 (CPU in
  thousandths), so larger values overflow;
- durations: Go's time.ParseDuration, which Kueue uses for its configuration;
- image references: the distribution/reference grammar that container runtimes use.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from controller.api import DURATION_FIX as DISPATCH_DURATION_FIX
from controller.api import DURATION_PATTERN as DISPATCH_DURATION
from controller.api import is_duration as is_dispatch_duration
from controller.api import is_loopback_host, split_url

# --- failing in the project's form -----------------------------------------------------


def fail(message: str, fix: str = "") -> PydanticCustomError:
    """A validation error whose message and fix reach the user as written."""
    return PydanticCustomError("fleet", "{message}", {"message": message, "fix": fix})


def show(value: Any, limit: int = 80) -> str:
    """A value as it can be shown in one line: control characters escaped, long ones cut."""
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


def _plain_text(value: Any) -> str:
    """A scalar as text: strings as they are, whole numbers written out; nothing else."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
    else:
        raise fail(f"expected a string, got {kind_of(value)}", "write a plain value")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise fail(
            f"'{show(text)}' holds a line break or another control character",
            "remove it: write the value on one line",
        )
    return text


def _typed(
    check: Callable[[Any], Any], schema: dict[str, Any], python: type = str
) -> Any:  # an Annotated type
    return Annotated[python, BeforeValidator(check), WithJsonSchema(schema)]


# --- text and names ----------------------------------------------------------------------

Text = _typed(_plain_text, {"type": "string"})

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

DNS_LABEL_FIX = (
    "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
)
DNS_SUBDOMAIN_FIX = (
    "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
)
LABEL_KEY_FIX = "use [prefix/]name, name at most 63 letters, digits, '-', '_', '.'"
LABEL_VALUE_FIX = "use at most 63 letters, digits, '-', '_', '.'"


def is_dns_label(text: str) -> bool:
    return len(text) <= 63 and DNS_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    return len(text) <= 253 and DNS_SUBDOMAIN.fullmatch(text) is not None


def is_label_key(text: str) -> bool:
    prefix, slash, name = text.rpartition("/")
    if slash and not (prefix and is_dns_subdomain(prefix)):
        return False
    return len(name) <= 63 and LABEL_NAME.fullmatch(name) is not None


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and LABEL_VALUE.fullmatch(text) is not None


def dns_label(what: str) -> Any:
    def check(value: Any) -> str:
        text = value if isinstance(value, str) else _plain_text(value)
        if not is_dns_label(text):
            raise fail(f"{what} '{show(text)}' is not a valid DNS label", DNS_LABEL_FIX)
        return text

    return _typed(check, {"type": "string", "pattern": f"^{DNS_LABEL.pattern}$", "maxLength": 63})


def dns_subdomain(what: str) -> Any:
    def check(value: Any) -> str:
        text = value if isinstance(value, str) else _plain_text(value)
        if not is_dns_subdomain(text):
            raise fail(
                f"{what} '{show(text)}' is not a valid Kubernetes object name", DNS_SUBDOMAIN_FIX
            )
        return text

    return _typed(
        check, {"type": "string", "pattern": f"^{DNS_SUBDOMAIN.pattern}$", "maxLength": 253}
    )


def _label_key(value: Any) -> str:
    text = value if isinstance(value, str) else _plain_text(value)
    if not is_label_key(text):
        raise fail(f"'{show(text)}' is not a valid label key", LABEL_KEY_FIX)
    return text


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        text = str(value)
    elif isinstance(value, str):
        text = value
    else:
        raise fail(
            f"expected a plain value (string or number), got {kind_of(value)}",
            "write the label's value as text",
        )
    if not is_label_value(text):
        raise fail(f"'{show(text)}' is not a valid label value", LABEL_VALUE_FIX)
    return text


LabelKey = _typed(_label_key, {"type": "string", "maxLength": 317})
LabelValue = _typed(
    _label_value,
    {"type": ["string", "number", "boolean"], "pattern": f"^{LABEL_VALUE.pattern}$"},
)
# Kubernetes resource names (cpu, memory, nvidia.com/gpu) have the label-key syntax.
ResourceName = _typed(_label_key, {"type": "string"})

# --- quantities --------------------------------------------------------------------------

QUANTITY = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[mkMGTPE])?")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
QUANTITY_SCHEMA_PATTERN = r"^\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[mkMGTPE])?$"
# Kueue v0.19.2 counts a quota of cpu in thousandths and anything else in units, in an
# int64: pkg/resources/amount.go AmountFromQuantity makes a cpu quota of MaxInt64/1000
# cores or more, or another of MaxInt64 or more, Unlimited (not the number written).
INT64_MAX = 2**63 - 1


def quantity_limit(resource: str | None) -> Decimal:
    """The first quota of `resource` Kueue no longer counts as written (None: any resource;
    the largest limit, what a field that does not know its resource can check)."""
    return Decimal(INT64_MAX // 1000) if resource == "cpu" else Decimal(INT64_MAX)


QUANTITY_FIX = "write it like 8, 500m or 32Gi"


def quantity_value(text: str) -> Decimal | None:
    """The value of a Kubernetes quantity, or None when `text` is not one."""
    match = QUANTITY.fullmatch(text)
    if match is None:
        return None
    sign, number, suffix = match.groups()
    try:
        value = Decimal(number)
        if suffix in _BINARY:
            value *= Decimal(1024) ** _BINARY[suffix]
        elif suffix in _DECIMAL:
            value = value.scaleb(_DECIMAL[suffix])
        elif suffix:
            exponent = int(suffix[1:])
            if abs(exponent) > 64:
                return Decimal("Infinity") if exponent > 0 else Decimal(0)
            value = value.scaleb(exponent)
    except (InvalidOperation, ValueError):
        return None
    return -value if sign == "-" else value


def quantity_problem(value: Any) -> tuple[str, str] | None:
    """(message, fix) when `value` is not a usable quota quantity, else None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return (
            f"expected a quantity such as 8, 500m or 32Gi, got {kind_of(value)}",
            QUANTITY_FIX,
        )
    if isinstance(value, float) and not math.isfinite(value):
        return f"'{value}' is not a finite number", QUANTITY_FIX
    text = repr(value) if isinstance(value, float) else str(value)
    number = quantity_value(text)
    if number is None:
        return f"'{show(text)}' is not a Kubernetes quantity", QUANTITY_FIX
    if number < 0:
        return f"'{show(text)}' is negative", "quotas and limits are 0 or more"
    if number >= quantity_limit(None):
        return (
            f"'{show(text)}' is too large: Kueue counts quotas in 64-bit integers",
            f"use less than {quantity_limit(None):.2E} (about 8Ei)",
        )
    if 0 < number < Decimal("0.001"):
        return f"'{show(text)}' is below 1m, the finest unit Kueue counts", QUANTITY_FIX
    return None


def as_quantity(value: Any, label: str = "") -> str:
    problem = quantity_problem(value)
    if problem is not None:
        message, fix = problem
        raise fail(f"{label} {message}" if label else message, fix)
    return repr(value) if isinstance(value, float) else str(value)


QUANTITY_SCHEMA = {
    "anyOf": [
        {"type": "string", "pattern": QUANTITY_SCHEMA_PATTERN},
        {"type": "number", "minimum": 0},
    ]
}
Quantity = _typed(as_quantity, QUANTITY_SCHEMA)

# --- durations, versions, booleans, numbers ----------------------------------------------

DURATION = re.compile(r"0|(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")
_UNITS_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}
_UNITS_NS["h"] = 3600 * 10**9
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
DURATION_FIX = "write it the Go way, for example 30s, 5m, 1h30m"


def _duration(value: Any) -> str:
    if value == 0 and not isinstance(value, bool):
        return "0"
    text = _plain_text(value)
    if not DURATION.fullmatch(text):
        raise fail(f"'{show(text)}' is not a duration", DURATION_FIX)
    total = sum(Decimal(n) * _UNITS_NS[unit] for n, unit in _DURATION_PART.findall(text))
    if total > 2**63 - 1:
        raise fail(
            f"'{show(text)}' is longer than Go can represent (about 290 years)", DURATION_FIX
        )
    return text


def duration_seconds(text: str) -> float:
    """A Duration (as validated) in seconds: "15m" is 900.0."""
    total = sum(Decimal(n) * _UNITS_NS[unit] for n, unit in _DURATION_PART.findall(text))
    return float(total / 10**9)


def duration_is_zero(text: str) -> bool:
    """Whether a Duration (as validated) is zero long: "0", "0s", "0h0m"."""
    return all(Decimal(n) == 0 for n, _unit in _DURATION_PART.findall(text))


Duration = _typed(_duration, {"type": "string", "pattern": f"^({DURATION.pattern})$"})


def _dispatch_duration(value: Any) -> str:
    text = _plain_text(value)
    if not is_dispatch_duration(text):
        raise fail(
            f"'{show(text)}' is not a duration the dispatcher reads",
            f"write {DISPATCH_DURATION_FIX}: the DispatchPolicy it becomes takes no other",
        )
    return text


# A duration the dispatcher reads (the stack's dispatcher.policy becomes a DispatchPolicy):
# exactly the controller's syntax and its CRD's pattern, never Go's wider one.
DispatchDuration = _typed(_dispatch_duration, {"type": "string", "pattern": DISPATCH_DURATION})

K8S_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def _version(value: Any) -> str:
    if isinstance(value, float):
        whole, _, fraction = repr(value).partition(".")
        guess = f"{whole}.{fraction.ljust(2, '0')}" if fraction.isdigit() else repr(value)
        raise fail(
            f"the version was read as the number {value!r}: YAML turns an unquoted 1.30 into 1.3",
            f'quote it, for example kubernetesVersion: "{guess}"',
        )
    text = _plain_text(value)
    match = K8S_VERSION.fullmatch(text)
    if match is None:
        raise fail(
            f"'{show(text)}' is not a Kubernetes version",
            'write it as major.minor, for example "1.36"',
        )
    return f"{int(match.group(1))}.{int(match.group(2))}"


KubernetesVersion = _typed(_version, {"type": "string", "pattern": f"^{K8S_VERSION.pattern}$"})


def minor_tuple(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor)


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise fail(f"expected true or false, got {show(repr(value))}", "write true or false")


StrictBool = _typed(_bool, {"type": "boolean"}, bool)


def int_range(low: int, high: int) -> Any:
    def check(value: Any) -> int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str) and re.fullmatch(r"[+-]?\d{1,19}", value.strip()):
            number = int(value.strip())
        if number is None:
            raise fail(
                f"expected a whole number, got {show(repr(value))}",
                f"use a value from {low} to {high}",
            )
        if not low <= number <= high:
            raise fail(f"{number} is out of range", f"use a value from {low} to {high}")
        return number

    return _typed(check, {"type": "integer", "minimum": low, "maximum": high}, int)


# --- images, URLs, paths, cloud names ----------------------------------------------------

# distribution/reference v0.6.0 regexp.go (the grammar containerd and Kubernetes parse
# image references with): path components, a domain of DNS labels or a bracketed IPv6
# address with an optional port, a tag, a digest.
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = f"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})(?::[0-9]+)?"
_REPOSITORY = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>{_REPOSITORY})(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
REPOSITORY = re.compile(_REPOSITORY)
# The digests a runtime verifies (opencontainers/go-digest v1.0.0 algorithm.go: the
# algorithms containerd registers, each with its length of lower-case hex); reference.Parse
# refuses any other (digest.Parse, Validate).
DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
# reference.go RepositoryNameTotalLengthMax, on the path after the domain.
NAME_MAX = 255
IMAGE_FIX = (
    "write it as [registry/]repository[:tag][@sha256:digest], for example "
    "registry.k8s.io/kueue/kueue:v0.19.2"
)


def _image_problem(text: str) -> str | None:
    """Why distribution/reference v0.6.0 `Parse` refuses `text`, None when it takes it."""
    match = IMAGE_REFERENCE.fullmatch(text)
    if match is None:
        if text and IMAGE_REFERENCE.fullmatch(text.lower()):
            return f"'{show(text)}' has upper-case letters in its repository name"
        return f"'{show(text)}' is not a container image reference"
    name = match.group("name")
    if len(name.split("/", 1)[-1]) > NAME_MAX:
        return f"'{show(text)}' has a repository name longer than {NAME_MAX} characters"
    digest = match.group("digest")
    if digest:
        algorithm, _, encoded = digest.partition(":")
        if algorithm not in DIGEST_HEX:
            return (
                f"'{show(text)}' has a {algorithm} digest, which container runtimes do not "
                f"verify (they take {', '.join(DIGEST_HEX)})"
            )
        if not re.fullmatch(f"[a-f0-9]{{{DIGEST_HEX[algorithm]}}}", encoded):
            return (
                f"'{show(text)}' has a {algorithm} digest that is not "
                f"{DIGEST_HEX[algorithm]} lower-case hex digits"
            )
    return None


def _image(value: Any) -> str:
    text = _plain_text(value)
    problem = _image_problem(text)
    if problem:
        raise fail(problem, IMAGE_FIX)
    return text


def _repository(value: Any) -> str:
    text = _plain_text(value).rstrip("/")
    if not REPOSITORY.fullmatch(text) or len(text) > 255:
        raise fail(
            f"'{show(text)}' is not a registry repository",
            "write it as host[:port]/path without a tag, for example "
            "europe-docker.pkg.dev/PROJECT/REPO",
        )
    return text


Image = _typed(
    _image,
    {
        "type": "string",
        "pattern": "^" + re.sub(r"\?P<\w+>", "", IMAGE_REFERENCE.pattern) + "$",
    },
)
Repository = _typed(_repository, {"type": "string"})


def _https_url(value: Any) -> str:
    text = _plain_text(value)
    if not re.fullmatch(r"https://[A-Za-z0-9.\-\[\]:]+(:\d+)?(/\S*)?", text):
        raise fail(
            "the server must be an https:// URL",
            "Kueue refuses plain-http and insecure worker connections: write https://HOST[:PORT]",
        )
    return text


HttpsUrl = _typed(_https_url, {"type": "string", "pattern": "^https://"})


# A registry as image references name it (distribution/reference v0.6.0 regexp.go,
# domainAndPort): DNS labels or a bracketed IPv6 address, and an optional port.
REGISTRY_HOST = re.compile(rf"{_DOMAIN}")
# Docker Hub's other names: containerd looks a Docker Hub image's mirrors up under
# docker.io only (containerd v2.3.4 core/remotes/docker/config/hosts.go, ConfigureHosts:
# the directory of the image's domain, which reference normalisation makes docker.io).
DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io")
REGISTRY_FIX = (
    "write the registry as image names start with it: registry.k8s.io, docker.io, HOST:PORT "
    "or [IPv6]:PORT"
)


def _port_problem(port: str | None) -> str | None:
    if port and not 1 <= int(port) <= 65535:
        return f"port {port} is not a TCP port"
    return None


def _canonical_registry_host(text: str) -> str:
    """The registry host as image references name it: lower case (DNS names are, and the
    fleet's images are written so), no :443 (https's own port, which no reference writes),
    an IPv6 address in its RFC 5952 form ([fd00::1], not [FD00:0::1])."""
    host, port = text.lower(), ""
    if host.startswith("["):
        address, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
        try:
            host = f"[{ipaddress.IPv6Address(address).compressed}]"
        except ValueError:
            host = f"[{address}]"  # not an address: left as written, for the grammar to judge
    elif ":" in host:
        host, _, port = host.partition(":")
    return host if port in ("", "443") else f"{host}:{port}"


def _registry_host(value: Any) -> str:
    """A mirror's key: the directory containerd v2.3.4 looks hosts.toml up in is the image
    reference's host exactly as written (core/remotes/docker/config/hosts.go,
    HostDirFromRoot; config_unix.go hostPaths: `host_port_` or `host`), so a key spelt
    otherwise than the images spell their registry is never read."""
    text = _plain_text(value)
    if not REGISTRY_HOST.fullmatch(text):
        raise fail(f"'{show(text)}' is not a registry host", REGISTRY_FIX)
    canonical = _canonical_registry_host(text)
    if canonical in DOCKER_HUB_ALIASES:
        raise fail(
            f"'{text}' is Docker Hub under another name, which containerd never looks "
            "mirrors up by: a Docker Hub image's registry is docker.io",
            "write docker.io",
        )
    if canonical != text:
        raise fail(
            f"'{show(text)}' is not how image references name this registry, and containerd "
            "looks a mirror up by the image's host as written: this key would never be read",
            f"write the host as the images name it: {canonical}",
        )
    port = text.rsplit("]", 1)[-1].partition(":")[2] or None
    if problem := _port_problem(port):
        raise fail(f"'{show(text)}': {problem}", REGISTRY_FIX)
    return text


MIRROR_FIX = "write it as http://HOST[:PORT] or https://HOST[:PORT], as the kind nodes reach it"


def _mirror_url(value: Any) -> str:
    """A mirror as containerd takes it in hosts.toml: `[host."<url>"]`, read with Go's
    url.Parse (containerd v2.3.4 core/remotes/docker/config/hosts.go, parseHostConfig: its
    scheme and host; a path stays, with /v2 added unless override_path). Go refuses what
    urlsplit here refuses (a port that is not a number, an IPv6 address without brackets),
    and containerd drops what it does not use (credentials, a query): refused rather than
    lost. Inside a kind node, a loopback address is the node itself (so are 0.0.0.0,
    ::ffff:127.0.0.1 and localhost.: controller/hosts.py, is_loopback_host)."""
    text = _plain_text(value)
    url = split_url(text)
    if url is None or url.scheme not in ("http", "https") or not url.hostname or " " in text:
        raise fail(f"'{show(text)}' is not a registry mirror URL", MIRROR_FIX)
    if ":" in url.hostname and "[" not in url.netloc:
        raise fail(
            f"'{show(text)}' has an IPv6 address without brackets",
            "write it as http://[ADDRESS]:PORT",
        )
    if url.username is not None or url.query or url.fragment:
        raise fail(
            f"'{show(text)}' has credentials, a query or a fragment, which containerd does not use",
            "give the mirror's scheme, host, port and path only",
        )
    if problem := _port_problem(str(url.port) if url.port is not None else None):
        raise fail(f"'{show(text)}': {problem}", MIRROR_FIX)
    if is_loopback_host(url.hostname):
        raise fail(
            f"'{show(text)}' is a loopback address, which inside a kind node is the node "
            "itself, not this machine",
            "give an address the nodes reach: a registry container on the kind network by "
            "its name (http://NAME:PORT), or this machine's address on that network",
        )
    return text


def _certificates_pem(value: Any) -> str:
    """One or more X.509 certificates in PEM, as containerd reads a host's `ca` file (Go's
    crypto/x509 CertPool.AppendCertsFromPEM: CERTIFICATE blocks; containerd v2.3.4
    core/remotes/docker/config/hosts.go, updateTLSConfigFromHost). Each block is parsed here:
    a pasted base64 string, a key or a cut-off block is refused now, not at the first pull."""
    from cryptography import x509

    if not isinstance(value, str):
        raise fail(
            "is not text", "paste the certificate's PEM text (-----BEGIN CERTIFICATE-----...)"
        )
    blocks = re.findall(
        r"-----BEGIN CERTIFICATE-----\s.*?-----END CERTIFICATE-----", value, re.DOTALL
    )
    if not blocks:
        raise fail(
            "holds no PEM certificate (no -----BEGIN CERTIFICATE----- block)",
            "paste the CA certificate's PEM text, header and footer lines included",
        )
    for number, block in enumerate(blocks, 1):
        try:
            x509.load_pem_x509_certificate(block.encode())
        except ValueError as exc:
            raise fail(
                f"certificate {number} of {len(blocks)} cannot be read: {show(exc)}",
                "paste the whole certificate, as `openssl x509 -in FILE` prints it",
            ) from None
    return value.strip() + "\n"


RegistryHost = _typed(_registry_host, {"type": "string"})
MirrorUrl = _typed(_mirror_url, {"type": "string", "pattern": "^https?://"})
CertificatesPem = _typed(
    _certificates_pem, {"type": "string", "pattern": "-----BEGIN CERTIFICATE-----"}
)


def _absolute_path(value: Any) -> str:
    text = _plain_text(value)
    if not text.startswith("/") or any(c.isspace() for c in text):
        raise fail(f"'{show(text)}' is not an absolute path", "write it like /plugins/bin/NAME")
    return text


AbsolutePath = _typed(_absolute_path, {"type": "string", "pattern": "^/\\S*$"})


def matching(pattern: str, what: str, fix: str) -> Any:
    compiled = re.compile(pattern)

    def check(value: Any) -> str:
        text = _plain_text(value)
        if not compiled.fullmatch(text):
            raise fail(f"'{show(text)}' is not a valid {what}", fix)
        return text

    return _typed(check, {"type": "string", "pattern": f"^(?:{pattern})$"})


GcpProject = matching(
    r"[a-z][a-z0-9-]{4,28}[a-z0-9]",
    "Google Cloud project ID",
    "use the project's ID (6 to 30 lower-case letters, digits and '-'), not its name",
)
GcpLocation = matching(
    r"[a-z]+-[a-z]+[0-9]+(-[a-z])?",
    "Google Cloud region or zone",
    "use a region such as europe-west4 or a zone such as europe-west4-a",
)
AwsRegion = matching(
    r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+",
    "AWS region",
    "use a region code such as eu-west-1",
)
MachineType = matching(
    r"[a-z0-9][a-z0-9-]*[a-z0-9]",
    "machine type",
    "use a Compute Engine machine type such as e2-standard-4",
)
InstanceType = matching(
    r"[a-z0-9][a-z0-9-]*\.[a-z0-9]+",
    "EC2 instance type",
    "use an instance type such as m5.xlarge",
)
