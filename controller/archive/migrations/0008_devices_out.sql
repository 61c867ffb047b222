-- Devices the floor marked out of order, every kind: the shuffler has its own event
-- (shuffler_out_of_order, 673a.13(l)); every other device (keypad, reader, shoe, stub counter) is
-- device_out_of_order naming it. A reader that failed by itself (reader_failed) was not marked,
-- so it is not counted here: its alarm is in archive_alarms_by_section.
CREATE OR REPLACE VIEW archive_devices_out_of_order AS
SELECT site, table_id, day,
       CASE kind WHEN 'shuffler_out_of_order' THEN 'shuffler' ELSE payload ->> 'device' END AS device,
       count(*) AS times
FROM events WHERE kind IN ('shuffler_out_of_order', 'device_out_of_order')
GROUP BY site, table_id, day, 4;
