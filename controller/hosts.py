"""Hosts in URLs as their Go consumers read them: Kueue deciding whether it trusts a
worker's API server, Go's url.Parse taking a URL at all, and which hosts name the machine
itself. Pure (no Kubernetes client), so that the controller's settings and the stack's
model and checks (through controller/api/) share one reading."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def split_url(text: str) -> SplitResult | None:
    """`text` split as a URL, its port read; None where that fails (an unclosed IPv6
    bracket, a port that is not a number or past 65535), which Go's url.Parse refuses too
    (but for the port's range, which Go leaves to the dialer)."""
    try:
        url = urlsplit(text)
        url.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return None
    return url


def _has_control(text: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _valid_optional_port(port: str) -> bool:
    """Go's url.validOptionalPort: nothing, or ':' and digits (any number of them)."""
    return port == "" or (port[0] == ":" and all("0" <= c <= "9" for c in port[1:]))


def _go_url_host(server: str) -> str:
    """u.Host of Go's url.Parse(server) for an http(s) URL: "" where Go refuses the URL or
    finds no host (net/url url.go, parseHost; Go 1.26). Go refuses a control character
    anywhere, reads no scheme (so no host) after a leading space, and refuses a space in
    the host or a port that is not digits (from the first ':' unless in brackets); Python's
    urlsplit drops, strips or passes these, so they are looked for here."""
    if _has_control(server) or server[:1].isspace():
        return ""
    try:
        hostport = urlsplit(server).netloc.rpartition("@")[2]  # user info is not u.Host
    except ValueError:
        return ""  # an unclosed or misplaced IPv6 bracket
    if hostport.startswith("["):
        port = hostport[hostport.find("]") + 1 :]
    else:
        port = hostport[hostport.find(":") :] if ":" in hostport else ""
    if any(c.isspace() for c in hostport) or not _valid_optional_port(port):
        return ""
    return hostport


def _split_host_port(hostport: str) -> str | None:
    """Go's net.SplitHostPort, host part only; None where Go returns an error."""
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0 or hostport[end + 1 : end + 2] != ":":
            return None
        return hostport[1:end]
    if hostport.count(":") != 1:
        return None  # "missing port" or "too many colons"
    return hostport.split(":", 1)[0]


def is_go_ip(host: str) -> bool:
    """Go's net.ParseIP: dotted IPv4 (no leading zeros) or IPv6 without a zone."""
    if "%" in host:
        return False
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def server_host(server: str) -> str:
    """The host of an API server URL as Kueue takes it: lower-cased, the port and the
    brackets of an IPv6 address removed when Go's net.SplitHostPort would; "" where Go's
    url.Parse refuses the URL."""
    hostport = _go_url_host(server.lower())
    split = _split_host_port(hostport)
    return hostport if split is None else split


def kueue_trusts_server(server: str) -> bool:
    """Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
    isValidHostname: the URL's host (net.SplitHostPort, else the whole u.Host) must be an
    IP (net.ParseIP) or a DNS-1123 subdomain, else the MultiKueueCluster is inactive with
    "untrusted server endpoint". So `https://[::1]` (brackets, no port) is untrusted while
    `https://[::1]:6443` is trusted, and so is a URL url.Parse refuses (" https://w1:6443")."""
    host = server_host(server)
    if is_go_ip(host):
        return True
    return bool(host) and len(host) <= 253 and _DNS_SUBDOMAIN.fullmatch(host) is not None


def is_loopback_host(host: str) -> bool:
    """A host that names the machine itself: inside a pod, the pod; inside a kind node, the
    node. RFC 6761 reserves `localhost` and names under it (a trailing dot too: the same
    name, fully qualified) for the loopback address; 0.0.0.0 and :: reach it on Linux, and
    so does an IPv4-mapped loopback (::ffff:127.0.0.1)."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    if not is_go_ip(host):
        return False
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)
    return (
        address.is_loopback
        or address.is_unspecified
        or bool(mapped and (mapped.is_loopback or mapped.is_unspecified))
    )
