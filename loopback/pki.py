"""A control plane's own keys and certificates: a cluster CA, the API server's serving
certificate, one client certificate per identity, the service-account signing key, and the
front-proxy CA the aggregator uses to call Kueue's visibility API server (the layout kubeadm
writes, `kubeadm init phase certs`, Kubernetes v1.36)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for any CI run or a working day; a fleet lives as long as its state folder.
VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class Identity:
    """Who a client certificate says it is: the API server's x509 authenticator takes the
    common name as the user name and each organisation as a group."""

    file: str
    user: str
    groups: tuple[str, ...] = ()


def _name(common: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class Authority:
    """A CA kept as ca.crt/ca.key (or another stem) in a folder."""

    def __init__(self, folder: Path, stem: str, common_name: str) -> None:
        self.cert_path = folder / f"{stem}.crt"
        self.key_path = folder / f"{stem}.key"
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        _write_key(self.key_path, self.key)
        _write_cert(self.cert_path, self.cert)

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        folder: Path,
        stem: str,
        common_name: str,
        orgs: tuple[str, ...] = (),
        *,
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
    ) -> tuple[Path, Path]:
        """A leaf certificate: a server one when it has names or addresses, else a client one."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        server = bool(server_names or server_ips)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, orgs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in server_ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = folder / f"{stem}.crt", folder / f"{stem}.key"
        _write_key(key_path, key)
        _write_cert(cert_path, cert)
        return cert_path, key_path


def service_account_key(folder: Path) -> tuple[Path, Path]:
    """The key pair the API server signs service-account tokens with (sa.key, sa.pub)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = folder / "sa.key", folder / "sa.pub"
    _write_key(private, key)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public
