-- The gaming day (issue 26). `day` now holds the table's gaming day: the 24-hour period the
-- casino sets, in its local time from its start time (a table file's [table] time_zone and
-- gaming_day_starts), as the table stamps every events message; `tz` is the zone it was counted
-- in. A withheld record is dated by its own `at` now (the table publishes it), not by its arrival.
-- Records from tables that predate this keep the UTC date they were given.
ALTER TABLE events ADD COLUMN tz text;

-- Local wall-clock time of a record, in the zone its table counts its gaming day in.
CREATE VIEW archive_events_local AS
SELECT site, table_id, seq, day, at, kind, classification, withheld, payload,
       (to_timestamp(at) AT TIME ZONE coalesce(tz, 'UTC')) AS local_time
FROM events;

-- Rounds settled per table, gaming day and local hour (the floor's pace).
CREATE VIEW archive_rounds_by_hour AS
SELECT site, table_id, day,
       extract(hour FROM to_timestamp(at) AT TIME ZONE coalesce(tz, 'UTC'))::int AS hour,
       count(*) AS rounds
FROM events WHERE kind = 'round_settled' AND at IS NOT NULL
GROUP BY 1, 2, 3, 4;

-- The archive's own chain alarms, counted in the gaming day of the record they are about: that
-- record's day when it arrived, else the day of the last record before it (a gap's first missing
-- record never arrives), else the UTC date the alarm was raised.
DROP VIEW archive_chain_alarms_by_day;
CREATE VIEW archive_chain_alarms_by_day AS
SELECT c.site, c.table_id,
       coalesce(
           (SELECT e.day FROM events e
             WHERE e.site = c.site AND e.table_id = c.table_id AND e.seq = c.seq),
           (SELECT e.day FROM events e
             WHERE e.site = c.site AND e.table_id = c.table_id AND e.seq < c.seq
             ORDER BY e.seq DESC LIMIT 1),
           (c.raised_at AT TIME ZONE 'UTC')::date
       ) AS day,
       c.kind, count(*) AS alarms
FROM chain_alarms c GROUP BY 1, 2, 3, 4;
