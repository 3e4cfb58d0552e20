-- crashwindow schema, version 6.
--
-- Applied by `outboxctl migrate` in one transaction under an advisory lock;
-- a database already at version 6 is left untouched, an older one gets the
-- upgrade steps in schema.c first (version 3 narrowed ix_outbox_claim_order
-- to fresh rows and added ix_outbox_retry_order; version 4 added
-- outbox_messages.locked_by; version 5 added outbox_removed and
-- consumer_replays, the runbook's records, which need no upgrade step;
-- version 6 added inbox_removed, the record of cleanup-inbox, which needs
-- none either).
-- outbox_messages, ix_outbox_ready and
-- inbox_messages are the source article's (README), exactly as written.

CREATE TABLE IF NOT EXISTS outbox_messages (
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

-- lock_id is the fencing token of the claim that holds (or last held) the
-- row, a fresh UUID per claim, so that a relay's settle of an old claim can
-- never match a newer claim of the row, even its own; locked_by is the relay
-- worker that made that claim, for operators and metrics.
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS locked_by uuid;

CREATE INDEX IF NOT EXISTS ix_outbox_ready
    ON outbox_messages (next_attempt_at, occurred_at, id)
    WHERE published_at IS NULL
      AND dead_lettered_at IS NULL;

-- The claim orders by (occurred_at, id); ix_outbox_ready leads with
-- next_attempt_at and cannot serve that ORDER BY, so with a large backlog
-- every claim would scan and sort every pending row.  The claim takes due
-- rows from two indexes, each walked in order until LIMIT matches (the
-- argument is in src/relay/relay_store.c):
--   ix_outbox_claim_order: fresh rows (no publish has failed), in claim order;
--   ix_outbox_retry_order: rows a failed publish sent into backoff, in the
--     order they come due.
-- A row in backoff is in the second only, so rows piling up in backoff while
-- the broker refuses are never walked by the claim of a fresh row.
CREATE INDEX IF NOT EXISTS ix_outbox_claim_order
    ON outbox_messages (occurred_at, id)
    WHERE published_at IS NULL
      AND dead_lettered_at IS NULL
      AND last_error IS NULL;

CREATE INDEX IF NOT EXISTS ix_outbox_retry_order
    ON outbox_messages (next_attempt_at)
    WHERE published_at IS NULL
      AND dead_lettered_at IS NULL
      AND last_error IS NOT NULL;

-- One event per aggregate version: a second version 2 of a payment is a bug.
CREATE UNIQUE INDEX IF NOT EXISTS ux_outbox_aggregate_version
    ON outbox_messages (aggregate_id, aggregate_version);

CREATE TABLE IF NOT EXISTS inbox_messages (
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    processed_at timestamptz NOT NULL,
    PRIMARY KEY (consumer_name, message_id)
);

CREATE TABLE IF NOT EXISTS payments (
    id uuid PRIMARY KEY,
    client_id text NOT NULL,
    amount numeric(20,2) NOT NULL CHECK (amount > 0),
    currency text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    status text NOT NULL CHECK (status IN ('created', 'authorized', 'captured')),
    version bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- HTTP idempotency: one row per (client, key), written in the same
-- transaction as the payment and its outbox row.
CREATE TABLE IF NOT EXISTS idempotency_records (
    client_id text NOT NULL,
    idempotency_key text NOT NULL,
    request_hash text NOT NULL,          -- hex SHA-256 of the canonical request
    payment_id uuid,
    status_code integer NOT NULL,
    response_body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, idempotency_key)
);

-- The accounting consumer's effect.  message_id is deliberately NOT unique:
-- the inbox marker is the only arbiter of duplicates, and the invariant
-- checker must be able to see a double effect when that arbiter is broken.
CREATE TABLE IF NOT EXISTS ledger_entries (
    id bigserial PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    payment_id uuid NOT NULL,
    event_type text NOT NULL,
    aggregate_version bigint NOT NULL,
    amount numeric(20,2),
    currency text,
    trace_parent text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ix_ledger_message ON ledger_entries (message_id);

-- The notifications consumer's effect (same rule: not unique on message_id).
CREATE TABLE IF NOT EXISTS notifications (
    id bigserial PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    payment_id uuid NOT NULL,
    event_type text NOT NULL,
    aggregate_version bigint NOT NULL,
    trace_parent text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ix_notifications_message ON notifications (message_id);

-- Highest aggregate version each consumer has applied.
CREATE TABLE IF NOT EXISTS aggregate_versions (
    consumer_name text NOT NULL,
    aggregate_id uuid NOT NULL,
    applied_version bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, aggregate_id)
);

-- What a consumer saw and did not apply: duplicate, gap, stale, poison.
CREATE TABLE IF NOT EXISTS consumer_anomalies (
    id bigserial PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid,
    aggregate_id uuid,
    kind text NOT NULL CHECK (kind IN ('duplicate', 'gap', 'stale', 'poison', 'gap_parked')),
    expected_version bigint,
    got_version bigint,
    detail text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ix_anomalies_kind ON consumer_anomalies (consumer_name, kind);

-- Consumer-side dead letters: deliveries parked after too many failures
-- (poison), and versions parked while their predecessor had not arrived
-- (gap).  A parked gap keeps the validated event, so that it is applied the
-- moment its predecessor is, in the predecessor's own transaction.
CREATE TABLE IF NOT EXISTS consumer_dead_letters (
    consumer_name text NOT NULL,
    message_id text NOT NULL,            -- text: a poison frame may carry no valid uuid
    reason text NOT NULL,
    deliveries integer NOT NULL,
    parked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_name, message_id)
);
ALTER TABLE consumer_dead_letters
    ADD COLUMN IF NOT EXISTS aggregate_id uuid,       -- gap: the event, validated
    ADD COLUMN IF NOT EXISTS aggregate_version bigint,
    ADD COLUMN IF NOT EXISTS event_type text,
    ADD COLUMN IF NOT EXISTS amount text,
    ADD COLUMN IF NOT EXISTS currency text,
    ADD COLUMN IF NOT EXISTS trace_parent text;
CREATE INDEX IF NOT EXISTS ix_consumer_dead_letters_gap
    ON consumer_dead_letters (consumer_name, aggregate_id, aggregate_version)
    WHERE aggregate_id IS NOT NULL;

-- Every operator requeue of an outbox dead letter.
CREATE TABLE IF NOT EXISTS outbox_requeues (
    id bigserial PRIMARY KEY,
    message_id uuid NOT NULL,
    attempts_before integer NOT NULL,
    last_error_before text,
    requeued_at timestamptz NOT NULL DEFAULT now()
);

-- Every operator replay of a consumer's parked event (outboxctl parked
-- replay): the dead letter and the consumer's inbox marker are removed and
-- the outbox row is published again under its id, in one statement that
-- also writes this record.
CREATE TABLE IF NOT EXISTS consumer_replays (
    id bigserial PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    reason_before text NOT NULL,
    deliveries_before integer NOT NULL,
    replayed_at timestamptz NOT NULL DEFAULT now()
);

-- What the runbook removed: one row per outbox row `outboxctl cleanup`
-- deleted, written in the deleting statement.  Small on purpose (no
-- payload, only its digest): retention still frees the space, and an audit
-- -- the harness's checker among them -- still knows every event that was
-- removed legitimately, and when.
CREATE TABLE IF NOT EXISTS outbox_removed (
    id uuid PRIMARY KEY,
    aggregate_id uuid NOT NULL,
    aggregate_version bigint NOT NULL,
    event_type text NOT NULL,
    payload_sha256 text NOT NULL,
    attempts integer NOT NULL,
    occurred_at timestamptz NOT NULL,
    published_at timestamptz NOT NULL,
    removed_at timestamptz NOT NULL DEFAULT now(),
    removed_by text NOT NULL             -- the runbook operation: 'cleanup'
);

-- What the runbook removed from the inbox: one row per marker
-- `outboxctl cleanup-inbox` deleted, written in the deleting statement.  A
-- marker is a consumer's memory of an event it processed; once it is gone,
-- an audit -- the harness's checker among them -- still knows that the
-- event was processed and that its marker was removed legitimately, and
-- when.
-- Every removal is kept: a marker written again (a replay) and removed
-- again has two rows.
CREATE TABLE IF NOT EXISTS inbox_removed (
    id bigserial PRIMARY KEY,
    consumer_name text NOT NULL,
    message_id uuid NOT NULL,
    processed_at timestamptz NOT NULL,
    removed_at timestamptz NOT NULL DEFAULT now(),
    removed_by text NOT NULL             -- the runbook operation: 'cleanup-inbox'
);
CREATE INDEX IF NOT EXISTS ix_inbox_removed_message
    ON inbox_removed (consumer_name, message_id);

-- Monotonic counters that outlive processes (expired leases recovered, ...).
CREATE TABLE IF NOT EXISTS pipeline_counters (
    counter text PRIMARY KEY,
    value bigint NOT NULL DEFAULT 0
);

-- Wake idle relays at once on new outbox rows; polling stays the fallback.
-- A transaction that notified takes PostgreSQL's one notification-queue lock
-- at COMMIT, so every payment's commit queues behind every other's for a
-- moment.  Under a writer's lock_timeout that brief wait became 55P03 and, a
-- few retries later, a 503 for a payment that collided with nothing: the
-- trigger lifts lock_timeout for the rest of its own transaction (is_local),
-- so row and key locks stay bounded while the commit-time queue wait does
-- not fail the request.  The API's own deadline still bounds the whole call.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('outbox_ready', '');
    PERFORM set_config('lock_timeout', '0', true);
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER outbox_notify
    AFTER INSERT ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
