-- The gaps the archive is asking tables to fill (cmd/republish), one row per gap by its first
-- record. status: asking (requests go out with backoff), not_in_journal (the table answered that
-- it does not hold them: the next sweep raises the gap and moves past), filled (every record came),
-- lost (raised and moved past). A sweep never checks a table's chain past a gap still asked for.
CREATE TABLE gap_requests (
    site        text        NOT NULL,
    table_id    text        NOT NULL,
    first_seq   bigint      NOT NULL,
    last_seq    bigint      NOT NULL,
    status      text        NOT NULL DEFAULT 'asking'
                            CHECK (status IN ('asking', 'not_in_journal', 'filled', 'lost')),
    asks        integer     NOT NULL DEFAULT 0,
    alarmed     boolean     NOT NULL DEFAULT false,  -- the "still asking" alarm was raised
    opened_at   timestamptz NOT NULL DEFAULT now(),
    next_ask_at timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,
    PRIMARY KEY (site, table_id, first_seq)
);
CREATE INDEX gap_requests_open ON gap_requests (next_ask_at) WHERE status IN ('asking', 'not_in_journal');
