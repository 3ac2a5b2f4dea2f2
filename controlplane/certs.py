"""Certificates and keys of one control plane run: a CA, the API server's serving certificate,
client certificates, the service-account signing key and the webhooks' serving certificate.

All files live in one private folder (0700, keys 0600) and are made fresh for every run.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LIFETIME = datetime.timedelta(days=2)
BACKDATE = datetime.timedelta(minutes=5)
LOOPBACK = ipaddress.ip_address("127.0.0.1")
# The in-cluster address of the kubernetes Service (first of --service-cluster-ip-range).
SERVICE_IP = ipaddress.ip_address("10.0.0.1")


def _write(path: Path, data: bytes, mode: int) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class Authority:
    """A CA that signs the run's certificates, and writes each as ``<name>.crt`` / ``.key``."""

    def __init__(self, directory: Path):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpu-quota-portal test CA")])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + LIFETIME)
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
        self.ca_file = _write(
            directory / "ca.crt", self.cert.public_bytes(serialization.Encoding.PEM), 0o644
        )

    @property
    def ca_pem(self) -> bytes:
        return self.ca_file.read_bytes()

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organizations: tuple[str, ...] = (),
        server: bool = False,
        dns: tuple[str, ...] = (),
        ips: tuple = (),
    ) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + LIFETIME)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(i) for i in ips]
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        crt = _write(
            self.directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644
        )
        key_file = _write(self.directory / f"{name}.key", _key_pem(key), 0o600)
        return crt, key_file

    def serving(self, name: str, *, dns: tuple[str, ...] = ()) -> tuple[Path, Path]:
        return self.issue(
            name,
            common_name=name,
            server=True,
            dns=("localhost", *dns),
            ips=(LOOPBACK, SERVICE_IP),
        )

    def service_account_keys(self) -> tuple[Path, Path]:
        """The key pair the API server signs service-account tokens with (RSA, as the token
        controller and every client expect)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = _write(self.directory / "sa.key", _key_pem(key), 0o600)
        public = _write(
            self.directory / "sa.pub",
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
            0o644,
        )
        return private, public
