/* checker_internal.h -- what the checker's files share, and no one else:
 * the evidence loaded once (struct chk_ctx and the rows it holds), the
 * statements every family builds on, the broker log's field names, and
 * each file's functions that another calls.  The invariants' judges are
 * declared here for the table of invariants.c, through which the driver
 * calls them. */
#ifndef CW_CHECKER_INTERNAL_H
#define CW_CHECKER_INTERNAL_H

#include "checker.h"

/* ---- the outbox, loaded once -------------------------------------------- */

struct orow {
    char id[40];
    char event_type[40];
    char aggregate_id[40];
    long long version;
    int published, dead;
    int attempts;
    char sha[65];
};

struct requeue {
    char id[40];
    int64_t at_us;
    int attempts_before;
};

/* One committed claim of a row, from the claim history. */
struct claim_rec {
    char id[40];
    char token[40];
    long long until_us;   /* its lease end */
    long long claimed_us; /* the claiming transaction's now() */
    long long committed_us; /* its commit timestamp, or 0 when not kept */
    long long released_us;/* when a settle of this claim released the lease
                           * (its transaction's now()), or LLONG_MAX */
    long long seq;        /* the history's order of recording */
    int attempts;         /* the row's attempts the claim committed */
    int marked;           /* a committed mark under it released the lease */
};

/* The first row a consumer group committed about a message (its inbox
 * marker, a park, an anomaly: claim_history.h), and when. */
struct consumer_rec {
    char group[64];
    char id[64];
    long long committed_us;
};

/* One release of a lease by a retry, from the claim history: the row stayed
 * unpublished and next_attempt_at is what the row held after it. */
struct retry_rec {
    char id[40];
    char token[40];       /* the lease the retry ended */
    long long seq;
    long long at_us;      /* the retrying transaction's now() */
    long long next_us;    /* the persisted next_attempt_at, or LLONG_MIN when NULL */
    int attempts;         /* the attempt the retried claim had counted */
};

/* The ids a hazard explained, up to its bound. */
#define CHK_MAX_HAZARD_IDS 256
struct chk_idset {
    char ids[CHK_MAX_HAZARD_IDS][40];
    int n;
};

struct chk_ctx {
    const struct chk_input *in;
    struct chk_result *res;
    struct orow *rows;
    int nrows;
    struct requeue *requeues;   /* operator requeues: attempts restart at 0 */
    int nrequeues;
    const char *consumers[SC_MAX_PROCS];
    int nconsumers;
    struct claim_rec *claims;   /* the claim history, by (row, token) */
    int nclaims;
    struct claim_rec *claims_seq; /* the same claims, by (row, seq) */
    struct retry_rec *retries;  /* its retry releases, by (row, seq) */
    int nretries;
    int has_claim_history;      /* the database holds one (claim_history.h) */
    struct consumer_rec *crecs; /* each group's first committed record of a message */
    int ncrecs;
    int db_failed;
    int64_t hazard_began_us;    /* when the scenario's hazard began, or INT64_MAX */
    struct chk_idset hazard_events, hazard_payments;  /* what it explained */
};

/* Every event the outbox ever held: its rows, and the rows the runbook
 * removed (outboxctl cleanup records each in outbox_removed).  A removal
 * is legitimate history, never a loss or a ghost, so every statement about
 * "the events" reads this, not the table alone. */
#define OUTBOX_ALL                                                                   \
    "(SELECT id, event_type, aggregate_id, aggregate_version, occurred_at,"         \
    "        published_at, dead_lettered_at FROM outbox_messages"                   \
    " UNION ALL"                                                                    \
    " SELECT id, event_type, aggregate_id, aggregate_version, occurred_at,"         \
    "        published_at, NULL::timestamptz FROM outbox_removed)"

/* Consumer group $1 parked event ID (an expression of type uuid): a
 * consumer dead letter, or a poison or gap_parked anomaly.  A parked event
 * is handled -- nothing is left to wait for -- but it was not applied. */
#define PARKED_BY_GROUP(ID)                                                         \
    "(EXISTS (SELECT 1 FROM consumer_dead_letters d"                                \
    "          WHERE d.consumer_name = $1 AND d.message_id = (" ID ")::text)"       \
    " OR EXISTS (SELECT 1 FROM consumer_anomalies a"                                \
    "             WHERE a.consumer_name = $1 AND a.message_id = " ID                \
    "               AND a.kind IN ('poison', 'gap_parked')))"

/* ---- broker log helpers ------------------------------------------------- */

/* The broker log's field names, as the fake broker (fakebroker_server.c)
 * and the RabbitMQ bridge write them: one name each. */
#define K_MSGID "message_id"
#define K_STATUS "status"
#define K_SHA "payload_sha256"
#define K_TOKEN "claim_token"  /* optional: a publish may carry none */

/* ---- checker_load.c ------------------------------------------------------ */

/* Counts a violation of inv and keeps its witness (printf-style), up to
 * CHK_MAX_WITNESSES of them. */
__attribute__((format(printf, 2, 3)))
void chk_violation(struct chk_inv *inv, const char *fmt, ...);
/* The same for a violation whose witness the scenario's hazard may
 * explain (explained: chk_hazard_event's or chk_hazard_payment's answer):
 * counted in inv->hazard_explained, and the witness says so. */
__attribute__((format(printf, 3, 4)))
void chk_violation_hazard(struct chk_inv *inv, int explained, const char *fmt, ...);
/* The time of day of us (or "never" for INT64_MAX) into out, for witnesses. */
void chk_fmt_time(int64_t us, char *out, size_t n);
/* src into dst (n bytes, truncated), lowercased, as the loaders store ids. */
void chk_copy_lower(char *dst, size_t n, const char *src);
/* The outbox row (or removed row) with id, any case, or NULL. */
struct orow *chk_find_row(struct chk_ctx *c, const char *id);
/* Runs sql; NULL on failure, which marks c failed and says why in its
 * result (the first failure only).  The caller PQclears the result. */
PGresult *chk_query(struct chk_ctx *c, const char *sql, int n, const char *const *params);
/* The first column of the first row as a long; 0 when empty or failed. */
long chk_query_long(struct chk_ctx *c, const char *sql, int n, const char *const *params);
/* chk_query() on a statement that names the effects union at each %s. */
__attribute__((format(printf, 4, 5)))
PGresult *chk_query_effects(struct chk_ctx *c, int n, const char *const *params,
                            const char *fmt, ...);
/* The loaders: each fills its part of c; 0, or -1 when the database could
 * not be read (c's result says why). */
int chk_load_outbox(struct chk_ctx *c);
int chk_load_requeues(struct chk_ctx *c);
int chk_load_claim_history(struct chk_ctx *c);
int chk_load_consumer_records(struct chk_ctx *c);
/* Orders consumer records by (group, message): for bsearch on c->crecs. */
int chk_cmp_consumer_rec(const void *a, const void *b);
/* The committed claim of row id whose fencing token is token, or NULL. */
const struct claim_rec *chk_find_claim(const struct chk_ctx *c, const char *id,
                                       const char *token);
/* Was id requeued by the operator between from and to (microseconds)? */
int chk_requeued_between(const struct chk_ctx *c, const char *id, int64_t from, int64_t to);
/* The union of consumer group $1's effects (id, message_id, payment_id,
 * aggregate_version, tbl), and the count of every effect row of every
 * group: statements built once, never freed. */
const char *chk_effects_sql(void);
const char *chk_effects_total_sql(void);
/* The same union with what each effect recorded of its event: id,
 * message_id, payment_id, aggregate_version, event_type, money (the table
 * records amount and currency), amount, currency, tbl. */
const char *chk_effects_fields_sql(void);
/* A publish line of the broker log; one the broker stored. */
int chk_is_publish(const cJSON *ev);
int chk_publish_stored(const cJSON *ev);
/* checker_event_lacks over the whole input: 0, or -1 with res->error
 * naming the process, the event's position and the field. */
int chk_input_lacks(const struct chk_input *in, struct chk_result *res);

/* ---- checker_answers.c --------------------------------------------------- */

/* A request that changes a payment: POST /payments/{id}/authorize|capture. */
struct chk_transition {
    char payment_id[40];      /* lowercased, from the path */
    const char *verb;         /* "authorize", "capture" */
    const char *event_type;   /* the event it commits: "PaymentAuthorized", ... */
    const char *status;       /* the status it moves the payment to */
};
/* 1 and t filled when h is a transition, else 0. */
int chk_transition(const struct http_rec *h, struct chk_transition *t);
/* A payment status's place in its life (created 1, authorized 2,
 * captured 3), 0 when unknown. */
int chk_status_rank(const char *status);

/* ---- checker_delivery.c -------------------------------------------------- */

/* Does the scenario plant event id as poison input ("poison_events")? */
int chk_names_poison(const struct scenario *sc, const char *id);

/* Whether an older version of o's aggregate was dead-lettered by a relay. */
int chk_behind_dead_letter(const struct chk_ctx *c, const struct orow *o);

/* ---- the judges, one per invariant (the table of invariants.c) ------------
 * Each marks its invariant ran and counts what it checked and what broke it
 * in c->res->inv[]; a failed query leaves c failed (chk_query). */
void inv_payment_one_creation_event(struct chk_ctx *c);
void inv_nothing_lost(struct chk_ctx *c);
void inv_effect_once(struct chk_ctx *c);
void inv_broker_log_matches_outbox(struct chk_ctx *c);
void inv_republish_same_payload(struct chk_ctx *c);
void inv_versions_in_order(struct chk_ctx *c);
void inv_ack_after_commit(struct chk_ctx *c);
void inv_marks_committed(struct chk_ctx *c);
void inv_no_two_live_leases(struct chk_ctx *c);
void inv_retry_respects_backoff(struct chk_ctx *c);
void inv_dead_letter_at_limit(struct chk_ctx *c);
void inv_publish_within_lease(struct chk_ctx *c);
void inv_idle_transactions_bounded(struct chk_ctx *c);
void inv_relay_recovers_after_heal(struct chk_ctx *c);
void inv_one_payment_per_key(struct chk_ctx *c);

/* ---- checker_hazard.c ---------------------------------------------------- */

/* Finds when the scenario's hazard began (the runner's log). */
void chk_load_hazard(struct chk_ctx *c);
/* 1 when the scenario's hazard explains a violation witnessed by event id
 * (for consumer group group, or NULL for any), within its bound. */
int chk_hazard_event(struct chk_ctx *c, const char *id, const char *group);
/* 1 when it explains that the payment of h, a 2xx creation answer, is not
 * in the database, within its bound. */
int chk_hazard_payment(struct chk_ctx *c, const struct http_rec *h);

/* ---- checker_classify.c -------------------------------------------------- */

/* The counts of result.json into c->res, but republished_same_id, which
 * republish_same_payload counts. */
void chk_counts(struct chk_ctx *c);
/* The broker log's publishes (stored and refused), deliveries and
 * redeliveries into c->res. */
void chk_count_broker_log(struct chk_ctx *c);
/* Every outbox event into exactly one class (checker.h) in c->res. */
void chk_classify(struct chk_ctx *c);

#endif
