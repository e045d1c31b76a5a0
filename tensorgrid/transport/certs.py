"""A cluster's certificate authority and one certificate per process (``tensorgrid certs``).

``make_certs(spec, directory)`` writes ``ca.pem`` and, for the master, every task of the spec and
the clients, ``NAME.pem`` + ``NAME.key`` (keys mode 0600): a task's certificate names the task
(``CN=/job:ps/replica:0/task:0``) and holds its host as a subject alternative name, so a peer that
dials the task's address verifies it is talking to that host.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tensorgrid.transport.tls import CLIENT_CERT_NAME, MASTER_CERT_NAME, TlsFiles

VALID_DAYS = 825  # the longest validity clients accept for a leaf certificate


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "tensorgrid"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _write_key(path: Path, key: Any) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _issue(subject: str, hosts: Iterable[str], ca_key: Any, ca_cert: x509.Certificate | None,
           now: datetime.datetime) -> tuple[Any, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    is_ca = ca_cert is None
    issuer = _name(subject) if ca_cert is None else ca_cert.subject
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True))
    if is_ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(_san(hosts), critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                   ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(key if is_ca else ca_key, hashes.SHA256())
    return key, cert


def make_certs(spec: Mapping[str, Any], directory: Path, master_hosts: Iterable[str] = ()
               ) -> dict[str, TlsFiles]:
    """A CA and a certificate for the master, each task of ``spec`` and the clients, in
    ``directory`` (made 0700; keys 0600); returns each one's files by name ('master',
    'client', 'ps-0', 'worker-1', ...). Every certificate also names 127.0.0.1 and localhost.

    Args:
        spec: the cluster spec ``{job: [host:port, ...]}`` (or ``{job: {index: address}}``).
        directory: where to write; existing files are replaced.
        master_hosts: the master's host names or addresses, besides loopback.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = _issue("tensorgrid cluster CA", (), None, None, now)
    ca_path = directory / "ca.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(directory / "ca.key", ca_key)
    loopback = ("127.0.0.1", "localhost", "::1")
    wanted: dict[str, tuple[str, list[str]]] = {
        "master": (MASTER_CERT_NAME, [*master_hosts, *loopback]),
        "client": (CLIENT_CERT_NAME, list(loopback)),
    }
    for job, tasks in spec.items():
        items = tasks.items() if isinstance(tasks, Mapping) else enumerate(tasks)
        for index, address in items:
            host = str(address).rpartition(":")[0].strip("[]")
            wanted[f"{job}-{index}"] = (f"/job:{job}/replica:0/task:{index}", [host, *loopback])
    out: dict[str, TlsFiles] = {}
    for name, (subject, hosts) in wanted.items():
        key, cert = _issue(subject, hosts, ca_key, ca_cert, now)
        files = TlsFiles(directory / f"{name}.pem", directory / f"{name}.key", ca_path)
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(files.key, key)
        out[name] = files
    return out
