"""The casino's archive: every table's published events in PostgreSQL, checked as they arrive.

``tablectl archive`` (worker.py) consumes ``$share/<group>/tablectl/+/+/events`` and stores each
message (messages.py) idempotently (store.py), acknowledging it to the broker only after the
commit; chain.py checks each table's chain as records arrive, and settle.py settles by it which
copy of a quarantined record is the table's; verify.py compares a journal with
what was archived; report.py reads the dashboard views. Schema: migrations/ (schema.py).
See docs/journal.md ("The archive") and docs/scale-out.md.
"""
