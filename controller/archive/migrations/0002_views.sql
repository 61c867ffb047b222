-- Views a dashboard reads directly; `tablectl archive report` reads the same ones.

-- One row per table and day: rounds played, shoes dealt, events and withheld records.
CREATE VIEW archive_table_day AS
SELECT site, table_id, day,
       count(*) FILTER (WHERE kind = 'round_settled')  AS rounds,
       count(*) FILTER (WHERE kind = 'round_voided')   AS rounds_voided,
       count(*) FILTER (WHERE kind = 'batch_to_shoe')  AS shoes,
       count(*)                                        AS events,
       count(*) FILTER (WHERE withheld)                AS withheld,
       min(seq) AS first_seq, max(seq) AS last_seq
FROM events GROUP BY site, table_id, day;

-- The table's own alarms (alarm_raised events) by regulation section.
CREATE VIEW archive_alarms_by_section AS
SELECT site, table_id, day, payload ->> 'section' AS section, count(*) AS alarms
FROM events WHERE kind = 'alarm_raised'
GROUP BY site, table_id, day, payload ->> 'section';

-- Devices taken out of order: the shuffler, and the hole-card reader.
CREATE VIEW archive_devices_out_of_order AS
SELECT site, table_id, day,
       CASE kind WHEN 'shuffler_out_of_order' THEN 'shuffler' ELSE 'reader' END AS device,
       count(*) AS times
FROM events WHERE kind IN ('shuffler_out_of_order', 'reader_failed')
GROUP BY site, table_id, day, kind;

-- The archive's own chain alarms (fork, gap, changed_hash, bad_hash) by table and UTC day.
CREATE VIEW archive_chain_alarms_by_day AS
SELECT site, table_id, (raised_at AT TIME ZONE 'UTC')::date AS day, kind, count(*) AS alarms
FROM chain_alarms GROUP BY site, table_id, (raised_at AT TIME ZONE 'UTC')::date, kind;
