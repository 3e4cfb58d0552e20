/* scenario_steps.c -- the steps of a scenario file, one parser per verb;
 * see scenario.h.
 *
 * sc_parse_step reads what every step shares ("do", "why") and hands the rest
 * to its verb's parser.  The parsers come in the order scenario.h lists the
 * verbs (enum sc_verb); verbs with one grammar share one (start and restart;
 * stop, kill, pause and resume).  Each checks the fields its verb allows,
 * as strictly as the rest of the file (scenario.c), and fills the step. */
#include "scenario.h"
#include "scenario_internal.h"
#include "fault.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The process a step acts on, into st->proc: the one its "proc" names (an
 * error when absent and required; of the given kind unless kind is -1), or,
 * when absent and kind >= 0, the only process of that kind.  With neither,
 * st->proc is left as it was.  0 or -1. */
static int step_proc(struct jv_ctx *v, struct scenario *sc, const cJSON *s, const char *field,
                     int required, int kind, struct sc_step *st)
{
    const char *name = NULL;
    int r = jv_str(v, s, "proc", field, required, &name);
    if (r < 0)
        return -1;
    if (r == 0) {
        if (kind < 0)
            return 0;
        /* Default: the only process of that kind. */
        int found = -1;
        for (int i = 0; i < sc->nprocs; i++) {
            if ((int)sc->procs[i].kind != kind)
                continue;
            if (found >= 0) {
                char f[160];
                snprintf(f, sizeof(f), "%s.proc", field);
                return jv_err(v, f, "missing: several %s processes, say which",
                               sc_kind_names[kind]);
            }
            found = i;
        }
        if (found < 0)
            return jv_err(v, field, "needs a %s process and the scenario declares none",
                           sc_kind_names[kind]);
        st->proc = found;
        return 0;
    }
    st->proc = sc_find_proc(sc, name);
    if (st->proc < 0) {
        char f[160];
        snprintf(f, sizeof(f), "%s.proc", field);
        return jv_err(v, f, "unknown process '%s'", name);
    }
    if (kind >= 0 && (int)sc->procs[st->proc].kind != kind) {
        char f[160];
        snprintf(f, sizeof(f), "%s.proc", field);
        return jv_err(v, f, "'%s' is a %s, not a %s", name,
                       sc_kind_names[sc->procs[st->proc].kind], sc_kind_names[kind]);
    }
    return 0;
}

/* One parser per verb below, each called by sc_parse_step once "do" and "why"
 * are read: it checks the fields its verb allows, then fills st.  field is
 * the step's JSON path ("steps[3]"), the prefix of every message. */

/* start, restart: a process and, optionally, the faults it starts with. */
static int parse_step_start(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                            const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "proc", "faults", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 1, -1, st) < 0)
        return -1;
    int r = jv_str(v, s, "faults", field, 0, &st->faults);
    if (r < 0)
        return -1;
    if (r == 1) {
        char msg[256];
        if (scenario_check_faults(st->faults, v->points, msg, sizeof(msg)) < 0) {
            char ff[64];
            snprintf(ff, sizeof(ff), "%s.faults", field);
            return jv_err(v, ff, "%s", msg);
        }
    }
    return 0;
}

/* stop, kill, pause, resume: a process and how long to give it. */
static int parse_step_signal(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                             const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "proc", "timeout_ms", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 1, -1, st) < 0)
        return -1;
    if (st->verb == V_KILL && cJSON_GetObjectItemCaseSensitive(s, "timeout_ms") != NULL) {
        char ff[64];
        snprintf(ff, sizeof(ff), "%s.timeout_ms", field);
        return jv_err(v, ff, "ignored by kill (SIGKILL is not waited on)");
    }
    st->timeout_ms = 5000;
    if (jv_opt_int(v, s, "timeout_ms", field, 1, 600000, &st->timeout_ms) < 0)
        return -1;
    return 0;
}

/* fault: arm a catalogued point in a running process, or disarm it. */
static int parse_step_fault(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                            const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "proc", "point", "action", "disable", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 1, -1, st) < 0 ||
        jv_str(v, s, "point", field, 1, &st->point) < 0 ||
        jv_bool(v, s, "disable", field, &st->disable) < 0)
        return -1;
    if (v->points != NULL && !jv_in_list(st->point, v->points)) {
        char ff[64];
        snprintf(ff, sizeof(ff), "%s.point", field);
        return jv_err(v, ff, "unknown fault point '%s' (not in the catalogue)", st->point);
    }
    if (jv_str(v, s, "action", field, !st->disable, &st->action) < 0)
        return -1;
    enum fault_action action;
    long stall_ms;
    if (st->action != NULL &&
        (fault_parse_action(st->action, &action, &stall_ms) < 0 || st->disable)) {
        char ff[64];
        snprintf(ff, sizeof(ff), "%s.action", field);
        return jv_err(v, ff, st->disable ? "not allowed with disable"
                                          : "must be crash, fail, park or stall:MS");
    }
    return 0;
}

/* The body and headers of an http step.  The body is copied (st->body is
 * freed by scenario_free); the headers stay borrowed from the tree. */
static int http_body_headers(struct jv_ctx *v, const cJSON *s, const char *field,
                             struct sc_step *st)
{
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(s, "body");
    if (body != NULL) {
        if (cJSON_IsString(body))
            st->body = strdup(body->valuestring);
        else if (cJSON_IsObject(body) || cJSON_IsArray(body))
            st->body = cJSON_PrintUnformatted(body);
        else
            return jv_err(v, field, "body must be a string or a JSON object");
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(s, "headers");
    if (h != NULL) {
        const cJSON *it;
        if (!cJSON_IsObject(h))
            return jv_err(v, field, "headers must be an object of strings");
        cJSON_ArrayForEach(it, h) {
            if (!cJSON_IsString(it) || strpbrk(it->valuestring, "\r\n") != NULL ||
                strpbrk(it->string, " :\r\n") != NULL)
                return jv_err(v, field, "header '%s' must be a single-line string", it->string);
        }
        st->headers = h;
    }
    return 0;
}

/* same_as must name an earlier http step, and a step's own name must be new:
 * only steps before idx are parsed yet, which is what both rules want. */
static int http_step_names(struct jv_ctx *v, const struct scenario *sc, const char *field,
                           const struct sc_step *st, int idx)
{
    if (st->same_as != NULL) {
        int found = 0;
        for (int i = 0; i < idx; i++)
            if (sc->steps[i].verb == V_HTTP && sc->steps[i].name != NULL &&
                strcmp(sc->steps[i].name, st->same_as) == 0)
                found = 1;
        if (!found) {
            char ff[64];
            snprintf(ff, sizeof(ff), "%s.same_as", field);
            return jv_err(v, ff, "no earlier http step is named '%s'", st->same_as);
        }
    }
    if (st->name != NULL) {
        for (int i = 0; i < idx; i++)
            if (sc->steps[i].verb == V_HTTP && sc->steps[i].name != NULL &&
                strcmp(sc->steps[i].name, st->name) == 0)
                return jv_err(v, field, "another http step is already named '%s'", st->name);
    }
    return 0;
}

/* http: one request to an api process; POST /payments unless told. */
static int parse_step_http(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                           const char *field, struct sc_step *st, int idx)
{
    static const char *const f[] = { "do", "why", "proc", "name", "method", "path", "body",
                                     "key", "headers", "same_as", "expect_status",
                                     "timeout_ms", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 0, SC_API, st) < 0 ||
        jv_str(v, s, "name", field, 0, &st->name) < 0 ||
        jv_str(v, s, "method", field, 0, &st->method) < 0 ||
        jv_str(v, s, "path", field, 0, &st->path) < 0 ||
        jv_str(v, s, "key", field, 0, &st->key) < 0 ||
        jv_str(v, s, "same_as", field, 0, &st->same_as) < 0)
        return -1;
    if (st->method == NULL)
        st->method = "POST";
    if (st->path == NULL)
        st->path = "/payments";
    if (st->path[0] != '/' || strpbrk(st->path, " \r\n") != NULL)
        return jv_err(v, field, "path must start with '/' and hold no spaces");
    if (strcmp(st->method, "GET") != 0 && strcmp(st->method, "POST") != 0 &&
        strcmp(st->method, "PUT") != 0 && strcmp(st->method, "DELETE") != 0)
        return jv_err(v, field, "method must be GET, POST, PUT or DELETE");
    if (http_body_headers(v, s, field, st) < 0)
        return -1;
    if (st->key != NULL && strpbrk(st->key, "\r\n") != NULL)
        return jv_err(v, field, "key must be a single line");
    if (jv_opt_int(v, s, "expect_status", field, 100, 599, &st->expect_status) < 0)
        return -1;
    st->timeout_ms = 5000;
    if (jv_opt_int(v, s, "timeout_ms", field, 1, 600000, &st->timeout_ms) < 0)
        return -1;
    return http_step_names(v, sc, field, st, idx);
}

/* payments: count creations (optionally authorized and captured) through an
 * api process, with keys key_prefix-N. */
static int parse_step_payments(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                               const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "proc", "count", "key_prefix", "amount",
                                     "currency", "concurrency", "retries", "busy_retries",
                                     "timeout_retries", "authorize", "capture", "timeout_ms",
                                     "background", NULL };
    long long x;
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 0, SC_API, st) < 0)
        return -1;
    if (jv_int(v, s, "count", field, 1, 1, 100000, &x) < 0)
        return -1;
    st->count = (int)x;
    st->key_prefix = "pay";
    st->currency = "EUR";
    st->concurrency = 1;
    if (jv_str(v, s, "key_prefix", field, 0, &st->key_prefix) < 0 ||
        jv_str(v, s, "amount", field, 0, &st->amount) < 0 ||
        jv_str(v, s, "currency", field, 0, &st->currency) < 0 ||
        jv_bool(v, s, "authorize", field, &st->authorize) < 0 ||
        jv_bool(v, s, "capture", field, &st->capture) < 0 ||
        jv_bool(v, s, "background", field, &st->background) < 0)
        return -1;
    if (strpbrk(st->key_prefix, "\r\n") != NULL || strpbrk(st->currency, "\"\\") != NULL ||
        (st->amount != NULL && strpbrk(st->amount, "\"\\") != NULL))
        return jv_err(v, field, "key_prefix, amount and currency must be plain text");
    if (st->capture && !st->authorize)
        return jv_err(v, field, "capture needs authorize (versions 1, 2, 3)");
    if (jv_opt_int(v, s, "concurrency", field, 1, 64, &st->concurrency) < 0)
        return -1;
    if (jv_opt_int(v, s, "retries", field, 0, 100, &st->retries) < 0)
        return -1;
    st->busy_retries = SC_BUSY_RETRIES;
    if (jv_opt_int(v, s, "timeout_retries", field, 0, 20, &st->timeout_retries) < 0)
        return -1;
    if (jv_opt_int(v, s, "busy_retries", field, 0, 20, &st->busy_retries) < 0)
        return -1;
    st->timeout_ms = 5000;
    if (jv_opt_int(v, s, "timeout_ms", field, 1, 600000, &st->timeout_ms) < 0)
        return -1;
    return 0;
}

/* broker: flip the fake broker's switches. */
static int parse_step_broker(struct jv_ctx *v, const cJSON *s, const char *field,
                             struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "control", NULL };
    char ff[64];
    snprintf(ff, sizeof(ff), "%s.control", field);
    if (jv_only_fields(v, s, field, f) < 0)
        return -1;
    st->control = cJSON_GetObjectItemCaseSensitive(s, "control");
    if (st->control == NULL)
        return jv_err(v, ff, "missing (an object of broker switches)");
    return sc_check_control(v, st->control, ff);
}

/* sql: one statement, optionally with the row count it must report. */
static int parse_step_sql(struct jv_ctx *v, const cJSON *s, const char *field,
                          struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "sql", "expect_rows", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || jv_str(v, s, "sql", field, 1, &st->sql) < 0)
        return -1;
    if (jv_opt_int(v, s, "expect_rows", field, 0, 100000000, &st->expect_rows) < 0)
        return -1;
    return 0;
}

/* outboxctl: the operator tool with its arguments (argv borrows the tree's
 * strings); --db is the runner's, the scenario cannot point it elsewhere. */
static int parse_step_outboxctl(struct jv_ctx *v, const cJSON *s, const char *field,
                                struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "args", "expect_exit", "expect_output",
                                     "timeout_ms", NULL };
    if (jv_only_fields(v, s, field, f) < 0)
        return -1;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(s, "args");
    if (!cJSON_IsArray(args) || cJSON_GetArraySize(args) < 1 ||
        cJSON_GetArraySize(args) > 16)
        return jv_err(v, field, "args must be an array of 1-16 strings");
    const cJSON *a;
    cJSON_ArrayForEach(a, args) {
        if (!cJSON_IsString(a))
            return jv_err(v, field, "args must be an array of strings");
        if (strcmp(a->valuestring, "--db") == 0)
            return jv_err(v, field, "--db is set by the runner");
        st->argv[st->argc++] = a->valuestring;
    }
    if (jv_opt_int(v, s, "expect_exit", field, 0, 255, &st->expect_exit) < 0)
        return -1;
    if (jv_str(v, s, "expect_output", field, 0, &st->expect_output) < 0)
        return -1;
    st->timeout_ms = 10000;
    if (jv_opt_int(v, s, "timeout_ms", field, 1, 600000, &st->timeout_ms) < 0)
        return -1;
    return 0;
}

/* scrape: GET /metrics from a process started with "metrics-listen"; what
 * it must contain (expect_output), or a series and the bounds of its value
 * (a count that a busy machine may push past one: "min": 1). */
static int parse_step_scrape(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                             const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "proc", "expect_output", "series", "min",
                                     "max", "timeout_ms", NULL };
    if (jv_only_fields(v, s, field, f) < 0 || step_proc(v, sc, s, field, 1, -1, st) < 0)
        return -1;
    const struct sc_proc *p = &sc->procs[st->proc];
    char ff[160];
    snprintf(ff, sizeof(ff), "%s.proc", field);
    int listens = 0;
    for (int i = 0; i < p->nargs; i++)
        listens |= strcmp(p->arg_key[i], "metrics-listen") == 0;
    if (!listens)
        return jv_err(v, ff, "'%s' serves no /metrics: give it \"metrics-listen\": "
                      "\"127.0.0.1:0\" in its args", p->name);
    int has_series = jv_str(v, s, "series", field, 0, &st->series);
    if (has_series < 0 || jv_str(v, s, "expect_output", field, !has_series,
                                 &st->expect_output) < 0)
        return -1;
    st->series_min = st->series_max = -1;
    if (jv_opt_int(v, s, "min", field, 0, INT_MAX, &st->series_min) < 0 ||
        jv_opt_int(v, s, "max", field, 0, INT_MAX, &st->series_max) < 0)
        return -1;
    int bounded = st->series_min >= 0 || st->series_max >= 0;
    snprintf(ff, sizeof(ff), "%s.series", field);
    if (has_series && !bounded)
        return jv_err(v, ff, "a series needs \"min\" or \"max\": the bounds of its value");
    if (!has_series && bounded)
        return jv_err(v, ff, "\"min\" and \"max\" bound a series: name it");
    if (has_series && (strchr(st->series, '\n') != NULL || strchr(st->series, ' ') != NULL))
        return jv_err(v, ff, "'%s' is not a series name with its labels", st->series);
    if (st->series_max >= 0 && st->series_min > st->series_max)
        return jv_err(v, ff, "min %d is over max %d", st->series_min, st->series_max);
    st->timeout_ms = 5000;
    return jv_opt_int(v, s, "timeout_ms", field, 1, 600000, &st->timeout_ms);
}

/* The fields a wait condition would not read: each is an error naming it,
 * since a scenario's author who wrote it expected it to matter. */
static int wait_unused_fields(struct jv_ctx *v, const cJSON *s, const char *field,
                              const struct sc_step *st, const char *until)
{
    const enum sc_until u = st->until;
    const int uses_proc = u == U_EXITED || u == U_PARKED || u == U_EVENT;
    const int uses_count = !(u == U_EXITED || u == U_PARKED || u == U_QUIET);
    const struct { const char *key; int used; } f[] = {
        { "proc", uses_proc },
        { "count", uses_count },
        { "where", u == U_EVENT },
        { "consumer", u == U_CONSUMED },
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (f[i].used || cJSON_GetObjectItemCaseSensitive(s, f[i].key) == NULL)
            continue;
        char ff[160];
        snprintf(ff, sizeof(ff), "%s.%s", field, f[i].key);
        return jv_err(v, ff, "ignored by until '%s'", until);
    }
    return 0;
}

/* wait: until a condition holds, within timeout_ms; or, with "on_timeout":
 * "continue", an anchor that goes on when the moment does not come. */
static int parse_step_wait(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                           const char *field, struct sc_step *st)
{
    static const char *const fields[] = { "do", "why", "until", "proc", "event", "count",
                                          "where", "consumer", "sql", "point", "timeout_ms",
                                          "on_timeout", NULL };
    if (jv_only_fields(v, s, field, fields) < 0)
        return -1;
    const char *on_timeout = NULL;
    if (jv_str(v, s, "on_timeout", field, 0, &on_timeout) < 0)
        return -1;
    if (on_timeout != NULL && strcmp(on_timeout, "fail") != 0 &&
        strcmp(on_timeout, "continue") != 0) {
        char f[160];
        snprintf(f, sizeof(f), "%s.on_timeout", field);
        return jv_err(v, f, "must be \"fail\" or \"continue\", not '%s'", on_timeout);
    }
    st->wait_continue = on_timeout != NULL && strcmp(on_timeout, "continue") == 0;
    const char *until = NULL;
    if (jv_str(v, s, "until", field, 1, &until) < 0)
        return -1;
    int u = jv_name_index(sc_until_names,
                          (int)(sizeof(sc_until_names) / sizeof(sc_until_names[0])), until);
    if (u < 0) {
        char f[160];
        snprintf(f, sizeof(f), "%s.until", field);
        return jv_err(v, f, "unknown condition '%s' (exited, parked, event, published, "
                       "consumed, dead_lettered, lease_expired, quiet, sql)", until);
    }
    st->until = (enum sc_until)u;
    long long x;
    if (jv_int(v, s, "timeout_ms", field, 1, 1, 600000, &x) < 0)
        return -1;
    st->timeout_ms = (int)x;
    st->count = 1;
    if (jv_opt_int(v, s, "count", field, 0, 10000000, &st->count) < 0)
        return -1;
    int need_proc = st->until == U_EXITED || st->until == U_PARKED || st->until == U_EVENT;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(s, "proc");
    if (st->until == U_EVENT && cJSON_IsString(pj) && strcmp(pj->valuestring, "broker") == 0)
        st->proc = -1; /* the broker's own log ("broker" is a reserved process name) */
    else if (step_proc(v, sc, s, field, need_proc, -1, st) < 0)
        return -1;
    if (st->until == U_EVENT && jv_str(v, s, "event", field, 1, &st->event) < 0)
        return -1;
    if (sc_get_where(v, s, field, &st->where_key, &st->where_value, st->where_buf,
                     sizeof(st->where_buf)) < 0)
        return -1;
    if (st->until == U_SQL && jv_str(v, s, "sql", field, 1, &st->sql) < 0)
        return -1;
    if (jv_str(v, s, "point", field, 0, &st->point) < 0)
        return -1;
    if (jv_str(v, s, "consumer", field, 0, &st->consumer) < 0)
        return -1;
    if (st->until == U_CONSUMED && st->consumer == NULL) {
        /* Default: the consumer name of the only consumer process. */
        for (int i = 0; i < sc->nprocs; i++) {
            if (sc->procs[i].kind != SC_CONSUMER)
                continue;
            if (st->consumer != NULL && strcmp(st->consumer, sc->procs[i].consumer_name) != 0)
                return jv_err(v, field, "several consumer names: say which with \"consumer\"");
            st->consumer = sc->procs[i].consumer_name;
        }
        if (st->consumer == NULL)
            return jv_err(v, field, "until consumed needs a consumer process");
    }
    if ((st->event != NULL && st->until != U_EVENT) || (st->sql != NULL && st->until != U_SQL) ||
        (st->point != NULL && st->until != U_PARKED))
        return jv_err(v, field, "a field does not apply to until '%s'", until);
    return wait_unused_fields(v, s, field, st, until);
}

/* A lock step's table: an unquoted identifier, or two joined by a dot.  The
 * runner quotes each part again (PQescapeIdentifier); this check is what
 * makes a typo an error at load rather than at the step. */
static int table_name_ok(const char *t)
{
    int part = 0, dots = 0;
    for (const char *c = t; *c != '\0'; c++) {
        if (*c == '.') {
            if (part == 0 || ++dots > 1)
                return 0;
            part = 0;
        } else if (*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                   (part > 0 && *c >= '0' && *c <= '9')) {
            if (++part > 63)
                return 0;
        } else {
            return 0;
        }
    }
    return part > 0;
}

/* A refuse or sever step's "of": the columns an update must set to be met
 * (UPDATE OF, so that a relay's mark is told from its claim on the same
 * table), lower-case identifiers written into the trigger as they are. */
static int parse_columns(struct jv_ctx *v, const cJSON *s, const char *field, struct sc_step *st)
{
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(s, "of");
    char ff[64];
    snprintf(ff, sizeof(ff), "%s.of", field);
    st->refuse_of[0] = '\0';
    if (of == NULL)
        return 0;
    if (strcmp(st->refuse_on, "update") != 0)
        return jv_err(v, ff, "only an update sets columns (\"on\": \"update\")");
    if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) < 1 || cJSON_GetArraySize(of) > 4)
        return jv_err(v, ff, "must be an array of 1 to 4 column names");
    size_t len = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, of) {
        const char *n = cJSON_GetStringValue(c);
        int ok = n != NULL && n[0] != '\0' && strlen(n) <= 63 && !(n[0] >= '0' && n[0] <= '9');
        for (const char *p = n; ok && *p != '\0'; p++)
            ok = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9');
        if (!ok)
            return jv_err(v, ff, "'%s' is not a column name (lower-case letters, digits and '_')",
                          n != NULL ? n : "(not a string)");
        len += (size_t)snprintf(st->refuse_of + len, sizeof(st->refuse_of) - len, "%s%s",
                                len > 0 ? ", " : "", n);
    }
    return 0;
}

/* A refuse step's SQLSTATE: five digits or capitals, of an error class
 * (00, 01 and 02 are success, warning and no data: PostgreSQL would not end
 * the statement with them). */
static int check_sqlstate(struct jv_ctx *v, const char *field, const struct sc_step *st)
{
    const char *c = st->sqlstate;
    char ff[64];
    int ok = strlen(c) == 5;
    for (int i = 0; ok && i < 5; i++)
        ok = (c[i] >= '0' && c[i] <= '9') || (c[i] >= 'A' && c[i] <= 'Z');
    snprintf(ff, sizeof(ff), "%s.sqlstate", field);
    if (!ok)
        return jv_err(v, ff, "'%s' is not a SQLSTATE (five digits or capital letters, "
                       "\"40001\")", c);
    if (strncmp(c, "00", 2) == 0 || strncmp(c, "01", 2) == 0 || strncmp(c, "02", 2) == 0)
        return jv_err(v, ff, "'%s' is a success, warning or no-data code, not an error",
                      c);
    return 0;
}

/* A refuse or sever step's own fields ("on", "sqlstate", "at", "times",
 * "skip", "must_fire"), refused on any other action (a is then neither).
 * A sever names no SQLSTATE: the process gets no answer, its session ends. */
static int parse_refusal(struct jv_ctx *v, const cJSON *s, const char *field, int a,
                         struct sc_step *st)
{
    static const char *const own[] = { "on", "of", "sqlstate", "at", "times", "skip",
                                       "must_fire", NULL };
    static const char *const ops[] = { "insert", "update", "delete", NULL };
    char ff[64];
    if (a != DB_REFUSE && a != DB_SEVER) {
        for (int i = 0; own[i] != NULL; i++)
            if (cJSON_GetObjectItemCaseSensitive(s, own[i]) != NULL)
                return jv_err(v, field, "%s is only for action%s", own[i],
                              strcmp(own[i], "sqlstate") == 0 ? " 'refuse'"
                                                              : "s 'refuse' and 'sever'");
        return 0;
    }
    if (a == DB_SEVER && cJSON_GetObjectItemCaseSensitive(s, "sqlstate") != NULL)
        return jv_err(v, field, "sqlstate is only for action 'refuse': a severed session "
                      "answers nothing");
    const char *at = NULL;
    if (jv_str(v, s, "on", field, 1, &st->refuse_on) < 0 ||
        jv_str(v, s, "sqlstate", field, a == DB_REFUSE, &st->sqlstate) < 0 ||
        jv_str(v, s, "at", field, 0, &at) < 0)
        return -1;
    if (!jv_in_list(st->refuse_on, ops)) {
        snprintf(ff, sizeof(ff), "%s.on", field);
        return jv_err(v, ff, "unknown statement '%s' (insert, update, delete)", st->refuse_on);
    }
    if (parse_columns(v, s, field, st) < 0 ||
        (a == DB_REFUSE && check_sqlstate(v, field, st) < 0))
        return -1;
    if (at != NULL && strcmp(at, "statement") != 0 && strcmp(at, "commit") != 0) {
        snprintf(ff, sizeof(ff), "%s.at", field);
        return jv_err(v, ff, "unknown moment '%s' (statement, commit)", at);
    }
    st->refuse_at_commit = at != NULL && strcmp(at, "commit") == 0;
    st->refuse_times = 1;
    st->refuse_skip = 0;
    st->refuse_must_fire = 1;
    if (jv_opt_int(v, s, "times", field, 1, 1000, &st->refuse_times) < 0 ||
        jv_opt_int(v, s, "skip", field, 0, 100000, &st->refuse_skip) < 0 ||
        jv_bool(v, s, "must_fire", field, &st->refuse_must_fire) < 0)
        return -1;
    return 0;
}

/* db: a fault of PostgreSQL itself. */
static int parse_step_db(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                         const char *field, struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "action", "proc", "ms", "down_ms", "table",
                                     "first", "then", "on", "of", "sqlstate", "at", "times",
                                     "skip", "must_fire", NULL };
    const char *action = NULL;
    char ff[64];
    if (jv_only_fields(v, s, field, f) < 0 || jv_str(v, s, "action", field, 1, &action) < 0)
        return -1;
    int a = jv_name_index(sc_db_action_names,
                          (int)(sizeof(sc_db_action_names) / sizeof(sc_db_action_names[0])), action);
    snprintf(ff, sizeof(ff), "%s.action", field);
    if (a < 0)
        return jv_err(v, ff, "unknown action '%s' (crash, restart, terminate, freeze, failover, "
                       "stall_replication, hold_commits, lock, deadlock, refuse, sever)", action);
    st->db_action = (enum sc_db_action)a;
    const int needs_standby = a == DB_FAILOVER || a == DB_STALL_REPLICATION;
    if (needs_standby && !sc->standby)
        return jv_err(v, ff, "'%s' needs a standby: add \"database\": {\"standby\": true, "
                       "\"synchronous\": ...}", action);
    if (a == DB_STALL_REPLICATION && sc->synchronous)
        return jv_err(v, ff, "'stall_replication' with synchronous replication would block "
                       "every commit until failover; it is for asynchronous standbys");
    if (a == DB_HOLD_COMMITS && sc->synchronous)
        return jv_err(v, ff, "'hold_commits' names a synchronous standby that never answers; "
                       "the scenario's own synchronous standby would be replaced by it");
    const int by_trigger = a == DB_REFUSE || a == DB_SEVER;
    if (cJSON_GetObjectItemCaseSensitive(s, "proc") != NULL && a != DB_TERMINATE && !by_trigger)
        return jv_err(v, field, "proc is only for actions 'terminate', 'refuse' and 'sever'");
    if ((a == DB_TERMINATE || by_trigger) && step_proc(v, sc, s, field, 0, -1, st) < 0)
        return -1;
    st->ms = -1;
    const int timed = a == DB_FREEZE || a == DB_HOLD_COMMITS || a == DB_LOCK || a == DB_DEADLOCK;
    if (cJSON_GetObjectItemCaseSensitive(s, "ms") != NULL && !timed)
        return jv_err(v, field, "ms is only for actions 'freeze', 'hold_commits', 'lock' and "
                      "'deadlock'");
    if (jv_opt_int(v, s, "ms", field, 1, 600000, &st->ms) < 0)
        return -1;
    if (timed && st->ms < 0) {
        snprintf(ff, sizeof(ff), "%s.ms", field);
        return jv_err(v, ff, "missing: a %s needs its duration in milliseconds", action);
    }
    if (cJSON_GetObjectItemCaseSensitive(s, "table") != NULL && a != DB_LOCK && !by_trigger)
        return jv_err(v, field, "table is only for actions 'lock', 'refuse' and 'sever'");
    if (jv_str(v, s, "table", field, a == DB_LOCK || by_trigger, &st->table) < 0)
        return -1;
    if ((a == DB_LOCK || by_trigger) && !table_name_ok(st->table)) {
        snprintf(ff, sizeof(ff), "%s.table", field);
        return jv_err(v, ff, "'%s' is not a table name (letters, digits and '_', "
                       "optionally schema.table)", st->table);
    }
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? "first" : "then";
        const char **sql = i == 0 ? &st->first : &st->then;
        if (cJSON_GetObjectItemCaseSensitive(s, name) != NULL && a != DB_DEADLOCK)
            return jv_err(v, field, "%s is only for action 'deadlock'", name);
        if (jv_str(v, s, name, field, a == DB_DEADLOCK, sql) < 0)
            return -1;
        if (*sql != NULL && strspn(*sql, " \t\r\n;") == strlen(*sql)) {
            snprintf(ff, sizeof(ff), "%s.%s", field, name);
            return jv_err(v, ff, "empty: the statements that %s", i == 0
                          ? "take the locks a process will wait on"
                          : "wait on a lock that process holds");
        }
    }
    if (parse_refusal(v, s, field, a, st) < 0)
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(s, "down_ms") != NULL && a != DB_CRASH)
        return jv_err(v, field, "down_ms is only for action 'crash'");
    return jv_opt_int(v, s, "down_ms", field, 0, 600000, &st->down_ms);
}

/* broker_crash: SIGKILL the fake broker, start it again after down_ms. */
static int parse_step_broker_crash(struct jv_ctx *v, const cJSON *s, const char *field,
                                   struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "down_ms", NULL };
    if (jv_only_fields(v, s, field, f) < 0)
        return -1;
    return jv_opt_int(v, s, "down_ms", field, 0, 600000, &st->down_ms);
}

/* sleep: time passes, nothing else.  For a scenario about time itself (a
 * backoff, a lease, a horizon), never in place of a condition. */
static int parse_step_sleep(struct jv_ctx *v, const cJSON *s, const char *field,
                            struct sc_step *st)
{
    static const char *const f[] = { "do", "why", "ms", NULL };
    long long x;
    if (jv_only_fields(v, s, field, f) < 0 || jv_int(v, s, "ms", field, 1, 1, 600000, &x) < 0)
        return -1;
    st->ms = (int)x;
    return 0;
}

/* net: a fault on one process's link to PostgreSQL or the broker, or
 * "clear": true.  The link must name a declared process and a peer; the
 * fault is checked by netproxy's own parser (values, fields, protocol).
 * A window on a broker link names AMQP frames: it is read for an AMQP
 * link, which the broker link is with RabbitMQ (runner_fake_skip skips it
 * on the fake broker).  A window names no pid: the runner gives the
 * process's. */
static int parse_step_net(struct jv_ctx *v, struct scenario *sc, const cJSON *s,
                          const char *field, struct sc_step *st)
{
    char ff[64];
    snprintf(ff, sizeof(ff), "%s.link", field);
    if (jv_str(v, s, "link", field, 1, &st->link) < 0)
        return -1;
    const char *arrow = strstr(st->link, "->");
    if (arrow == NULL || (strcmp(arrow, "->pg") != 0 && strcmp(arrow, "->broker") != 0))
        return jv_err(v, ff, "'%s' is not a link: '<process>->pg' or '<process>->broker'",
                       st->link);
    st->net_peer = strcmp(arrow, "->pg") == 0 ? NP_PG : NP_BROKER;
    for (int i = 0; i < sc->nprocs; i++)
        if (strlen(sc->procs[i].name) == (size_t)(arrow - st->link) &&
            strncmp(sc->procs[i].name, st->link, (size_t)(arrow - st->link)) == 0)
            st->proc = i;
    if (st->proc < 0)
        return jv_err(v, ff, "unknown link '%s': no process '%.*s'", st->link,
                       (int)(arrow - st->link), st->link);
    /* Our API never talks to the broker, but a target's producer may
     * publish its own outbox (Wolverine): the runner decides. */
    st->net_producer_broker = st->net_peer == NP_BROKER && sc->procs[st->proc].kind == SC_API;
    if (st->net_peer == NP_PG && sc->standby)
        return jv_err(v, ff, "a scenario with a standby reaches PostgreSQL directly (its "
                       "multi-host connection string has no single link)");
    const cJSON *clear = cJSON_GetObjectItemCaseSensitive(s, "clear");
    if (clear != NULL) {
        static const char *const f[] = { "do", "why", "link", "clear", NULL };
        if (!cJSON_IsTrue(clear))
            return jv_err(v, field, "clear: must be true (or absent, with a fault)");
        st->net_clear = 1;
        return jv_only_fields(v, s, field, f);
    }
    char err[256];
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(s, "fault");
    int window = cJSON_IsString(kind) && strcmp(kind->valuestring, "window") == 0;
    enum np_proto proto = window && st->net_peer == NP_BROKER ? NP_AMQP : st->net_peer;
    if (np_fault_parse(s, proto, &st->net, err, sizeof(err)) < 0)
        return jv_err(v, field, "%s", err);
    if (jv_opt_int(v, s, "reconnect_within_ms", field, 1, 600000, &st->reconnect_within_ms) < 0)
        return -1;
    if (st->net.kind == NP_CUT) {
        enum sc_kind k = sc->procs[st->proc].kind;
        if (st->net.cut_after == NP_CUT_ACK && k != SC_CONSUMER)
            return jv_err(v, field, "cut_after: ack is for a consumer's broker link, and %s is "
                           "a%s %s", sc->procs[st->proc].name, k == SC_API ? "n" : "",
                           sc_kind_name(k));
        if (st->net.cut_after == NP_CUT_CONFIRM && k == SC_CONSUMER)
            return jv_err(v, field, "cut_after: confirm is for a publisher's broker link, and "
                           "%s is a consumer", sc->procs[st->proc].name);
    }
    if (st->net.kind == NP_WINDOW) {
        enum sc_kind k = sc->procs[st->proc].kind;
        enum np_frame fr = st->net.frame;
        int consumer_frame = fr == NP_FRAME_ACK || fr == NP_FRAME_NACK ||
                             fr == NP_FRAME_REJECT || fr == NP_FRAME_DELIVER;
        int publisher_frame = fr == NP_FRAME_PUBLISH || fr == NP_FRAME_CONFIRM;
        /* A producer's publish is a target's (net_producer_broker). */
        if ((consumer_frame && k != SC_CONSUMER) ||
            (publisher_frame && k != SC_RELAY && k != SC_API))
            return jv_err(v, field, "frame: %s passes on a %s's broker link, and %s is a%s %s",
                           np_frame_name(fr), consumer_frame ? "consumer" : "publisher",
                           sc->procs[st->proc].name, k == SC_API ? "n" : "", sc_kind_name(k));
    }
    /* A partition of a broker link needs RabbitMQ's (TCP); the fake
     * broker's are Unix sockets: runner_fake_skip skips it there. */
    return 0;
}

/* Parses steps[idx] into sc->steps[idx]: the fields every step shares, then
 * the verb's own parser. */
int sc_parse_step(struct jv_ctx *v, struct scenario *sc, const cJSON *s, int idx)
{
    char field[48];
    snprintf(field, sizeof(field), "steps[%d]", idx);
    struct sc_step *st = &sc->steps[idx];
    memset(st, 0, sizeof(*st));
    st->proc = -1;
    st->expect_rows = -1;
    st->expect_exit = -1;
    if (!cJSON_IsObject(s))
        return jv_err(v, field, "must be an object");
    const char *verb = NULL;
    if (jv_str(v, s, "do", field, 1, &verb) < 0)
        return -1;
    int vb = jv_name_index(sc_verb_names,
                           (int)(sizeof(sc_verb_names) / sizeof(sc_verb_names[0])), verb);
    if (vb < 0) {
        char f[64];
        snprintf(f, sizeof(f), "%s.do", field);
        return jv_err(v, f, "unknown verb '%s' (start, restart, stop, kill, pause, resume, "
                       "fault, http, payments, broker, sql, outboxctl, wait, db, broker_crash, "
                       "sleep, net)", verb);
    }
    st->verb = (enum sc_verb)vb;
    if (jv_str(v, s, "why", field, 0, &st->why) < 0)
        return -1;
    switch (st->verb) {
    case V_START:
    case V_RESTART:
        return parse_step_start(v, sc, s, field, st);
    case V_STOP:
    case V_KILL:
    case V_PAUSE:
    case V_RESUME:
        return parse_step_signal(v, sc, s, field, st);
    case V_FAULT:
        return parse_step_fault(v, sc, s, field, st);
    case V_HTTP:
        return parse_step_http(v, sc, s, field, st, idx);
    case V_PAYMENTS:
        return parse_step_payments(v, sc, s, field, st);
    case V_BROKER:
        return parse_step_broker(v, s, field, st);
    case V_SQL:
        return parse_step_sql(v, s, field, st);
    case V_OUTBOXCTL:
        return parse_step_outboxctl(v, s, field, st);
    case V_WAIT:
        return parse_step_wait(v, sc, s, field, st);
    case V_DB:
        return parse_step_db(v, sc, s, field, st);
    case V_BROKER_CRASH:
        return parse_step_broker_crash(v, s, field, st);
    case V_SLEEP:
        return parse_step_sleep(v, s, field, st);
    case V_NET:
        return parse_step_net(v, sc, s, field, st);
    case V_SCRAPE:
        return parse_step_scrape(v, sc, s, field, st);
    }
    return jv_err(v, field, "unhandled verb");
}
