/* checker.h -- the invariant checker: named checks over SQL and the logs.
 *
 * After the heal phase the runner hands the checker the scenario's database,
 * the broker's log (every publish with its payload hash, every delivery),
 * each process's events (the relays' claims, marks and retries) and its own
 * HTTP log (what the client saw).  What each invariant asserts, what it
 * reads and which function judges it is one table, invariants.h's
 * (`crashwindow invariants` prints it; docs/invariants.md holds it).  Each
 * invariant returns how many things it checked, how many broke it, and up
 * to CHK_MAX_WITNESSES offending rows in plain words ("event E was applied
 * 2 times by accounting: ledger rows 17 and 18").  An invariant the
 * scenario lists that checked nothing fails as vacuous: a scenario that
 * never exercises its window proves nothing.
 *
 * The checker also classifies every outbox event, each into exactly one
 * class, as a Jepsen queue check does: ok, lost (some consumer group
 * neither applied nor parked it), duplicated (an effect twice), unexpected
 * (an effect without a committed outbox event), recovered (the client saw
 * an error or a timeout, yet the payment exists and its event was
 * delivered), dead-lettered (by the relay at its attempt limit, or parked
 * by a consumer behind such a version) and parked-and-unresolved (a
 * consumer group parked it and nothing will apply it).  Parking excuses
 * nothing: nothing_lost fails on a parked-and-unresolved event unless the
 * scenario plants it as poison and names it ("poison_events"), and no
 * expectation switches that off.
 *
 * In a hazard scenario (a setting known to lose data), a violation is
 * excused only when its witness is an event the hazard explains, within
 * the hazard's bound (checker_hazard.c); every other one counts as in any
 * scenario. */
#ifndef CW_CHECKER_H
#define CW_CHECKER_H

#include "scenario.h"

#include <cjson/cJSON.h>
#include <libpq-fe.h>
#include <stdint.h>

#define CHK_MAX_WITNESSES 20

/* The X-Client-Id the runner sends when a step names none (the API
 * refuses a request without one). */
#define CHK_DEFAULT_CLIENT "crashwindow"

/* One request the runner made to the API, as the client saw it. */
struct http_rec {
    int step;               /* index of the step that made it */
    char name[32];          /* the http step's name, or "" */
    char method[8];
    char path[160];
    char client[64];        /* X-Client-Id, or CHK_DEFAULT_CLIENT */
    char key[160];          /* Idempotency-Key, or "" (keys are per client) */
    int creation;           /* POST /payments */
    int status;             /* 0: no complete response (crash, timeout) */
    char *body;             /* owned; the live run's only: the checker reads the digests */
    char body_sha256[65];   /* hex SHA-256 of the body: equal answers, equal digests */
    char body_shown[160];   /* the body as witnesses show it (redact.h) */
    char problem[64];       /* a problem body's type, its last path segment; or "" */
    char error[160];
    char payment_id[40];    /* "id" of a JSON response body, or "" */
    int64_t t0_us, t1_us;
};

struct chk_inv {
    int ran;
    int not_examined;       /* a target's evidence cannot show it: neither pass nor fail */
    const char *explains;   /* a target's known finding: the text its witnesses carry */
    long explained;         /* violations whose witness carries it */
    long hazard_explained;  /* violations whose witness the scenario's hazard explains */
    int pass;
    long checked;
    long violations;
    cJSON *witnesses;       /* array of strings, at most CHK_MAX_WITNESSES */
};

struct chk_result {
    struct chk_inv inv[INV_COUNT];
    /* counts of result.json */
    long payments, outbox_rows, published, dead_lettered, publishes, deliveries,
        redeliveries, duplicates_absorbed, effects;
    /* classification */
    long ok, lost, duplicated, unexpected, recovered, dead_lettered_class;
    long lost_recoverable;   /* of the lost, those a client saw an error for (they
                              * would have been recovered) */
    long parked;            /* parked-and-unresolved */
    /* further figures for "expect" */
    long republished_same_id, publishes_refused, requeues, gaps_detected, max_attempts;
    long removed;           /* outbox rows the runbook removed (outboxctl cleanup) */
    long inbox_removed;     /* inbox markers it removed (outboxctl cleanup-inbox) */
    /* a hazard scenario's: the distinct events, and acknowledged payments,
     * whose violations its hazard explains (checker_hazard.c) */
    long hazard_events, hazard_payments;
    char error[512];        /* the checker itself could not run (SQL failed) */
};

struct chk_input {
    const struct scenario *sc;
    PGconn *conn;
    const cJSON *proc_events[SC_MAX_PROCS];  /* arrays, one per scenario process */
    const cJSON *broker_events;              /* array */
    const struct http_rec *http;
    int nhttp;
    const cJSON *samples;                    /* the runner's database samples, or NULL */
    const cJSON *runner_events;              /* the runner's own log (its faults), or NULL */
    /* A target's known findings for this scenario: per invariant, the text
     * a violation's witness carries when the finding explains it (one line
     * per finding when several name the invariant), or NULL. */
    const char *explains[INV_COUNT];
};

/* Where an event log comes from, for the fields the checker reads in it. */
enum chk_source { CHK_SRC_RELAY, CHK_SRC_BROKER, CHK_SRC_OTHER };

/* NULL when ev carries every field the checker reads in an event of its
 * name from src, each under the one name its writer gives it and of the
 * writer's type; else the name of the first field it lacks.  A line that
 * lacks one is an error of the history (history_read names the file and
 * line), never skipped: evidence the checker cannot read proves nothing. */
const char *checker_event_lacks(enum chk_source src, const cJSON *ev);

/* Runs every invariant and fills res.  Returns 0, or -1 when the database
 * could not be read or an event lacks a field checker_event_lacks names
 * (res->error says why; the invariants that could not run are marked
 * failed). */
int checker_run(const struct chk_input *in, struct chk_result *res);
void checker_free(struct chk_result *res);

/* The invariants on a target (checker_target.c): judged from its
 * profile's mapping views (cw_target_outbox and cw_target_effects, and
 * cw_target_acknowledged when acknowledged_mapped), the broker log and the
 * runner's HTTP log; every invariant that reads our own pipeline's insides
 * is marked not_examined.  0, or -1 when the views could not be read. */
int checker_run_target(const struct chk_input *in, int acknowledged_mapped,
                       struct chk_result *res);
/* 1 when invariant inv can be judged on a target. */
int checker_target_judges(int inv);
/* 1 when inv failed, and a known finding of the target explains every one
 * of its violations: the finding reproduced, not a failure of the run. */
int checker_inv_finding(const struct chk_result *res, int inv);

/* A hazard scenario's invariant (one its "hazard" names as catching the
 * loss): 0 when inv is not one; else whether it caught the loss, each of
 * its violations one the hazard explains (checker_hazard.c), reported
 * nothing, or reported a violation the hazard does not explain -- which
 * fails it as in any scenario. */
enum { CHK_HAZARD_CAUGHT = 1, CHK_HAZARD_NOT_CAUGHT, CHK_HAZARD_UNEXPLAINED };
int checker_inv_hazard(const struct chk_result *res, const struct scenario *sc, int inv);

/* 1 when sc's hazard explains that consumer group never applied event id,
 * which the database holds published: broker_memory's loss (the broker
 * stored it before the crash the runner's log records, no later broker
 * instance stored it, the group never acknowledged it).  The heal accepts
 * such an event, and no other, as never consumed. */
int checker_hazard_explains_unconsumed(const struct scenario *sc, const cJSON *broker_events,
                                       const cJSON *runner_events, const char *id,
                                       const char *group);

/* The verdict of one invariant for the scenario: violations fail it, and so
 * does checking nothing when the scenario lists it. */
int checker_inv_pass(const struct chk_result *res, const struct scenario *sc, int inv);
/* 1 when the invariant ran and examined nothing: vacuous, shown as such;
 * a failure only when the scenario lists it (checker_inv_pass). */
int checker_inv_vacuous(const struct chk_result *res, int inv);

/* Evaluates one expectation; writes "republished_same_id = 2 (want >= 1)"
 * into detail.  Returns 1 pass, 0 fail. */
int checker_expect(const struct chk_input *in, const struct chk_result *res,
                   const struct sc_expect *x, char *detail, size_t detaillen);

/* The JSON objects of result.json: "counts", "classification", and the
 * "invariants" array (caller frees). */
cJSON *checker_counts_json(const struct chk_result *res);
cJSON *checker_class_json(const struct chk_result *res);
cJSON *checker_invariants_json(const struct chk_result *res, const struct scenario *sc);

/* The one definition of "published but not consumed yet" by consumer group
 * $1 (the statement's only parameter): published events the group has
 * neither applied (no row of it in any effect table) nor parked (a consumer
 * dead letter, a poison or gap_parked anomaly).  Columns: id, event_type,
 * aggregate_version, aggregate_id, in claim order.  The runner's heal waits
 * until it is empty for every group; nothing_lost reports what is left. */
const char *checker_unconsumed_sql(void);
/* The same, counted: one row, one bigint. */
const char *checker_unconsumed_count_sql(void);

/* Sanitization test used by dead_letter_at_limit (exposed for unit tests):
 * 1 when sanitizing err again changes nothing (cw_sanitize_error's result
 * is a fixed point, so a stored error that it would still change held
 * something it removes: a secret, a payload fragment), err is bounded, and
 * it holds no 16-byte run of the payload.  A keyword list would not do:
 * "password authentication failed" is what libpq says, not a secret. */
int checker_error_sanitized(const char *err, const char *payload, char *why, size_t whylen);

#endif
