/* invariants.c -- the table of the checker's invariants (invariants.h).
 *
 * Each entry is written where its judge is bound to it: JUDGE() takes the
 * function once and gives both the pointer the driver calls and the name
 * the table shows, so the two cannot part.  The witnesses' wording and the
 * longer reasoning stay with each judge, in its family's file. */
#include "invariants.h"
#include "checker_internal.h"

#include <string.h>

#define JUDGE(fn, src) .function = #fn, .file = src, .judge = fn

const struct inv_info inv_table[INV_COUNT] = {
    [INV_PAYMENT_ONE_CREATION_EVENT] = {
        .name = "payment_one_creation_event",
        .asserts = "Every payment has exactly one PaymentCreated event in the outbox, every "
                   "PaymentCreated event announces a payment that exists, and a payment's "
                   "version is its highest event's, with versions 1 to it each in the outbox "
                   "(or its removal record) exactly once.",
        .reads = "payments (their versions); outbox_messages and outbox_removed",
        JUDGE(inv_payment_one_creation_event, "checker_delivery.c"),
    },
    [INV_NOTHING_LOST] = {
        .name = "nothing_lost",
        .asserts = "After the heal no event is still pending (unless held behind its "
                   "aggregate's dead letter), every consumer group applied every published "
                   "event or parked it as named poison or behind a dead letter, every "
                   "payment the client was told of exists, and every transition it was "
                   "answered 2xx on (authorize, capture) is in the payment, its event in the "
                   "outbox.",
        .reads = "outbox_messages and outbox_removed; the effect tables (ledger_entries, "
                 "notifications); consumer_dead_letters, consumer_anomalies; payments (their "
                 "status); the runner's HTTP log; the scenario's poison_events",
        JUDGE(inv_nothing_lost, "checker_delivery.c"),
    },
    [INV_EFFECT_ONCE] = {
        .name = "effect_once",
        .asserts = "Each consumer group applied each event at most once and only events the "
                   "outbox committed, each effect records its event's payment, version and type "
                   "as its outbox row holds them and its amount and currency as its payload "
                   "carries them, and every effect committed with its inbox marker.",
        .reads = "the effect tables (their payment, version, type, amount and currency); "
                 "inbox_messages, inbox_removed; consumer_anomalies, consumer_dead_letters; "
                 "outbox_messages (payloads) and outbox_removed",
        JUDGE(inv_effect_once, "checker_delivery.c"),
    },
    [INV_BROKER_LOG_MATCHES_OUTBOX] = {
        .name = "broker_log_matches_outbox",
        .asserts = "Every message the broker stored is an outbox row, and every row marked "
                   "published was stored by the broker.",
        .reads = "the broker log's stored publishes; outbox_messages and outbox_removed",
        JUDGE(inv_broker_log_matches_outbox, "checker_delivery.c"),
    },
    [INV_REPUBLISH_SAME_PAYLOAD] = {
        .name = "republish_same_payload",
        .asserts = "Every publish of a message carries the payload its outbox row holds, the "
                   "same bytes every time.",
        .reads = "the broker log's publishes (payload_sha256); the outbox rows' payloads",
        JUDGE(inv_republish_same_payload, "checker_delivery.c"),
    },
    [INV_NO_TWO_LIVE_LEASES] = {
        .name = "no_two_live_leases",
        .asserts = "No row is claimed while an earlier claim's lease on it is live and "
                   "unreleased, no lease is shorter than the relays are configured for, and "
                   "no row is marked published twice.",
        .reads = "the claim history (crashwindow_claims: claims, releases, remarks); the "
                 "scenario's relay lease",
        JUDGE(inv_no_two_live_leases, "checker_leases.c"),
    },
    [INV_RETRY_RESPECTS_BACKOFF] = {
        .name = "retry_respects_backoff",
        .asserts = "Every retry persists a backoff that no later claim or publish of its row "
                   "enters, attempts never go backwards, and no row reaches the broker more "
                   "often than it was claimed.",
        .reads = "the claim history (claims, retry releases); the broker log's publishes; "
                 "outbox_messages and outbox_removed; outbox_requeues",
        JUDGE(inv_retry_respects_backoff, "checker_leases.c"),
    },
    [INV_DEAD_LETTER_AT_LIMIT] = {
        .name = "dead_letter_at_limit",
        .asserts = "A relay dead-letters a row at its attempt limit, never before it, never "
                   "retries at or past it, and only for a cause the harness saw: publishes of "
                   "it the broker refused or failed, a fault on the relays' path to the broker "
                   "while it was attempted, a fault point the scenario armed in a relay firing "
                   "then, or the scenario naming it as poison; every error it stores is "
                   "sanitized.",
        .reads = "outbox_messages (dead letters, last_error, payload); outbox_requeues; the "
                 "claim history's claims and retries; the broker log (publishes, control "
                 "switches, restarts, closed connections); the relays' fault_hit events; the "
                 "scenario's relay attempt limits, armed fault points, net steps and "
                 "poison_events",
        JUDGE(inv_dead_letter_at_limit, "checker_leases.c"),
    },
    [INV_VERSIONS_IN_ORDER] = {
        .name = "versions_in_order",
        .asserts = "Each consumer group applied each payment's versions in order, with no "
                   "gap and no step back.",
        .reads = "the effect tables",
        JUDGE(inv_versions_in_order, "checker_delivery.c"),
    },
    [INV_ONE_PAYMENT_PER_KEY] = {
        .name = "one_payment_per_key",
        .asserts = "A client's Idempotency-Key created at most one payment, every settled "
                   "answer to it was the same, its record names the payment the client was "
                   "given, a 5xx answer to a creation or a transition stored nothing, and a 409 "
                   "key-in-flight had another request of its key in flight.",
        .reads = "the runner's HTTP log; idempotency_records; payments",
        JUDGE(inv_one_payment_per_key, "checker_answers.c"),
    },
    [INV_PUBLISH_WITHIN_LEASE] = {
        .name = "publish_within_lease",
        .asserts = "Every publish a relay stored carries its claim token, and reached the "
                   "broker under a committed claim of its row, after that claim committed and "
                   "before its lease ended (a line the RabbitMQ bridge wrote late, catching "
                   "up, is held to its claim only).",
        .reads = "the broker log's stored publishes (client, claim_token, stored_us, "
                 "ts_late); the claim history's claims",
        JUDGE(inv_publish_within_lease, "checker_leases.c"),
    },
    [INV_IDLE_TRANSACTIONS_BOUNDED] = {
        .name = "idle_transactions_bounded",
        .asserts = "No session of a scenario process sat idle inside an open transaction "
                   "past its database deadline and a second's slack.",
        .reads = "the runner's samples of pg_stat_activity; the scenario's processes' "
                 "database deadlines",
        JUDGE(inv_idle_transactions_bounded, "checker_leases.c"),
    },
    [INV_RELAY_RECOVERS_AFTER_HEAL] = {
        .name = "relay_recovers_after_heal",
        .asserts = "Once every fault is off, no relay worker fails the publishes of two "
                   "claims in a row, every relay still running has a database session, and "
                   "every relay and consumer still running holds a connection to the broker.",
        .reads = "the claim history (claims, releases, faults_off, session and "
                 "broker_session records: the database's session list, the fault proxy's "
                 "open connections); the scenario's relay attempt limits",
        JUDGE(inv_relay_recovers_after_heal, "checker_leases.c"),
    },
    [INV_ACK_AFTER_COMMIT] = {
        .name = "ack_after_commit",
        .asserts = "A consumer group's ACK of a message reached the broker only after the "
                   "group's first record of the message committed.",
        .reads = "the broker log's ACKs; the claim history's consumer records "
                 "(crashwindow_consumer_records)",
        JUDGE(inv_ack_after_commit, "checker_delivery.c"),
    },
    [INV_MARKS_COMMITTED] = {
        .name = "marks_committed",
        .asserts = "Every row a relay reported marked published was marked by a committed "
                   "transaction under that relay's own claim (a mark made after replication "
                   "stalled, in a scenario whose hazard is that stall, may be lost with the "
                   "old primary).",
        .reads = "the relays' mark events (ids and claim token); the claim history's "
                 "releases by a mark",
        JUDGE(inv_marks_committed, "checker_leases.c"),
    },
};

const struct inv_info *inv_info(const char *name)
{
    for (int i = 0; name != NULL && i < INV_COUNT; i++)
        if (strcmp(inv_table[i].name, name) == 0)
            return &inv_table[i];
    return NULL;
}

int inv_write_markdown(FILE *f)
{
    fprintf(f, "| # | invariant | asserts | reads | judged by |\n");
    fprintf(f, "|---|---|---|---|---|\n");
    for (int i = 0; i < INV_COUNT; i++) {
        const struct inv_info *x = &inv_table[i];
        fprintf(f, "| %d | `%s` | %s | %s | `%s` (%s) |\n", i + 1, x->name, x->asserts,
                x->reads, x->function, x->file);
    }
    return fflush(f) != 0 || ferror(f) ? -1 : 0;
}

int invariants_main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: crashwindow invariants\n"
               "Prints the checker's invariants as a Markdown table: for each, its name,\n"
               "what it asserts, what it reads, and the function that judges it.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "crashwindow invariants: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    return inv_write_markdown(stdout) < 0 ? 1 : 0;
}
