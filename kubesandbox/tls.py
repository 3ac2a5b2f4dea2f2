"""TLS for the sandbox: a self-signed CA and a server certificate for 127.0.0.1 / localhost.

kubectl (client-go) sends a bearer token only over TLS, so a token-protected sandbox must serve
HTTPS for kubectl to reach it. :func:`ensure_certificates` makes (or reuses, while still valid)
the files in one directory; clients trust ``ca.crt``:

    ca.crt      the CA certificate (what kubeconfigs and the portal trust)
    ca.key      its private key (0600)
    server.crt  the server certificate, signed by the CA; SANs IP 127.0.0.1, IP ::1, DNS localhost
    server.key  its private key (0600)

Several sandboxes may share one directory (``make run`` starts one per demo cluster): a lock
file serializes the check-and-create, so they all end up with the same CA.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import ipaddress
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
SERVER_CERT = "server.crt"
SERVER_KEY = "server.key"

# Long enough for any demo; certificates with less than RENEW_BEFORE left are made anew.
CA_LIFETIME = datetime.timedelta(days=3650)
SERVER_LIFETIME = datetime.timedelta(days=365)
RENEW_BEFORE = datetime.timedelta(days=7)
# Clocks of clients and server may differ a little.
BACKDATE = datetime.timedelta(minutes=5)

SERVER_IPS = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))
SERVER_DNS = ("localhost",)


@dataclass(frozen=True)
class TlsFiles:
    """Where the CA and the server certificate of one directory are."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / CA_CERT

    @property
    def ca_key(self) -> Path:
        return self.directory / CA_KEY

    @property
    def server_cert(self) -> Path:
        return self.directory / SERVER_CERT

    @property
    def server_key(self) -> Path:
        return self.directory / SERVER_KEY

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()

    def server_context(self) -> ssl.SSLContext:
        """The server side: TLS 1.2 or later with the server certificate and key."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.server_cert, self.server_key)
        return context


def ensure_certificates(directory: str | os.PathLike[str]) -> TlsFiles:
    """Make the CA and the server certificate in ``directory``, or keep those already there
    when they are valid (readable, matching keys, signed by the CA, the server certificate for
    the sandbox's addresses, not about to expire). A new CA means a new server certificate."""
    files = TlsFiles(Path(directory))
    files.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(files.directory / ".lock"):
        now = _now()
        ca = _load_valid_ca(files, now)
        if ca is None:
            ca = _new_ca(now)
            _write_key(files.ca_key, ca[1])
            _write_cert(files.ca_cert, ca[0])
            server = None
        else:
            server = _load_valid_server(files, ca[0], now)
        if server is None:
            cert, key = _new_server(ca, now)
            _write_key(files.server_key, key)
            _write_cert(files.server_cert, cert)
    return files


# -- checking what is there -----------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _usable(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - RENEW_BEFORE > now


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def _load(
    cert_path: Path, key_path: Path
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not _same_key(cert, key):
        return None
    return cert, key


def _load_valid_ca(
    files: TlsFiles, now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    loaded = _load(files.ca_cert, files.ca_key)
    if loaded is None or not _usable(loaded[0], now):
        return None
    try:
        constraints = loaded[0].extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return None
    return loaded if constraints.ca else None


def _load_valid_server(
    files: TlsFiles, ca_cert: x509.Certificate, now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    loaded = _load(files.server_cert, files.server_key)
    if loaded is None or not _usable(loaded[0], now):
        return None
    cert = loaded[0]
    try:
        cert.verify_directly_issued_by(ca_cert)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return None
    ips = set(names.get_values_for_type(x509.IPAddress))
    dns = set(names.get_values_for_type(x509.DNSName))
    if not (set(SERVER_IPS) <= ips and set(SERVER_DNS) <= dns):
        return None
    return loaded


# -- making new ones ------------------------------------------------------------------------


def _new_ca(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-sandbox CA")])
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_server(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey], now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key()
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    names = [x509.IPAddress(ip) for ip in SERVER_IPS] + [x509.DNSName(d) for d in SERVER_DNS]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-sandbox")]))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + SERVER_LIFETIME, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


# -- files ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Readers (another sandbox, a client) never see half a file; the mode is set before any
    byte is written, also when an older file of another mode is replaced."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    os.replace(temporary, path)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_atomically(path, data, 0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    _write_atomically(path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
