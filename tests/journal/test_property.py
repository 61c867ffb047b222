"""Property: any single-record edit, delete or reorder of a random journal fails verification,
and verification names the record that was touched (the lower one, for a swap)."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.journal import Classification, Journal, record_hash, verify_journal

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
entry = st.tuples(
    st.sampled_from(["card_dealt", "hole_card", "reader_result", "round_settled", "shuffle_done"]),
    st.dictionaries(st.text(max_size=6), json_value, max_size=4),
    st.sampled_from(Classification),
    st.floats(min_value=0, max_value=4e9),
)

FIELD_EDITS = ["payload", "classification", "at", "kind", "hash", "prev_hash", "rehash"]
MUTATIONS = [*FIELD_EDITS, "delete", "swap", "move_to_end"]

_counter = itertools.count()


def _edit(conn: sqlite3.Connection, how: str, k: int, other_class: str) -> None:
    at, kind, cls, payload, prev = conn.execute(
        "SELECT at, kind, classification, payload, prev_hash FROM records WHERE seq = ?", (k,)
    ).fetchone()
    # Appending a key to the text always changes it, even when the key already exists.
    tampered = payload[:-1] + (',"zz":1}' if payload != "{}" else '"zz":1}')
    if how == "payload":
        conn.execute("UPDATE records SET payload = ? WHERE seq = ?", (tampered, k))
    elif how == "classification":
        conn.execute("UPDATE records SET classification = ? WHERE seq = ?", (other_class, k))
    elif how == "at":
        conn.execute("UPDATE records SET at = at + 1.0 WHERE seq = ?", (k,))
    elif how == "kind":
        conn.execute("UPDATE records SET kind = kind || 'x' WHERE seq = ?", (k,))
    elif how == "hash":
        conn.execute("UPDATE records SET hash = ? WHERE seq = ?", ("f" * 64, k))
    elif how == "prev_hash":
        conn.execute("UPDATE records SET prev_hash = ? WHERE seq = ?", ("e" * 64, k))
    elif how == "rehash":
        new_hash = record_hash(k, at, kind, cls, tampered, prev)
        conn.execute("UPDATE records SET payload = ?, hash = ? WHERE seq = ?", (tampered, new_hash, k))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(entry, min_size=1, max_size=25), data=st.data())
def test_any_single_record_change_is_found_and_named(
    tmp_path: Path, entries: list[tuple[str, dict[str, Any], Classification, float]], data: st.DataObject
) -> None:
    db = tmp_path / f"j{next(_counter)}.db"
    with Journal.open(db) as j:
        written = j.append_many(entries)
    n = len(written)
    assert verify_journal(db).ok

    how = data.draw(st.sampled_from(MUTATIONS if n > 1 else [m for m in MUTATIONS if m != "swap"]))
    k = data.draw(st.integers(1, n))
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER records_no_update")
    conn.execute("DROP TRIGGER records_no_delete")
    if how in FIELD_EDITS:
        other = data.draw(
            st.sampled_from([c.value for c in Classification if c is not written[k - 1].classification])
        )
        _edit(conn, how, k, other)
        expected = k
    elif how == "delete":
        conn.execute("DELETE FROM records WHERE seq = ?", (k,))
        expected = k
    elif how == "swap":
        other_k = data.draw(st.integers(1, n).filter(lambda x: x != k))
        conn.execute("UPDATE records SET seq = -1 WHERE seq = ?", (k,))
        conn.execute("UPDATE records SET seq = ? WHERE seq = ?", (k, other_k))
        conn.execute("UPDATE records SET seq = ? WHERE seq = -1", (other_k,))
        expected = min(k, other_k)
    else:
        conn.execute("UPDATE records SET seq = ? WHERE seq = ?", (n + 1, k))
        expected = k
    conn.commit()
    conn.close()

    result = verify_journal(db)
    assert not result.ok
    assert result.first_bad_seq == expected, (how, k, result)
    assert "\n" not in result.reason
