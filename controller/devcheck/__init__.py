"""``tablectl device check``: a conformance run of one device against docs/devices/."""
