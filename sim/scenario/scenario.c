/* scenario.c -- loading and validating scenario files; see scenario.h.
 *
 * Validation is strict on purpose: a misspelt field ("procs" for "proc", a
 * wait without a timeout) would otherwise make a scenario silently prove
 * less than its author thinks.  Every object is checked against the list of
 * fields its kind allows, and every message carries the file and the JSON
 * path of the offending field.  The parsed scenario keeps the cJSON tree and
 * borrows its strings, so nothing is copied twice.
 *
 * This file reads the file as a whole (the top-level fields, processes,
 * broker, database, invariants, expectations) and holds the field helpers
 * of scenario_internal.h; each step is read by its verb's parser in
 * scenario_steps.c, and scenario_describe.c says in words what a parsed
 * scenario will do. */
#include "scenario.h"
#include "scenario_internal.h"
#include "fault.h"
#include "api_options.h"
#include "consumer_options.h"
#include "relay_options.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *const sc_kind_names[] = { "api", "relay", "consumer" };
const char *const sc_verb_names[] = {
    "start", "restart", "stop", "kill", "pause", "resume", "fault", "http",
    "payments", "broker", "sql", "outboxctl", "wait", "db", "broker_crash", "sleep",
    "net", "scrape"
};
const char *const sc_db_action_names[] = {
    "crash", "restart", "terminate", "freeze", "failover", "stall_replication", "hold_commits",
    "lock", "deadlock", "refuse", "sever"
};
const char *const sc_until_names[] = {
    "exited", "parked", "event", "published", "consumed", "dead_lettered",
    "lease_expired", "quiet", "sql"
};
const char *const sc_invariant_names[] = {
    "payment_one_creation_event", "nothing_lost", "effect_once",
    "broker_log_matches_outbox", "republish_same_payload", "no_two_live_leases",
    "retry_respects_backoff", "dead_letter_at_limit", "versions_in_order",
    "one_payment_per_key", "publish_within_lease", "idle_transactions_bounded",
    "relay_recovers_after_heal", "ack_after_commit", "marks_committed"
};

/* Checks available in "expect": the counters of result.json, the
 * classification, and a few computed ones that take parameters. */
static const char *const expect_checks[] = {
    "payments", "outbox_rows", "published", "dead_lettered", "publishes",
    "deliveries", "redeliveries", "duplicates_absorbed", "effects",
    "ok", "lost", "duplicated", "unexpected", "recovered", "parked",
    "republished_same_id", "publishes_refused", "requeues", "removed", "inbox_removed",
    "gaps_detected",
    "max_attempts", "events", "faults_fired", "sql", "http_status", "applied_payments", NULL
};

/* Broker switches a scenario may set (sim/fakebroker/fakebroker.h). */
static const char *const broker_switches[] = {
    "outage", "duplicate", "delay_ms", "reorder", "drop_before_confirm",
    "visibility_timeout_ms", "max_payload_bytes", "reset", "refuse_error",
    "close_connections", NULL
};

/* The "broker" members that configure the broker at its start; every other
 * member is a switch applied once it runs (broker_control). */
static const char *const broker_settings[] = { "visibility_timeout_ms", "durable", NULL };

cJSON *sc_control_for_display(const cJSON *control)
{
    cJSON *c = cJSON_Duplicate(control, 1);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(c, "refuse_error");
    if (cJSON_IsString(e)) {
        char text[64];
        snprintf(text, sizeof(text), "(%zu bytes, not shown)", strlen(e->valuestring));
        cJSON_ReplaceItemInObjectCaseSensitive(c, "refuse_error", cJSON_CreateString(text));
    }
    return c;
}

const char *sc_kind_name(enum sc_kind k) { return sc_kind_names[k]; }
const char *sc_verb_name(enum sc_verb v) { return sc_verb_names[v]; }
const char *sc_until_name(enum sc_until u) { return sc_until_names[u]; }
const char *sc_db_action_name(enum sc_db_action a) { return sc_db_action_names[a]; }
const char *sc_invariant_name(enum sc_invariant i) { return sc_invariant_names[i]; }

static const char *const sc_hazard_kind_names[] = { "none", "replication_stall",
                                                    "broker_memory" };
const char *sc_hazard_kind_name(enum sc_hazard_kind k) { return sc_hazard_kind_names[k]; }

int sc_is_hazard_invariant(const struct scenario *sc, int inv)
{
    for (int i = 0; i < sc->nhazard; i++)
        if ((int)sc->hazard[i] == inv)
            return 1;
    return 0;
}

int sc_invariant_from_name(const char *name)
{
    for (int i = 0; i < INV_COUNT; i++)
        if (strcmp(sc_invariant_names[i], name) == 0)
            return i;
    return -1;
}

int sc_broker_is_setting(const char *field)
{
    return field != NULL && jv_in_list(field, broker_settings);
}

/* The switches that change what the broker does to messages (a fault while
 * on); "reset" turns them all off, "refuse_error" only words a refusal. */
static const char *const broker_fault_switches[] = {
    "outage", "duplicate", "delay_ms", "reorder", "drop_before_confirm",
    "max_payload_bytes", "close_connections", NULL
};

/* On: a string other than "off", a number other than 0 (delay_ms 0,
 * drop_before_confirm 0 and max_payload_bytes 0 are the defaults: no
 * delay, no drop, no limit), or true. */
static int broker_switch_is_on(const cJSON *v)
{
    if (cJSON_IsString(v))
        return strcmp(v->valuestring, "off") != 0;
    if (cJSON_IsNumber(v))
        return v->valuedouble != 0;
    return cJSON_IsTrue(v);
}

void sc_broker_faults(const cJSON *control, char *on, size_t onlen, char *off, size_t offlen)
{
    size_t non = 0, noff = 0;
    on[0] = off[0] = '\0';
    const cJSON *reset = cJSON_GetObjectItemCaseSensitive(control, "reset");
    for (int i = 0; broker_fault_switches[i] != NULL; i++) {
        const char *name = broker_fault_switches[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(control, name);
        int is_on = v != NULL && broker_switch_is_on(v);
        if (is_on) {
            char value[48];
            if (cJSON_IsString(v))
                snprintf(value, sizeof(value), "=%.40s", v->valuestring);
            else if (cJSON_IsNumber(v))
                snprintf(value, sizeof(value), "=%.0f", v->valuedouble);
            else
                value[0] = '\0';
            int w = snprintf(on + non, onlen - non, "%s%s%s", non ? " " : "", name, value);
            if (w > 0 && (size_t)w < onlen - non)
                non += (size_t)w;
        } else if (v != NULL || cJSON_IsTrue(reset)) {
            int w = snprintf(off + noff, offlen - noff, "%s%s", noff ? " " : "", name);
            if (w > 0 && (size_t)w < offlen - noff)
                noff += (size_t)w;
        }
    }
}

static int valid_name(const char *s, size_t max, int allow_underscore)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-' || (allow_underscore && c == '_')))
            return 0;
    }
    return 1;
}

int scenario_fault_points(const char *spec, char *buf, size_t buflen,
                          const char **names, int max)
{
    struct fault_item items[FAULT_MAX_ITEMS];
    char err[256];
    int nitems = fault_parse_items(spec, items, err, sizeof(err));
    int n = 0;
    size_t used = 0;
    for (int i = 0; i < nitems && n < max; i++) {
        size_t len = strlen(items[i].name);
        if (used + len + 1 > buflen)
            break;
        memcpy(buf + used, items[i].name, len + 1);
        names[n++] = buf + used;
        used += len + 1;
    }
    return n;
}

/* The runner copies a value into 1024 bytes when it records the faults a
 * start arms (sim/runner/runner.c); a longer one would lose its tail there,
 * so the scenario refuses it, though a process would take it. */
#define SC_FAULTS_MAX 1024

int scenario_check_faults(const char *spec, const char *const *known_points,
                          char *err, size_t errlen)
{
    if (strlen(spec) >= SC_FAULTS_MAX) {
        snprintf(err, errlen, "too long");
        return -1;
    }
    struct fault_item items[FAULT_MAX_ITEMS];
    int n = fault_parse_items(spec, items, err, errlen);
    if (n < 0)
        return -1;
    for (int i = 0; known_points != NULL && i < n; i++) {
        if (!jv_in_list(items[i].name, known_points)) {
            snprintf(err, errlen, "unknown fault point '%s' (not in the catalogue)",
                     items[i].name);
            return -1;
        }
    }
    /* A process takes an empty value, but a "faults" field that arms
     * nothing is a field the runner would not act on. */
    if (n == 0) {
        snprintf(err, errlen, "no fault given");
        return -1;
    }
    return 0;
}

int sc_find_proc(const struct scenario *sc, const char *name)
{
    for (int i = 0; i < sc->nprocs; i++)
        if (strcmp(sc->procs[i].name, name) == 0)
            return i;
    return -1;
}

/* Renders a scalar arg value as command-line text; NULL for a bare flag. */
static int arg_text(const cJSON *it, char **out)
{
    char buf[64];
    if (cJSON_IsTrue(it)) {
        *out = NULL;
        return 0;
    }
    if (cJSON_IsString(it)) {
        *out = strdup(it->valuestring);
    } else if (cJSON_IsNumber(it)) {
        if (it->valuedouble == (double)(long long)it->valuedouble)
            snprintf(buf, sizeof(buf), "%lld", (long long)it->valuedouble);
        else
            snprintf(buf, sizeof(buf), "%g", it->valuedouble);
        *out = strdup(buf);
    } else {
        return -1;
    }
    return *out == NULL ? -1 : 0;
}

/* "clock": {"offset_s": N, "rate": X}: the process's clock is N seconds
 * off (-86400..86400) and runs X times as fast (0.5..2; 1 when absent), as
 * libfaketime's FAKETIME "+Ns xX" says it. */
static int parse_clock(struct jv_ctx *v, const cJSON *proc, const char *pfield, struct sc_proc *p)
{
    static const char *const fields[] = { "offset_s", "rate", NULL };
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(proc, "clock");
    char field[128];
    snprintf(field, sizeof(field), "%s.clock", pfield);
    p->faketime[0] = '\0';
    if (c == NULL)
        return 0;
    if (!cJSON_IsObject(c) || c->child == NULL)
        return jv_err(v, field, "must be an object with offset_s and/or rate");
    if (jv_only_fields(v, c, field, fields) < 0)
        return -1;
    long long off = 0;
    if (jv_int(v, c, "offset_s", field, 0, -86400, 86400, &off) < 0)
        return -1;
    const cJSON *rate = cJSON_GetObjectItemCaseSensitive(c, "rate");
    double x = 1.0;
    if (rate != NULL) {
        if (!cJSON_IsNumber(rate) || rate->valuedouble < 0.5 || rate->valuedouble > 2.0)
            return jv_err(v, field, "rate: must be a number from 0.5 to 2 (1: real time)");
        x = rate->valuedouble;
    }
    p->clock_rate = x;
    snprintf(p->faketime, sizeof(p->faketime), "%+llds", off);
    if (x != 1.0)
        snprintf(p->faketime + strlen(p->faketime), sizeof(p->faketime) - strlen(p->faketime),
                 " x%.3f", x);
    return 0;
}

static const char *const program_names[] = { "payments-api", "outbox-relay",
                                             "accounting-consumer" };

/* "--FLAG [VALUE]" read over the option table of kind's program. */
static int check_options(enum sc_kind kind, const char *flag, const char *val, char *err,
                         size_t errlen)
{
    char *argv[4] = { (char *)program_names[kind], (char *)flag, (char *)val, NULL };
    int argc = val != NULL ? 3 : 2;
    switch (kind) {
    case SC_API:
        return api_options_check(argc, argv, err, errlen);
    case SC_RELAY:
        return relay_options_check(argc, argv, err, errlen);
    case SC_CONSUMER:
        break;
    }
    return consumer_options_check(argc, argv, err, errlen);
}

/* Checks one of a process's "args" against its program's own option table
 * (the one the program parses its command line over), so that a misspelt
 * option or a value the program would refuse stops the scenario at load,
 * as a bad file, instead of a process that exits at start.  0, or -1 with
 * the error naming the field (which names the process and the option). */
static int check_arg(struct jv_ctx *v, const char *field, enum sc_kind kind, const char *key,
                     const char *val)
{
    const char *program = program_names[kind];
    char flag[48];
    snprintf(flag, sizeof(flag), "--%s", key);
    char err[384] = "";
    int rc = check_options(kind, flag, val, err, sizeof(err));
    if (rc == CW_OPTS_OK)
        return 0;
    if (rc == CW_OPTS_HELP)
        return jv_err(v, field, "%s is not a setting of %s", flag, program);
    if (rc == CW_OPTS_USAGE && val == NULL) {
        /* true: is the option unknown, or does it want a value? */
        if (check_options(kind, flag, "", err, sizeof(err)) != CW_OPTS_USAGE)
            return jv_err(v, field, "%s of %s takes a value (true is for options without one)",
                          flag, program);
    }
    if (rc == CW_OPTS_USAGE)
        return jv_err(v, field, "%s has no option %s", program, flag);
    return jv_err(v, field, "%s (%s)", err, program);
}

static int parse_proc(struct jv_ctx *v, struct scenario *sc, const cJSON *it)
{
    static const char *const fields[] = { "kind", "args", "faults", "autostart", "heal",
                                          "clock", "db_deadline_ms", "why", NULL };
    char field[96];
    snprintf(field, sizeof(field), "processes.%s", it->string);
    if (!valid_name(it->string, SC_NAME_MAX, 1))
        return jv_err(v, field, "process names are 1-31 of [a-z0-9_-], starting with a letter or digit");
    if (strcmp(it->string, "broker") == 0 || strcmp(it->string, "runner") == 0)
        return jv_err(v, field, "'%s' is reserved", it->string);
    if (!cJSON_IsObject(it))
        return jv_err(v, field, "must be an object");
    if (jv_only_fields(v, it, field, fields) < 0)
        return -1;
    if (sc->nprocs == SC_MAX_PROCS)
        return jv_err(v, "processes", "more than %d processes", SC_MAX_PROCS);
    struct sc_proc *p = &sc->procs[sc->nprocs];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", it->string);
    const char *kind = NULL;
    if (jv_str(v, it, "kind", field, 1, &kind) < 0)
        return -1;
    int k;
    for (k = 0; k < 3; k++)
        if (strcmp(kind, sc_kind_names[k]) == 0)
            break;
    if (k == 3)
        return jv_err(v, field, "kind: unknown kind '%s' (api, relay, consumer)", kind);
    p->kind = (enum sc_kind)k;
    p->autostart = 1;
    p->heal = 1;
    p->max_attempts = 12;
    p->lease_ms = 30000;
    p->clock_rate = 1.0;
    p->consumer_name = "accounting";
    sc->nprocs++; /* from here on scenario_free releases its args */
    if (jv_bool(v, it, "autostart", field, &p->autostart) < 0 ||
        jv_bool(v, it, "heal", field, &p->heal) < 0)
        return -1;
    if (parse_clock(v, it, field, p) < 0 ||
        jv_opt_int(v, it, "db_deadline_ms", field, 100, 600000, &p->db_deadline_ms) < 0)
        return -1;
    int r = jv_str(v, it, "faults", field, 0, &p->faults);
    if (r < 0)
        return -1;
    if (r == 1) {
        char msg[256];
        if (scenario_check_faults(p->faults, v->points, msg, sizeof(msg)) < 0)
            return jv_err(v, field, "faults: %s", msg);
        /* The runner arms these at the autostart only: without one they
         * would silently never be armed. */
        if (!p->autostart)
            return jv_err(v, field, "faults: ignored on a process with \"autostart\": false "
                           "(give them to the step that starts it)");
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(it, "args");
    if (args != NULL) {
        char af[128];
        snprintf(af, sizeof(af), "%s.args", field);
        if (!cJSON_IsObject(args))
            return jv_err(v, af, "must be an object of option: value");
        const cJSON *a;
        cJSON_ArrayForEach(a, args) {
            char f2[192];
            snprintf(f2, sizeof(f2), "%s.%s", af, a->string);
            if (!valid_name(a->string, 40, 0))
                return jv_err(v, f2, "option names are [a-z0-9-] without the leading --");
            static const char *const reserved[] = { "db", "broker", "events", "listen", "socket", NULL };
            if (jv_in_list(a->string, reserved))
                return jv_err(v, f2, "--%s is set by the runner", a->string);
            if (cJSON_IsFalse(a))
                continue;
            if (p->nargs == SC_MAX_ARGS)
                return jv_err(v, af, "more than %d options", SC_MAX_ARGS);
            char *val = NULL;
            if (arg_text(a, &val) < 0)
                return jv_err(v, f2, "must be a string, a number or true");
            p->arg_key[p->nargs] = a->string;
            p->arg_val[p->nargs] = val;
            p->nargs++;
            if (check_arg(v, f2, p->kind, a->string, val) < 0)
                return -1;
            if (strcmp(a->string, "name") == 0 && val != NULL)
                p->consumer_name = val;
            if (strcmp(a->string, "group") == 0 && val != NULL)
                p->group = val;
            if (strcmp(a->string, "max-attempts") == 0 && val != NULL)
                p->max_attempts = atoi(val);
            if (strcmp(a->string, "lease-ms") == 0 && val != NULL)
                p->lease_ms = atoi(val);
            if (strcmp(a->string, "order") == 0 && val != NULL)
                p->per_aggregate = strcmp(val, "per-aggregate") == 0;
        }
    }
    if (p->group == NULL)
        p->group = p->consumer_name;
    return 0;
}

static int parse_broker(struct jv_ctx *v, struct scenario *sc, const cJSON *b)
{
    if (b == NULL)
        return 0;
    if (!cJSON_IsObject(b))
        return jv_err(v, "broker", "must be an object");
    const cJSON *it;
    cJSON_ArrayForEach(it, b) {
        if (!jv_in_list(it->string, broker_switches) && !jv_in_list(it->string, broker_settings))
            return jv_err(v, "broker", "unknown field '%s'", it->string);
    }
    if (jv_opt_int(v, b, "visibility_timeout_ms", "broker", 1, 86400000,
                   &sc->visibility_timeout_ms) < 0 ||
        jv_bool(v, b, "durable", "broker", &sc->broker_durable) < 0)
        return -1;
    int others = 0;
    cJSON_ArrayForEach(it, b) {
        if (!jv_in_list(it->string, broker_settings))
            others++;
    }
    if (others > 0)
        sc->broker_control = b;
    return 0;
}

/* "database": {"standby": true, "synchronous": true|false}: the scenario
 * gets a primary and a streaming standby of its own. */
static int parse_database(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(sc->root, "database");
    if (d == NULL)
        return 0;
    static const char *const f[] = { "standby", "synchronous", NULL };
    if (!cJSON_IsObject(d))
        return jv_err(v, "database", "must be an object");
    if (jv_only_fields(v, d, "database", f) < 0 ||
        jv_bool(v, d, "standby", "database", &sc->standby) < 0 ||
        jv_bool(v, d, "synchronous", "database", &sc->synchronous) < 0)
        return -1;
    if (!sc->standby)
        return jv_err(v, "database.standby", "must be true (a database without a standby "
                       "needs no \"database\" object)");
    if (cJSON_GetObjectItemCaseSensitive(d, "synchronous") == NULL)
        return jv_err(v, "database.synchronous", "missing: say true or false (whether a "
                       "commit waits for the standby)");
    return 0;
}

/* Validates the switches of a broker control object (types only: the
 * broker itself rejects a bad value, and the step then fails loudly). */
int sc_check_control(struct jv_ctx *v, const cJSON *c, const char *field)
{
    if (!cJSON_IsObject(c) || c->child == NULL)
        return jv_err(v, field, "must be a non-empty object of broker switches");
    if (jv_only_fields(v, c, field, broker_switches) < 0)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, c) {
        char f[160];
        snprintf(f, sizeof(f), "%s.%s", field, it->string);
        if (strcmp(it->string, "outage") == 0) {
            if (!cJSON_IsString(it) || !(strcmp(it->valuestring, "off") == 0 ||
                                         strcmp(it->valuestring, "refuse") == 0 ||
                                         strcmp(it->valuestring, "hang") == 0))
                return jv_err(v, f, "must be \"off\", \"refuse\" or \"hang\"");
        } else if (strcmp(it->string, "duplicate") == 0 || strcmp(it->string, "reorder") == 0 ||
                   strcmp(it->string, "reset") == 0 ||
                   strcmp(it->string, "close_connections") == 0) {
            if (!cJSON_IsBool(it))
                return jv_err(v, f, "must be true or false");
        } else if (strcmp(it->string, "refuse_error") == 0) {
            if (!cJSON_IsString(it))
                return jv_err(v, f, "must be a string");
        } else if (!cJSON_IsNumber(it) || it->valuedouble < 0) {
            return jv_err(v, f, "must be a non-negative number");
        }
    }
    return 0;
}

int sc_get_where(struct jv_ctx *v, const cJSON *s, const char *field,
                 const char **key, const char **value, char *buf, size_t buflen)
{
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(s, "where");
    if (w == NULL)
        return 0;
    char f[160];
    snprintf(f, sizeof(f), "%s.where", field);
    if (!cJSON_IsObject(w) || w->child == NULL || w->child->next != NULL)
        return jv_err(v, f, "must be an object with one field: value");
    const cJSON *it = w->child;
    *key = it->string;
    if (cJSON_IsString(it)) {
        *value = it->valuestring;
    } else if (cJSON_IsNumber(it)) {
        snprintf(buf, buflen, "%.0f", it->valuedouble);
        *value = buf;
    } else if (cJSON_IsBool(it)) {
        *value = cJSON_IsTrue(it) ? "true" : "false";
    } else {
        return jv_err(v, f, "the value must be a string, a number or a boolean");
    }
    return 0;
}


/* The fields an expectation's check would not read: a "proc" on a counter
 * or a "where" on an sql check would narrow nothing, so each is an error
 * naming it rather than a filter the author only believes in. */
static int expect_unused_fields(struct jv_ctx *v, const cJSON *e, const char *field,
                                const struct sc_expect *x)
{
    const int events = strcmp(x->check, "events") == 0;
    const int fired = strcmp(x->check, "faults_fired") == 0;
    const struct { const char *key; int used; } f[] = {
        { "proc", events || fired },
        { "event", events },
        /* faults_fired with a point matches on the point, not on where */
        { "where", events || (fired && x->point == NULL) },
        { "point", fired },
        { "sql", strcmp(x->check, "sql") == 0 },
        { "request", strcmp(x->check, "http_status") == 0 },
        { "key_prefix", strcmp(x->check, "applied_payments") == 0 },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].used || cJSON_GetObjectItemCaseSensitive(e, f[i].key) == NULL)
            continue;
        char ff[160];
        snprintf(ff, sizeof(ff), "%s.%s", field, f[i].key);
        return jv_err(v, ff, "ignored by check '%s'", x->check);
    }
    return 0;
}

static int parse_expect(struct jv_ctx *v, struct scenario *sc, const cJSON *e, int idx)
{
    static const char *const fields[] = { "check", "min", "max", "equals", "proc", "event",
                                          "where", "point", "sql", "request", "key_prefix",
                                          "why", NULL };
    char field[48];
    snprintf(field, sizeof(field), "expect[%d]", idx);
    struct sc_expect *x = &sc->expect[idx];
    memset(x, 0, sizeof(*x));
    x->proc_idx = -1;
    if (!cJSON_IsObject(e))
        return jv_err(v, field, "must be an object");
    if (jv_only_fields(v, e, field, fields) < 0 ||
        jv_str(v, e, "check", field, 1, &x->check) < 0)
        return -1;
    if (!jv_in_list(x->check, expect_checks)) {
        char f[64];
        snprintf(f, sizeof(f), "%s.check", field);
        return jv_err(v, f, "unknown check '%s'", x->check);
    }
    long long n;
    int r;
    if ((r = jv_int(v, e, "min", field, 0, 0, 100000000, &n)) < 0)
        return -1;
    if (r == 1) { x->has_min = 1; x->min = n; }
    if ((r = jv_int(v, e, "max", field, 0, 0, 100000000, &n)) < 0)
        return -1;
    if (r == 1) { x->has_max = 1; x->max = n; }
    if ((r = jv_int(v, e, "equals", field, 0, 0, 100000000, &n)) < 0)
        return -1;
    if (r == 1) { x->has_equals = 1; x->equals = n; }
    if (!x->has_min && !x->has_max && !x->has_equals)
        return jv_err(v, field, "give min, max or equals");
    if (x->has_min && x->min == 0 && !x->has_max && !x->has_equals)
        return jv_err(v, field, "min 0 alone can never fail: give a bound that can");
    if (jv_str(v, e, "proc", field, 0, &x->proc) < 0 ||
        jv_str(v, e, "event", field, 0, &x->event) < 0 ||
        jv_str(v, e, "point", field, 0, &x->point) < 0 ||
        jv_str(v, e, "sql", field, 0, &x->sql) < 0 ||
        jv_str(v, e, "request", field, 0, &x->request) < 0 ||
        jv_str(v, e, "key_prefix", field, 0, &x->key_prefix) < 0 ||
        jv_str(v, e, "why", field, 0, &x->why) < 0)
        return -1;
    if (sc_get_where(v, e, field, &x->where_key, &x->where_value, x->where_buf,
                     sizeof(x->where_buf)) < 0)
        return -1;
    if (x->proc != NULL) {
        x->proc_idx = sc_find_proc(sc, x->proc);
        if (x->proc_idx < 0 && strcmp(x->proc, "broker") != 0) {
            char f[64];
            snprintf(f, sizeof(f), "%s.proc", field);
            return jv_err(v, f, "unknown process '%s'", x->proc);
        }
    }
    if (expect_unused_fields(v, e, field, x) < 0)
        return -1;
    if (strcmp(x->check, "events") == 0 && x->event == NULL)
        return jv_err(v, field, "check events needs \"event\"");
    if (strcmp(x->check, "sql") == 0 && x->sql == NULL)
        return jv_err(v, field, "check sql needs \"sql\"");
    if (strcmp(x->check, "applied_payments") == 0 && x->key_prefix == NULL)
        return jv_err(v, field, "check applied_payments needs \"key_prefix\"");
    if (strcmp(x->check, "http_status") == 0) {
        int found = 0;
        if (x->request == NULL)
            return jv_err(v, field, "check http_status needs \"request\"");
        for (int i = 0; i < sc->nsteps; i++)
            if (sc->steps[i].verb == V_HTTP && sc->steps[i].name != NULL &&
                strcmp(sc->steps[i].name, x->request) == 0)
                found = 1;
        if (!found)
            return jv_err(v, field, "no http step is named '%s'", x->request);
    }
    return 0;
}

/* scenario_parse reads the file's sections in order through the helpers
 * below; each returns 0, or -1 with the message in v (none when out of
 * memory, as before).  What they fill is released by scenario_free. */

/* The top-level fields and the scalars that name the scenario. */
static int parse_head(struct jv_ctx *v, struct scenario *sc)
{
    static const char *const fields[] = { "name", "title", "article_case", "crash_window",
                                          "description", "processes", "broker", "steps",
                                          "heal", "invariants", "expect", "timeout_ms",
                                          "faults_optional", "database", "hazard",
                                          "poison_events", NULL };
    const cJSON *root = sc->root;
    if (jv_only_fields(v, root, "", fields) < 0 ||
        jv_str(v, root, "name", "", 1, &sc->name) < 0 ||
        jv_str(v, root, "title", "", 1, &sc->title) < 0 ||
        jv_str(v, root, "crash_window", "", 1, &sc->crash_window) < 0)
        return -1;
    if (!valid_name(sc->name, 64, 0))
        return jv_err(v, "name", "'%s': use 1-63 of [a-z0-9-]", sc->name);
    const char *slash = strchr(sc->crash_window, '/');
    if (slash == NULL || slash == sc->crash_window || slash[1] == '\0')
        return jv_err(v, "crash_window", "'%s' is not component/window", sc->crash_window);
    return jv_opt_int(v, root, "article_case", "", 1, 10, &sc->article_case);
}

static int parse_procs(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *procs = cJSON_GetObjectItemCaseSensitive(sc->root, "processes");
    if (!cJSON_IsObject(procs) || procs->child == NULL)
        return jv_err(v, "processes", "must be a non-empty object of name: {kind, args}");
    const cJSON *it;
    cJSON_ArrayForEach(it, procs) {
        if (parse_proc(v, sc, it) < 0)
            return -1;
    }
    return 0;
}

static int parse_steps(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(sc->root, "steps");
    if (!cJSON_IsArray(steps))
        return jv_err(v, "steps", "must be an array");
    sc->nsteps = cJSON_GetArraySize(steps);
    sc->steps = calloc((size_t)sc->nsteps + 1, sizeof(*sc->steps));
    if (sc->steps == NULL)
        return -1;
    int idx = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, steps) {
        if (sc_parse_step(v, sc, it, idx) < 0) {
            sc->nsteps = idx + 1; /* free what this step owns */
            return -1;
        }
        idx++;
    }
    return 0;
}

/* heal, faults_optional and timeout_ms, each with its default. */
static int parse_settings(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *root = sc->root;
    sc->heal_timeout_ms = 20000;
    sc->heal_restart = 1;
    const cJSON *heal = cJSON_GetObjectItemCaseSensitive(root, "heal");
    if (heal != NULL) {
        static const char *const hf[] = { "timeout_ms", "restart", NULL };
        if (!cJSON_IsObject(heal))
            return jv_err(v, "heal", "must be an object");
        if (jv_only_fields(v, heal, "heal", hf) < 0)
            return -1;
        if (jv_opt_int(v, heal, "timeout_ms", "heal", 100, 600000, &sc->heal_timeout_ms) < 0)
            return -1;
        if (jv_bool(v, heal, "restart", "heal", &sc->heal_restart) < 0)
            return -1;
    }
    const cJSON *fo = cJSON_GetObjectItemCaseSensitive(root, "faults_optional");
    if (fo != NULL && !cJSON_IsBool(fo))
        return jv_err(v, "faults_optional", "must be true or false");
    sc->faults_optional = cJSON_IsTrue(fo);
    sc->timeout_ms = 120000;
    return jv_opt_int(v, root, "timeout_ms", "", 1000, 3600000, &sc->timeout_ms);
}

/* Whether a step writes id: an sql step's statement or an http step's
 * body names it (any case).  A poison entry that no step plants names no
 * event of the run: it could excuse nothing, or excuse by chance. */
static int step_plants(const struct scenario *sc, const char *id)
{
    for (int i = 0; i < sc->nsteps; i++) {
        const struct sc_step *st = &sc->steps[i];
        const char *text = st->verb == V_SQL ? st->sql : st->verb == V_HTTP ? st->body : NULL;
        if (text != NULL && strcasestr(text, id) != NULL)
            return 1;
    }
    return 0;
}

/* "poison_events": ids (uuids) of the events the scenario plants as poison. */
static int parse_poison(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(sc->root, "poison_events");
    if (arr == NULL)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
        cJSON_GetArraySize(arr) > SC_MAX_POISON)
        return jv_err(v, "poison_events", "must be an array of 1-%d event ids", SC_MAX_POISON);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        char f[48];
        snprintf(f, sizeof(f), "poison_events[%d]", sc->npoison);
        const char *s = cJSON_IsString(it) ? it->valuestring : "";
        size_t n = strlen(s);
        int ok = n == 36;
        for (size_t i = 0; i < n && ok; i++)
            ok = (i == 8 || i == 13 || i == 18 || i == 23) ? s[i] == '-'
                                                         : isxdigit((unsigned char)s[i]) != 0;
        if (!ok)
            return jv_err(v, f, "must be an event id (a uuid)");
        if (!step_plants(sc, s))
            return jv_err(v, f, "names no event: no sql or http step of the scenario "
                          "writes %s (planted poison is written under a fixed id)", s);
        sc->poison[sc->npoison++] = s;
    }
    return 0;
}

static int parse_invariants(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *invs = cJSON_GetObjectItemCaseSensitive(sc->root, "invariants");
    if (!cJSON_IsArray(invs) || cJSON_GetArraySize(invs) == 0)
        return jv_err(v, "invariants", "must be a non-empty array of invariant names");
    int idx = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, invs) {
        char f[48];
        snprintf(f, sizeof(f), "invariants[%d]", idx++);
        int inv = cJSON_IsString(it) ? sc_invariant_from_name(it->valuestring) : -1;
        if (inv < 0)
            return jv_err(v, f, "unknown invariant %s%s%s", cJSON_IsString(it) ? "'" : "",
                           cJSON_IsString(it) ? it->valuestring : "(not a string)",
                           cJSON_IsString(it) ? "'" : "");
        for (int j = 0; j < sc->ninvariants; j++)
            if ((int)sc->invariants[j] == inv)
                return jv_err(v, f, "'%s' is listed twice", it->valuestring);
        sc->invariants[sc->ninvariants++] = (enum sc_invariant)inv;
    }
    return 0;
}

/* Whether the scenario has a step of verb (and, for db, of action). */
static int has_step(const struct scenario *sc, enum sc_verb verb, int db_action)
{
    for (int i = 0; i < sc->nsteps; i++)
        if (sc->steps[i].verb == verb &&
            (verb != V_DB || (int)sc->steps[i].db_action == db_action))
            return 1;
    return 0;
}

/* "explains" and "at_most": the hazard's bound -- which events it can
 * explain, and how many at most.  A hazard without one would excuse any
 * violation of its invariants, which is what a broken pipeline shows too. */
static int parse_hazard_bound(struct jv_ctx *v, const cJSON *h, struct scenario *sc)
{
    const char *kind = NULL;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(h, "explains");
    if (k == NULL || cJSON_IsNull(k))
        return jv_err(v, "hazard.explains", "missing: a hazard names the events it can explain, "
                      "replication_stall (commits on the primary after replication to its "
                      "asynchronous standby stalled) or broker_memory (messages held only in "
                      "the memory of a broker that was killed)");
    if (jv_str(v, h, "explains", "hazard", 1, &kind) < 0)
        return -1;
    if (strcmp(kind, "replication_stall") == 0) {
        sc->hazard_explains = SC_HAZARD_REPLICATION_STALL;
        if (!sc->standby || sc->synchronous || !has_step(sc, V_DB, DB_STALL_REPLICATION))
            return jv_err(v, "hazard.explains", "replication_stall needs an asynchronous "
                          "standby (\"database\") and a db stall_replication step");
    } else if (strcmp(kind, "broker_memory") == 0) {
        sc->hazard_explains = SC_HAZARD_BROKER_MEMORY;
        if (sc->broker_durable || !has_step(sc, V_BROKER_CRASH, 0))
            return jv_err(v, "hazard.explains", "broker_memory needs a broker without a "
                          "durable store and a broker_crash step");
    } else {
        return jv_err(v, "hazard.explains", "'%s' is not replication_stall or broker_memory",
                      kind);
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(h, "at_most");
    if (m == NULL || cJSON_IsNull(m))
        return jv_err(v, "hazard.at_most", "missing: the most events the hazard may explain "
                      "(1-256)");
    long long n = 0;
    if (jv_int(v, h, "at_most", "hazard", 1, 1, 256, &n) < 0)
        return -1;
    sc->hazard_at_most = (int)n;
    return 0;
}

/* "hazard": {"caught_by": [invariants...], "why": "...", "explains": KIND,
 * "at_most": N}: each named invariant must also be listed, and must fail
 * for the scenario to pass, on violations the hazard explains alone. */
static int parse_hazard(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(sc->root, "hazard");
    if (h == NULL)
        return 0;
    static const char *const f[] = { "caught_by", "why", "explains", "at_most", NULL };
    if (!cJSON_IsObject(h))
        return jv_err(v, "hazard", "must be an object");
    if (jv_only_fields(v, h, "hazard", f) < 0 || jv_str(v, h, "why", "hazard", 1, &sc->hazard_why) < 0)
        return -1;
    const cJSON *by = cJSON_GetObjectItemCaseSensitive(h, "caught_by");
    if (!cJSON_IsArray(by) || cJSON_GetArraySize(by) == 0)
        return jv_err(v, "hazard.caught_by", "must be a non-empty array of invariant names");
    int idx = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, by) {
        char ff[48];
        snprintf(ff, sizeof(ff), "hazard.caught_by[%d]", idx++);
        int inv = cJSON_IsString(it) ? sc_invariant_from_name(it->valuestring) : -1;
        if (inv < 0)
            return jv_err(v, ff, "not an invariant name");
        int listed = 0;
        for (int j = 0; j < sc->ninvariants; j++)
            listed |= (int)sc->invariants[j] == inv;
        if (!listed)
            return jv_err(v, ff, "'%s' must also be listed in \"invariants\"", it->valuestring);
        for (int j = 0; j < sc->nhazard; j++)
            if ((int)sc->hazard[j] == inv)
                return jv_err(v, ff, "'%s' is listed twice", it->valuestring);
        sc->hazard[sc->nhazard++] = (enum sc_invariant)inv;
    }
    return parse_hazard_bound(v, h, sc);
}

/* "expect" is optional; it comes last because http_status checks name
 * http steps. */
static int parse_expects(struct jv_ctx *v, struct scenario *sc)
{
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(sc->root, "expect");
    if (exp == NULL)
        return 0;
    if (!cJSON_IsArray(exp))
        return jv_err(v, "expect", "must be an array");
    sc->nexpect = cJSON_GetArraySize(exp);
    sc->expect = calloc((size_t)sc->nexpect + 1, sizeof(*sc->expect));
    if (sc->expect == NULL)
        return -1;
    int idx = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, exp) {
        if (parse_expect(v, sc, it, idx++) < 0)
            return -1;
    }
    return 0;
}

struct scenario *scenario_parse(const char *text, const char *path,
                                const char *const *known_points,
                                char *err, size_t errlen)
{
    struct jv_ctx v = { path, err, errlen, known_points };
    struct scenario *sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    sc->path = strdup(path);
    sc->root = cJSON_Parse(text);
    if (sc->root == NULL) {
        const char *at = cJSON_GetErrorPtr();
        int line = 1;
        for (const char *p = text; at != NULL && p < at && *p; p++)
            line += *p == '\n';
        jv_err(&v, NULL, "not valid JSON (near line %d)", line);
        goto fail;
    }
    if (!cJSON_IsObject(sc->root)) {
        jv_err(&v, NULL, "must hold a JSON object");
        goto fail;
    }
    if (parse_head(&v, sc) < 0 || parse_procs(&v, sc) < 0 ||
        parse_broker(&v, sc, cJSON_GetObjectItemCaseSensitive(sc->root, "broker")) < 0 ||
        parse_database(&v, sc) < 0 || parse_steps(&v, sc) < 0 ||
        parse_settings(&v, sc) < 0 || parse_invariants(&v, sc) < 0 || parse_poison(&v, sc) < 0 ||
        parse_hazard(&v, sc) < 0 || parse_expects(&v, sc) < 0)
        goto fail;
    return sc;
fail:
    scenario_free(sc);
    return NULL;
}

struct scenario *scenario_load(const char *path, const char *const *known_points,
                               char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* fopen opens a directory and the read fails: say what it is. */
        snprintf(err, errlen, "%s: is a directory, not a scenario file (give the files in it, "
                 "or --all for every scenario)", path);
        return NULL;
    }
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 8192;
            if (ncap > (size_t)4 << 20) {
                snprintf(err, errlen, "%s: larger than 4 MiB", path);
                free(text);
                fclose(f);
                return NULL;
            }
            char *n = realloc(text, ncap);
            if (n == NULL) {
                free(text);
                fclose(f);
                snprintf(err, errlen, "%s: out of memory", path);
                return NULL;
            }
            text = n;
            cap = ncap;
        }
        size_t r = fread(text + len, 1, cap - len - 1, f);
        len += r;
        if (r == 0)
            break;
    }
    fclose(f);
    text[len] = '\0';
    struct scenario *sc = scenario_parse(text, path, known_points, err, errlen);
    free(text);
    return sc;
}

void scenario_free(struct scenario *sc)
{
    if (sc == NULL)
        return;
    for (int i = 0; i < sc->nprocs; i++)
        for (int j = 0; j < sc->procs[i].nargs; j++)
            free(sc->procs[i].arg_val[j]);
    for (int i = 0; i < sc->nsteps && sc->steps != NULL; i++)
        free(sc->steps[i].body);
    free(sc->steps);
    free(sc->expect);
    cJSON_Delete(sc->root);
    free(sc->path);
    free(sc);
}

int scenario_relays_hold_order(const struct scenario *sc)
{
    int relays = 0;
    for (int p = 0; p < sc->nprocs; p++) {
        if (sc->procs[p].kind != SC_RELAY)
            continue;
        if (!sc->procs[p].per_aggregate)
            return 0;
        relays++;
    }
    return relays > 0;
}
