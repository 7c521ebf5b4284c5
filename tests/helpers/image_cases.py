"""Image references with the verdict of distribution/reference v0.6.0 `Parse` (and
go-digest v1.0.0 behind it), and registry mirror URLs with the verdict of Go's url.Parse
(how containerd v2.3.4 reads hosts.toml) and the project's own: the unit tier holds the
project's checks to them, and the real tier holds the Go parsers themselves to them
(tools/refcheck), so the two agree."""

from __future__ import annotations

HEX64 = "0123456789abcdef" * 4

# (reference, accepted by the parser)
CASES: tuple[tuple[str, bool], ...] = (
    ("busybox", True),
    ("busybox:1.36", True),
    ("registry.k8s.io/kueue/kueue:v0.19.2", True),
    (f"registry.k8s.io/kueue/kueue:v0.19.2@sha256:{HEX64}", True),
    (f"localhost:5001/mkf/dispatcher@sha256:{HEX64}", True),
    ("[fd00::1]:5000/mkf/dispatcher:v1", True),
    ("Registry.Example.com/team/app:v1", True),  # a domain may have capitals
    ("Team/app:v1", True),  # and the first of two components is read as a domain
    ("a.b/c__d/e---f/g.h:TAG_1.x", True),
    (f"x@sha384:{'a' * 96}", True),
    (f"x@sha512:{'a' * 128}", True),
    ("docker.io/" + "a" * 255, True),  # the limit is on the path after the domain
    ("Busybox", False),  # upper case in the repository
    ("team/App:v1", False),
    (f"x@sha256:{HEX64.upper()}", False),  # go-digest takes lower-case hex only
    (f"x@sha256:{HEX64[:-1]}", False),
    (f"x@sha384:{'a' * 64}", False),
    (f"x@md5:{'a' * 32}", False),  # an algorithm no runtime verifies
    ("a" * 256, False),
    ("app:", False),
    ("app:-v1", False),
    ("a//b", False),
    ("-app", False),
    ("[fd00::1/app", False),
    ("app@sha256:", False),
    ("", False),
)

# (mirror URL, Go's url.Parse takes it, the project takes it). The project refuses more than
# url.Parse: what containerd would parse and then fail on or drop (a port past 65535, an
# IPv6 address without brackets, credentials, a query) and a loopback address, which
# inside a kind node is the node itself; never less.
MIRROR_CASES: tuple[tuple[str, bool, bool], ...] = (
    ("http://mkf-registry:5000", True, True),
    ("https://mirror.example.com", True, True),
    ("https://mirror.example.com/v2", True, True),
    ("http://[fd00::1]:5000", True, True),
    ("http://10.89.0.2:5000", True, True),
    ("http://m:abc", False, False),
    ("http://[::1", False, False),
    ("http://a b", False, False),
    ("http://fd00::1:5000", False, False),
    ("http://m:99999", True, False),
    ("http://127.0.0.1:5001", True, False),
    ("http://localhost:5000", True, False),
    ("http://[::1]:5000", True, False),
    ("http://0.0.0.0:5000", True, False),  # unspecified: a connection to it is local
    ("http://[::ffff:127.0.0.1]:5000", True, False),  # IPv4-mapped loopback
    ("http://localhost.:5000", True, False),  # localhost, fully qualified
    ("http://user:secret@m:5000", True, False),
    ("http://m:5000?ns=docker.io", True, False),
    ("ftp://m", True, False),
    ("mkf-registry:5000", True, False),
)
