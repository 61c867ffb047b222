"""tablectl's controller: the table, its journal, its supervisor and its commands."""

import sys

if "structlog" not in sys.modules and "rich" not in sys.modules:
    # structlog imports rich (about 0.1 s of CPU) only to draw tracebacks on a developer's console;
    # our logs are JSON lines (controller/logs.py), and every import delays the table's `ready`
    # after a restart. Hidden from structlog alone: the commands that draw with rich still import it.
    sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
