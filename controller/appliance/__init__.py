"""The appliance: ``tablectl run``, ``config check``, ``demo`` and ``broker``, which compose the
supervisor, telemetry, the console and /metrics. The top of the shell: it imports them, nothing
imports it but controller/cli.py (docs/design.md, "Layers, one way"). Imports nothing itself."""
