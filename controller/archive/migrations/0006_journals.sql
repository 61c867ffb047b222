-- Every gaming day starts on a fresh journal whose seq starts at 1 again, so a record is named by
-- (site, table_id, journal, seq). `journal` is the journal's identity as the table publishes it
-- with every event (the hash of its first record, a public table_opened); '' for the records of
-- tables that predate it (one journal's worth, as before).
ALTER TABLE events ADD COLUMN journal text NOT NULL DEFAULT '';
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (site, table_id, journal, seq);

ALTER TABLE quarantine ADD COLUMN journal text NOT NULL DEFAULT '';
DROP INDEX quarantine_record;
CREATE INDEX quarantine_record ON quarantine (site, table_id, journal, seq);

ALTER TABLE chain_alarms ADD COLUMN journal text NOT NULL DEFAULT '';

-- A chain per journal. announced_seq is the last record the table said its broker confirmed
-- (published_seq of its retained birth or its heartbeat), announced_at when that was heard: a
-- record at or below it that has not arrived is missing, whatever the table does next.
ALTER TABLE chain_state ADD COLUMN journal text NOT NULL DEFAULT '';
ALTER TABLE chain_state DROP CONSTRAINT chain_state_pkey;
ALTER TABLE chain_state ADD PRIMARY KEY (site, table_id, journal);
ALTER TABLE chain_state ADD COLUMN announced_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE chain_state ADD COLUMN announced_at timestamptz;

ALTER TABLE gap_requests ADD COLUMN journal text NOT NULL DEFAULT '';
ALTER TABLE gap_requests DROP CONSTRAINT gap_requests_pkey;
ALTER TABLE gap_requests ADD PRIMARY KEY (site, table_id, journal, first_seq);

-- The archive's chain alarms by the gaming day of the record they are about, in its journal.
DROP VIEW archive_chain_alarms_by_day;
CREATE VIEW archive_chain_alarms_by_day AS
SELECT c.site, c.table_id,
       coalesce(
           (SELECT e.day FROM events e
             WHERE e.site = c.site AND e.table_id = c.table_id AND e.journal = c.journal
               AND e.seq = c.seq),
           (SELECT e.day FROM events e
             WHERE e.site = c.site AND e.table_id = c.table_id AND e.journal = c.journal
               AND e.seq < c.seq
             ORDER BY e.seq DESC LIMIT 1),
           (c.raised_at AT TIME ZONE 'UTC')::date
       ) AS day,
       c.kind, count(*) AS alarms
FROM chain_alarms c GROUP BY 1, 2, 3, 4;
