/* scenario.h -- failure scenarios as data: parsing, validation, description.
 *
 * A scenario file (scenarios/NN-name.json) names its crash window, declares
 * the processes of the pipeline, drives them through steps (start, kill,
 * pause at a fault point, wait for a condition, ...), and lists the
 * invariants it must prove plus the expectations specific to its case.
 * Like PostgreSQL's isolation specs, a scenario is data: the runner can
 * print what it will do (--dry-run) without doing it.
 *
 * Shape (every field is validated; errors name the file and the field,
 * e.g. "scenarios/04.json: steps[3].proc: unknown process 'relay-9'"):
 *
 *   {"name": "04-crash-after-publish", "title": "...", "article_case": 4,
 *    "crash_window": "relay/after_publish",
 *    "processes": {"api": {"kind": "api"},
 *                  "relay-1": {"kind": "relay", "args": {"lease-ms": 800},
 *                              "faults": "relay/after_publish=crash@1"},
 *                  "accounting": {"kind": "consumer", "args": {"name": "accounting"},
 *                                 "autostart": false}},
 *    "broker": {"visibility_timeout_ms": 3000, "duplicate": true},
 *    "steps": [{"do": "payments", "count": 5},
 *              {"do": "wait", "until": "exited", "proc": "relay-1", "timeout_ms": 10000},
 *              {"do": "restart", "proc": "relay-1"}],
 *    "heal": {"timeout_ms": 20000},
 *    "invariants": ["nothing_lost", "effect_once"],
 *    "expect": [{"check": "republished_same_id", "min": 1}]}
 *
 * Processes are started in declaration order before the steps unless
 * "autostart": false; "faults" (the CW_FAULTS grammar of src/core/fault.h) applies
 * to that first start only.  The heal phase restarts every declared process
 * unless "heal": false.  The fake broker is implicit and always runs.
 *
 * A field the runner would not act on is an error, not a no-op: "faults" on
 * a process that does not autostart (its faults belong on its start step),
 * "count" on a wait for a condition that counts nothing, "proc" on an
 * expectation about a counter, and so on.  A scenario that needs time to
 * pass says so with {"do": "sleep", "ms": N}; a wait is for a condition.
 * A wait that fails its scenario when the condition does not hold in time
 * may instead be an anchor, "on_timeout": "continue": it waits for a moment
 * that may not come (the simulator waits for a park before the step that
 * resumes it, so every replay takes the two in the same order) and goes on,
 * logging wait_timeout.
 *
 * Every fault a scenario arms must fire: one that never does means the run
 * never reached the window the scenario is about, and the scenario fails.
 * Network faults: every process reaches PostgreSQL and the broker through
 * links of its own, "<proc>->pg" and "<proc>->broker" (sim/netproxy), and a
 * step {"do": "net", "link": "relay-1->pg", "fault": "blackhole", "ms": 3000}
 * sets a fault on one (netproxy.h lists the faults and their fields), or
 * {"do": "net", "link": ..., "clear": true} clears them.  A "window" fault
 * is a crash window hit from the wire: at a named frame the proxy kills or
 * pauses the link's process (the runner gives its pid; a scenario names
 * none), and it must fire like an armed fault point.  A process may run
 * with a shifted or drifting clock: "clock": {"offset_s": -30, "rate": 1.5}
 * (libfaketime).  "db_deadline_ms" bounds each of its database calls
 * (CW_DB_DEADLINE_MS; src/core/pgx.h).
 *
 * "faults_optional": true relaxes that for generated schedules (the
 * simulator's), whose faults may legitimately lie beyond what a run reaches;
 * unhit faults are then only noted. */
#ifndef CW_SCENARIO_H
#define CW_SCENARIO_H

#include "netproxy.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdio.h>

#define SC_MAX_PROCS 16
#define SC_MAX_ARGS 24
#define SC_NAME_MAX 32
#define SC_MAX_POISON 16
/* A payments step's client repeats an answer of 503 or 409 with Retry-After
 * this many times by default, with the same key and body, as the article's
 * client does: a busy machine must not fail a scenario whose pipeline did
 * nothing wrong.  Every answer stays in the HTTP log and is judged. */
#define SC_BUSY_RETRIES 3
/* The longest Retry-After the runner waits out, in ms. */
#define SC_BUSY_WAIT_MAX_MS 2000

enum sc_kind { SC_API = 0, SC_RELAY, SC_CONSUMER };

struct sc_proc {
    char name[SC_NAME_MAX];
    enum sc_kind kind;
    int nargs;
    const char *arg_key[SC_MAX_ARGS];   /* without the leading "--" */
    char *arg_val[SC_MAX_ARGS];         /* owned; NULL for a bare flag */
    const char *faults;                 /* CW_FAULTS for the autostart, or NULL */
    int autostart;
    int heal;
    /* Derived from args, for the checker. */
    const char *consumer_name;          /* consumers: --name, default "accounting" */
    const char *group;                  /* consumers: --group, default the name */
    int max_attempts;                   /* relays: --max-attempts, default 12 */
    int lease_ms;                       /* relays: --lease-ms, default 30000 */
    int per_aggregate;                  /* relays: --order per-aggregate */
    /* "clock": libfaketime's FAKETIME for this process, or "" */
    char faketime[48];
    double clock_rate;                  /* its "rate" (1: real time) */
    int db_deadline_ms;                 /* "db_deadline_ms": CW_DB_DEADLINE_MS, 0: default */
};

enum sc_verb {
    V_START, V_RESTART, V_STOP, V_KILL, V_PAUSE, V_RESUME, V_FAULT, V_HTTP,
    V_PAYMENTS, V_BROKER, V_SQL, V_OUTBOXCTL, V_WAIT, V_DB, V_BROKER_CRASH, V_SLEEP, V_NET, V_SCRAPE
};

/* What a "db" step does to PostgreSQL itself: freeze and terminate are
 * sim/pgfault/pgfault.h's; crash, restart, failover and stalled replication
 * are scripts/pg-cluster's verbs, driven by sim/runner/runner_dbfault.c. */
enum sc_db_action {
    DB_CRASH = 0,          /* immediate shutdown (crash recovery), down_ms, start */
    DB_RESTART,            /* fast shutdown and start */
    DB_TERMINATE,          /* pg_terminate_backend: one process's sessions, or all */
    DB_FREEZE,             /* SIGSTOP the server for ms, then SIGCONT */
    DB_FAILOVER,           /* kill the primary, promote the standby */
    DB_STALL_REPLICATION,  /* the standby stops receiving WAL (detached from the primary) */
    DB_HOLD_COMMITS,       /* for ms every commit waits, its WAL flushed, for a synchronous
                            * standby that never answers: durable, not yet visible */
    DB_LOCK,               /* for ms one table is locked ACCESS EXCLUSIVE by another
                            * session (a migration): statements on it wait or are refused */
    DB_DEADLOCK,           /* another session takes locks ("first"), waits until a process
                            * waits on it, then waits on that process ("then"): a cycle that
                            * PostgreSQL breaks by refusing the process's statement (40P01) */
    DB_REFUSE,             /* PostgreSQL refuses a process's insert, update or delete on one
                            * table, or the COMMIT after it, with a chosen SQLSTATE (a
                            * trigger raises it): a serialization failure, a full disk, a
                            * refused statement on a live connection */
    DB_SEVER               /* as DB_REFUSE, but the process's session is ended there (the
                            * trigger terminates its own backend): the connection is lost
                            * at that very statement or COMMIT, with nothing committed */
};

enum sc_until {
    U_EXITED, U_PARKED, U_EVENT, U_PUBLISHED, U_CONSUMED, U_DEAD_LETTERED,
    U_LEASE_EXPIRED, U_QUIET, U_SQL
};

/* One step.  Strings borrow from the scenario's JSON tree unless their
 * comment says otherwise. */
struct sc_step {
    enum sc_verb verb;
    int proc;                 /* index into processes, -1 when none */
    const char *why;          /* free text shown by --dry-run */
    int timeout_ms;           /* wait/stop/http/outboxctl bound */
    int wait_continue;        /* wait: "on_timeout":"continue" (default "fail") */
    /* start, restart */
    const char *faults;
    /* fault */
    const char *point;
    const char *action;       /* crash|fail|park|stall:MS; NULL with disable */
    int disable;
    /* http */
    const char *name;
    const char *method;
    const char *path;
    char *body;               /* owned (serialized when given as an object) */
    const char *key;
    const cJSON *headers;
    const char *same_as;
    int expect_status;        /* 0: not checked */
    /* payments */
    int count;
    const char *key_prefix;
    const char *amount;
    const char *currency;
    int concurrency;
    int retries;
    int busy_retries;         /* 503s and 409s with Retry-After repeated, as a client would */
    int timeout_retries;      /* a request unanswered within timeout_ms sent again */
    int authorize, capture;
    int background;           /* the steps go on; the heal phase waits for it */
    /* broker */
    const cJSON *control;
    /* sql (also wait until sql) */
    const char *sql;
    int expect_rows;          /* -1: not checked */
    /* outboxctl */
    int argc;
    const char *argv[16];
    int expect_exit;          /* -1: not checked */
    const char *expect_output;
    /* scrape: a series ("name{labels}") whose value must lie in [series_min,
     * series_max] (-1: that side unbounded) */
    const char *series;
    int series_min, series_max;
    /* db, broker_crash */
    enum sc_db_action db_action;
    int ms;                   /* freeze, hold_commits, lock, sleep: how long; deadlock:
                               * the longest wait for a process to wait on it */
    const char *table;        /* lock, refuse: the table, possibly schema-qualified */
    const char *refuse_on;    /* refuse: "insert", "update" or "delete" */
    char refuse_of[280];      /* refuse, update: only those setting these columns
                               * ("a, b"; empty: any update) */
    const char *sqlstate;     /* refuse: the SQLSTATE raised (five digits or capitals) */
    int refuse_at_commit;     /* refuse: at the COMMIT ("at": "commit"), not the statement */
    int refuse_times;         /* refuse: how many statements (or commits) are refused */
    int refuse_skip;          /* refuse: matching ones let pass first */
    int refuse_must_fire;     /* refuse: a refusal that refused nothing fails the scenario
                               * (default); "must_fire": false lets it pass (a simulator's
                               * schedule, drawn blind) */
    const char *first;        /* deadlock: the statements that take the locks waited on */
    const char *then;         /* deadlock: the statements that wait on the waiter */
    int down_ms;              /* crash, broker_crash: down before the start */
    /* net: a fault on one process's link ("relay-1->pg"); proc is the
     * link's process, net_peer its protocol */
    const char *link;
    enum np_proto net_peer;
    int net_clear;            /* clear every fault of the link */
    int net_producer_broker;  /* the link is api->broker: only a target's producer
                               * may publish (ours never does; the runner refuses it
                               * without --target) */
    int reconnect_within_ms;  /* > 0: the process must open a new connection on
                               * the link within this bound of the fault */
    struct np_fault net;
    /* wait */
    enum sc_until until;
    const char *event;
    const char *where_key;
    const char *where_value;  /* borrowed from the tree, or "true"/"false", or
                               * where_buf holding a number's text (so a
                               * copy of the step still points into this
                               * one's buffer) */
    char where_buf[32];
    const char *consumer;
};

enum sc_invariant {
    INV_PAYMENT_ONE_CREATION_EVENT = 0,
    INV_NOTHING_LOST,
    INV_EFFECT_ONCE,
    INV_BROKER_LOG_MATCHES_OUTBOX,
    INV_REPUBLISH_SAME_PAYLOAD,
    INV_NO_TWO_LIVE_LEASES,
    INV_RETRY_RESPECTS_BACKOFF,
    INV_DEAD_LETTER_AT_LIMIT,
    INV_VERSIONS_IN_ORDER,
    INV_ONE_PAYMENT_PER_KEY,
    INV_PUBLISH_WITHIN_LEASE,
    INV_IDLE_TRANSACTIONS_BOUNDED,
    INV_RELAY_RECOVERS_AFTER_HEAL,
    INV_ACK_AFTER_COMMIT,
    INV_MARKS_COMMITTED,
    INV_COUNT
};

/* One expectation specific to the scenario's case. */
/* The events a hazard can explain ("hazard": {"explains": ...}): its bound. */
enum sc_hazard_kind {
    SC_HAZARD_NONE,
    /* committed on the primary after replication to its asynchronous
     * standby stalled, then lost with the failover: absent from the
     * database, first stored by the broker (or acknowledged to the client)
     * after the stall began */
    SC_HAZARD_REPLICATION_STALL,
    /* held only in the memory of a broker that was killed: stored by it
     * before the crash, never acknowledged by the group, never stored again */
    SC_HAZARD_BROKER_MEMORY,
};

struct sc_expect {
    const char *check;
    int has_min, has_max, has_equals;
    long long min, max, equals;
    const char *proc;        /* events: that process only */
    int proc_idx;
    const char *event;
    const char *where_key, *where_value;   /* as in struct sc_step */
    char where_buf[32];
    const char *point;       /* faults_fired */
    const char *sql;         /* sql: first column of the first row */
    const char *request;     /* http_status: name of an http step */
    const char *key_prefix;  /* applied_payments: the payments' idempotency keys' prefix */
    const char *why;
};

struct scenario {
    cJSON *root;             /* the file as parsed; everything borrows from it */
    char *path;              /* as given */
    const char *name;
    const char *title;
    const char *crash_window;
    int article_case;        /* 0 when null/absent */
    int nprocs;
    struct sc_proc procs[SC_MAX_PROCS];
    int visibility_timeout_ms;   /* broker; 0: the broker's default */
    const cJSON *broker_control; /* broker switches applied after it starts, or NULL */
    int nsteps;
    struct sc_step *steps;
    int heal_timeout_ms;
    int timeout_ms;          /* whole scenario */
    int faults_optional;     /* an armed fault that never fires does not fail the run */
    int heal_restart;        /* heal restarts dead processes (default); 0: a dead
                              * process is a failure, recovery is the processes' job */
    /* "database": the scenario's own primary + streaming standby */
    int standby;
    int synchronous;         /* synchronous_standby_names = '*' */
    int broker_durable;      /* "broker": {"durable": true}: the store is a file */
    /* "hazard": a setting known to lose data; the scenario proves the
     * checker catches the loss: each invariant here must fail, on
     * violations the hazard explains alone (checker.h), and the hazard
     * explains no more than hazard_at_most events. */
    int nhazard;
    enum sc_invariant hazard[INV_COUNT];
    const char *hazard_why;
    enum sc_hazard_kind hazard_explains;
    int hazard_at_most;
    /* "poison_events": event ids the scenario plants as poison input; a
     * consumer parking one of these is its correct outcome, and only
     * these may end parked (checker.h). */
    int npoison;
    const char *poison[SC_MAX_POISON];
    int ninvariants;
    enum sc_invariant invariants[INV_COUNT];
    int nexpect;
    struct sc_expect *expect;
};

/* Loads and validates a scenario file.  known_points (NULL-terminated, may
 * be NULL to skip the check) are the catalogued fault point names.  Returns
 * NULL with "FILE: FIELD: problem" in err. */
struct scenario *scenario_load(const char *path, const char *const *known_points,
                               char *err, size_t errlen);
/* The same from text (path is used in messages only). */
struct scenario *scenario_parse(const char *text, const char *path,
                                const char *const *known_points,
                                char *err, size_t errlen);
void scenario_free(struct scenario *sc);

/* Names, for messages and result.json. */
const char *sc_kind_name(enum sc_kind k);
const char *sc_verb_name(enum sc_verb v);
const char *sc_until_name(enum sc_until u);
const char *sc_db_action_name(enum sc_db_action a);
const char *sc_invariant_name(enum sc_invariant i);
/* "replication_stall", "broker_memory" (or "none"). */
const char *sc_hazard_kind_name(enum sc_hazard_kind k);
/* Whether invariant inv is one the scenario's hazard must catch. */
int sc_is_hazard_invariant(const struct scenario *sc, int inv);
/* -1 when name is not an invariant. */
int sc_invariant_from_name(const char *name);

/* 1 when field of a scenario's "broker" object is a setting of the broker
 * at its start (visibility_timeout_ms, durable), 0 when it is a switch. */
int sc_broker_is_setting(const char *field);

/* The faults a set of broker switches turns on and off, for the fault
 * count and the report's timeline: on gets "outage=refuse duplicate", one
 * switch and its value per word; off the switches set back to their
 * default ("outage" for "off", every one for "reset").  A "reset" beside
 * switches is applied first, as the broker applies it. */
void sc_broker_faults(const cJSON *control, char *on, size_t onlen, char *off, size_t offlen);

/* 1 when the scenario has relays and every one publishes in per-aggregate
 * order (--order per-aggregate), which holds a version back while an older
 * one of its aggregate is unpublished, a dead-lettered one included, until
 * an operator requeues it (src/relay/relay_store.c).  With a FIFO relay
 * about nothing holds it back. */
int scenario_relays_hold_order(const struct scenario *sc);

/* A copy of broker switches fit to show (caller deletes): a refuse_error's
 * text, which may be a planted secret, is replaced by its length. */
cJSON *sc_control_for_display(const cJSON *control);

/* A scrape series' bounds in words: "at least 1", "at most 5", "1 to 2". */
void sc_series_bounds(const struct sc_step *st, char *out, size_t len);

/* One line in words: "kill relay-1 (SIGKILL)", "wait until relay-1 exited
 * (10000 ms)".  Used by --dry-run and the progress lines. */
void scenario_step_describe(const struct scenario *sc, const struct sc_step *st,
                            char *out, size_t outlen);

/* Prints what the scenario will do, without doing it. */
void scenario_print(const struct scenario *sc, FILE *f);

/* Validates a CW_FAULTS value with the parser a process uses
 * (fault_parse_items, src/core/fault.h: NAME=crash|fail|park|stall:MS[@N][+]
 * items separated by ';'), so that a value valid here is one a process
 * takes; and further: its names among known_points when given, at least
 * one item, fewer than 1024 characters.  0, or -1 with a message in err
 * (without the file/field prefix). */
int scenario_check_faults(const char *spec, const char *const *known_points,
                          char *err, size_t errlen);

/* The point names a CW_FAULTS value enables, in its order, into names[max]
 * (pointers into buf, which receives copies of them; a name that does not
 * fit is left out).  Returns the count: 0 for a value the grammar refuses. */
int scenario_fault_points(const char *spec, char *buf, size_t buflen,
                          const char **names, int max);

#endif
