"""The console's own TLS: ``[console] tls_cert`` and ``tls_key`` (PEM files), TLS 1.2 or later.
A certificate or key that cannot be used stops ``tablectl run`` with one line naming the file."""

from __future__ import annotations

import ssl
from pathlib import Path

from controller.errors import ConfigError


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context for ``cert`` (the chain, leaf first) and ``key``; ConfigError otherwise."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for path in (cert, key):
        if not path.is_file():
            raise ConfigError(f"{path}: no such file (the console's TLS certificate and key)")
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as e:
        reason = e.reason or str(e).splitlines()[0]
        raise ConfigError(f"{cert}, {key}: not a certificate and its key ({reason})") from None
    except OSError as e:
        raise ConfigError(f"{cert}, {key}: {e.strerror or e}") from None
    return context
