"""TLS for every port of a cluster, from a process's certificate, its key and the cluster's CA
(``tensorgrid certs`` makes them: ``tensorgrid/transport/certs.py``): the gRPC credentials of the
control plane, and the ``ssl`` contexts of the framed data plane and the HTTP master.

A server proves itself with its certificate and asks every caller for a certificate of the same
CA (mutual TLS): a plaintext client, or one whose certificate another CA signed, is refused during
the handshake, before any call reaches a servicer. The HTTP master may leave client certificates
optional (browsers and ``curl`` then need only the CA).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

MASTER_CERT_NAME = "master"  # the common name of the master's certificate (``make_certs``)
CLIENT_CERT_NAME = "client"  # the common name of the clients' certificate

if TYPE_CHECKING:  # the settings name TlsFiles, and `import tensorgrid` must not load grpc
    import grpc


@dataclass(frozen=True)
class TlsFiles:
    """A process's certificate, its key and the cluster's CA, as PEM files."""

    cert: Path
    key: Path
    ca: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        """(certificate, key, CA) PEM bytes.

        Raises:
            ValueError: a file cannot be read.
        """
        try:
            return self.cert.read_bytes(), self.key.read_bytes(), self.ca.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read a TLS file: {exc}") from None

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials of a server that proves itself with ``cert`` and requires callers to
        present a certificate signed by ``ca`` (mutual TLS)."""
        import grpc

        cert, key, ca = self.read()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                           require_client_auth=True)

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Credentials of a client that verifies servers against ``ca`` and presents ``cert``."""
        cert, key, ca = self.read()
        import grpc

        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key,
                                            certificate_chain=cert)

    def server_ssl_context(self, require_client_cert: bool = True) -> ssl.SSLContext:
        """An ``ssl`` server context that proves itself with ``cert`` and, when
        ``require_client_cert``, refuses a peer without a certificate signed by ``ca``.

        Raises:
            ValueError: a file cannot be read or is not a PEM certificate or key.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key)
            ctx.load_verify_locations(cafile=self.ca)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load the TLS files {self.cert}, {self.key}, {self.ca}: "
                             f"{exc}") from None
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
        return ctx

    def client_ssl_context(self) -> ssl.SSLContext:
        """An ``ssl`` client context that verifies the server (its certificate signed by ``ca``
        and naming the host dialled) and presents ``cert``."""
        return client_ssl_context(self.ca, self.cert, self.key)


def client_ssl_context(ca: Path, cert: Path | None = None,
                       key: Path | None = None) -> ssl.SSLContext:
    """An ``ssl`` client context that trusts only the cluster's CA ``ca`` and checks the host
    name, presenting ``cert``/``key`` when both are given (for a server that asks for one).

    Raises:
        ValueError: a file cannot be read or is not PEM.
    """
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_verify_locations(cafile=ca)
        if cert is not None and key is not None:
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS files ({ca}, {cert}, {key}): {exc}") from None
    return ctx


def peer_common_name(peercert: Mapping[str, Any] | None) -> str | None:
    """The common name of a verified peer certificate (``SSLObject.getpeercert()``'s dict), or
    None when the peer presented none. ``tensorgrid certs`` puts the task's name there
    (``/job:ps/replica:0/task:0``), or 'master' / 'client'."""
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
