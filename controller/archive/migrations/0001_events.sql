-- The archive's tables: every table's events as published, each table's chain watermark, and the
-- chain alarms. Sizing: a year of a 500-table floor is billions of rows, so every query the
-- archive or a dashboard makes goes through an index whose first columns it fixes
-- (docs/scale-out.md): (site, table_id, seq) for the chain, (site, table_id, day) for one table's
-- day, (day, kind) for the floor's day.

CREATE TABLE events (
    site           text             NOT NULL,
    table_id       text             NOT NULL,
    seq            bigint           NOT NULL CHECK (seq >= 1),
    -- The UTC day of the table's own clock (at); a withheld record has no at, so its day is the
    -- day it arrived.
    day            date             NOT NULL,
    at             double precision,
    kind           text             NOT NULL,
    classification text             NOT NULL CHECK (classification IN ('public', 'until_revealed', 'secret')),
    withheld       boolean          NOT NULL,
    payload        jsonb,
    -- As published: a withheld record goes out without its hash, and a public record carries
    -- prev_hash only when the record before it is public (see docs/journal.md).
    hash           text,
    prev_hash      text,
    received_at    timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (site, table_id, seq)
);
CREATE INDEX events_table_day ON events (site, table_id, day);
CREATE INDEX events_day_kind ON events (day, kind);

-- How far each table's chain has been checked: every record up to checked_seq arrived (or its
-- gap was raised) and was linked to the one before it where both hashes are known.
CREATE TABLE chain_state (
    site         text        NOT NULL,
    table_id     text        NOT NULL,
    checked_seq  bigint      NOT NULL DEFAULT 0,
    checked_hash text        DEFAULT repeat('0', 64),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, table_id)
);

CREATE TABLE chain_alarms (
    id        bigserial   PRIMARY KEY,
    site      text        NOT NULL,
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL,
    kind      text        NOT NULL CHECK (kind IN ('fork', 'gap', 'changed_hash', 'bad_hash')),
    detail    text        NOT NULL,
    raised_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chain_alarms_table ON chain_alarms (site, table_id, raised_at);
