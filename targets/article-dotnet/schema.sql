-- The article's payments service: its tables, created once on an empty database.
-- outbox_messages, ix_outbox_ready and inbox_messages are the article's own,
-- column for column; the rest are the parts it says production needs.

CREATE TABLE outbox_messages (
    id uuid PRIMARY KEY,
    aggregate_type text NOT NULL,
    aggregate_id uuid NOT NULL,
    aggregate_version bigint NOT NULL,
    event_type text NOT NULL,
    schema_version integer NOT NULL,
    payload jsonb NOT NULL,
    trace_parent text,
    occurred_at timestamptz NOT NULL,
    published_at timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lock_id uuid,
    locked_until timestamptz,
    last_error text,
    dead_lettered_at timestamptz
);

CREATE INDEX ix_outbox_ready
    ON outbox_messages (next_attempt_at, occurred_at, id)
    WHERE published_at IS NULL
      AND dead_lettered_at IS NULL;

CREATE TABLE inbox_messages (
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (consumer_name, message_id)
);

CREATE TABLE payments (
    id uuid PRIMARY KEY,
    amount numeric NOT NULL CHECK (amount > 0),
    currency text NOT NULL,
    status text NOT NULL,
    version bigint NOT NULL,
    created_at timestamptz NOT NULL
);

-- One per client and Idempotency-Key, written in the transaction that
-- writes the payment and its outbox message: a retried request finds the
-- answer it was given (or would have been, had the commit's answer arrived).
CREATE TABLE idempotency_records (
    client_id text NOT NULL,
    idempotency_key text NOT NULL,
    request_hash text NOT NULL,
    payment_id uuid NOT NULL REFERENCES payments (id),
    event_id uuid NOT NULL,
    response_status integer NOT NULL,
    response_body text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (client_id, idempotency_key)
);

-- The accounting consumer's effect, and the last version of each aggregate
-- it applied (the article's tenth test: an unexpected version is detected).
CREATE TABLE ledger_entries (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    payment_id uuid NOT NULL,
    amount numeric NOT NULL,
    currency text NOT NULL,
    aggregate_version bigint NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE accounting_aggregate_versions (
    consumer_name text NOT NULL,
    aggregate_id uuid NOT NULL,
    last_version bigint NOT NULL,
    PRIMARY KEY (consumer_name, aggregate_id)
);

-- An event whose aggregate_version is not the next one expected is parked
-- here, not applied, for the runbook to look at.
CREATE TABLE accounting_version_anomalies (
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    aggregate_id uuid NOT NULL,
    expected_version bigint NOT NULL,
    received_version bigint NOT NULL,
    detected_at timestamptz NOT NULL,
    PRIMARY KEY (consumer_name, message_id)
);
