-- A record that contradicts a table's own chain never stays the row in events: when two different
-- copies claim one (site, table_id, journal, seq), both wait in quarantine and events has no row
-- for it until the table's chain settles which is real (the table's next record, itself settled,
-- links to exactly one of them: that copy goes back to events, chosen = true). day and tz are kept
-- with each copy so the chosen one is restored whole.
ALTER TABLE quarantine ADD COLUMN day date;
ALTER TABLE quarantine ADD COLUMN tz text;
ALTER TABLE quarantine ADD COLUMN settled_at timestamptz;
ALTER TABLE quarantine ADD COLUMN chosen boolean;
CREATE INDEX quarantine_unsettled ON quarantine (site, table_id, journal, seq)
    WHERE reason = 'changed_hash' AND settled_at IS NULL;
