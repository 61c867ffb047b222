"""tablectl's device simulators (``tablectl sim``)."""

import controller  # noqa: F401  first, for structlog without rich (controller/__init__.py)
