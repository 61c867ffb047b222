-- What the archive keeps out (issue 23): records from tables nobody registered, and the second
-- of two different records claiming one (site, table_id, seq).

-- The tables whose events are archived: registered by `tablectl archive --table SITE/TABLE` or
-- from the broker's password file (`--tables-from`, every account named SITE/TABLE), or by hand.
-- Events of any other table are an `unknown_table` alarm, not rows.
CREATE TABLE known_tables (
    site      text        NOT NULL,
    table_id  text        NOT NULL,
    source    text        NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (site, table_id)
);

-- Which worker received each archived record (with received_at, where it came from: the topic is
-- the table's own, which only its account may write).
ALTER TABLE events ADD COLUMN received_by text;

-- Every copy of a contested record: the one archived first (archived = true, still the row in
-- events) and each different one that came after it (a changed_hash conflict), or a record whose
-- prev_hash does not link to the archived record before it (a fork at arrival, never in events).
-- `tablectl archive verify` says which copy the journal holds.
CREATE TABLE quarantine (
    id             bigserial        PRIMARY KEY,
    site           text             NOT NULL,
    table_id       text             NOT NULL,
    seq            bigint           NOT NULL,
    reason         text             NOT NULL CHECK (reason IN ('changed_hash', 'fork')),
    archived       boolean          NOT NULL,
    at             double precision,
    kind           text             NOT NULL,
    classification text             NOT NULL,
    withheld       boolean          NOT NULL,
    payload        jsonb,
    hash           text,
    prev_hash      text,
    received_at    timestamptz      NOT NULL,
    received_by    text,
    quarantined_at timestamptz      NOT NULL DEFAULT now()
);
CREATE INDEX quarantine_record ON quarantine (site, table_id, seq);

ALTER TABLE chain_alarms DROP CONSTRAINT chain_alarms_kind_check;
ALTER TABLE chain_alarms ADD CONSTRAINT chain_alarms_kind_check
    CHECK (kind IN ('fork', 'gap', 'changed_hash', 'bad_hash', 'refused', 'unknown_table'));
