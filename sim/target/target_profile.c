/* target_profile.c -- a target profile read, validated and described: see
 * target.h for its shape.  Every field is checked here, before anything
 * starts: a profile the runner would half act on is refused whole. */
#include "target.h"
#include "common_fs.h"
#include "common_json.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const role_names[TG_ROLE_COUNT] = { "producer", "relay", "consumer" };
static const char *const map_names[TG_MAP_COUNT] = { "acknowledged", "outbox", "inbox",
                                                     "effects" };
static const char *const map_cols_ack[] = { "key", "aggregate_id", NULL };
static const char *const map_cols_outbox[] = { "id", "aggregate_id", "version", "state", NULL };
static const char *const map_cols_inbox[] = { "consumer", "message_id", NULL };
static const char *const map_cols_effects[] = { "consumer", "message_id", "aggregate_id",
                                                "version", "seq", NULL };
static const char *const *const map_cols[TG_MAP_COUNT] = {
    map_cols_ack, map_cols_outbox, map_cols_inbox, map_cols_effects
};

/* What the runner fills in for each process instance (through that
 * instance's own fault-proxy links) and for each operation. */
static const char *const process_placeholders[] = {
    "pg_conninfo", "pg_url", "pg_host", "pg_port", "pg_user", "pg_db", "amqp_url",
    "http_port", "instance", "role", "consumer", "target_dir", "run_dir", NULL
};
static const char *const operation_placeholders[] = {
    "key", "amount", "aggregate", "seq", NULL
};
/* The programs of the build under test a process template may name as
 * ${bin:NAME} (target.h). */
static const char *const build_programs[] = {
    "payments-api", "outbox-relay", "accounting-consumer", "outboxctl", NULL
};

const char *tg_role_name(enum tg_role r) { return role_names[r]; }
const char *tg_map_name(enum tg_map m) { return map_names[m]; }
const char *const *tg_map_columns(enum tg_map m) { return map_cols[m]; }

int tg_role_from_name(const char *name)
{
    return jv_name_index(role_names, TG_ROLE_COUNT, name);
}

const char *const *target_placeholders(enum tg_scope scope)
{
    return scope == TG_SCOPE_PROCESS ? process_placeholders : operation_placeholders;
}

const char *const *target_build_programs(void)
{
    return build_programs;
}

/* ---- placeholders ------------------------------------------------------- */

/* Every ${NAME} of tmpl must be one of scope's.  0 or -1. */
static int check_template(struct jv_ctx *v, const char *field, const char *tmpl,
                          enum tg_scope scope)
{
    for (const char *p = strstr(tmpl, "${"); p != NULL; p = strstr(p, "${")) {
        const char *end = strchr(p + 2, '}');
        if (end == NULL)
            return jv_err(v, field, "'${' without its closing '}'");
        char name[64];
        size_t n = (size_t)(end - p - 2);
        if (n == 0 || n >= sizeof(name))
            return jv_err(v, field, "an empty or overlong placeholder name");
        memcpy(name, p + 2, n);
        name[n] = '\0';
        if (strncmp(name, TG_BIN_PREFIX, strlen(TG_BIN_PREFIX)) == 0 &&
            scope == TG_SCOPE_PROCESS) {
            if (!jv_in_list(name + strlen(TG_BIN_PREFIX), build_programs)) {
                char known[256] = "";
                for (const char *const *k = build_programs; *k != NULL; k++)
                    snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                             known[0] ? ", " : "", *k);
                return jv_err(v, field, "'${%s}' names no program of the build (its "
                              "programs: %s)", name, known);
            }
            p = end + 1;
            continue;
        }
        if (!jv_in_list(name, target_placeholders(scope))) {
            char known[512] = "";
            for (const char *const *k = target_placeholders(scope); *k != NULL; k++)
                snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                         known[0] ? ", " : "", *k);
            return jv_err(v, field, "unknown placeholder '${%s}' (here: %s)", name, known);
        }
        p = end + 1;
    }
    return 0;
}

void tg_vars_set(struct tg_vars *v, const char *name, const char *value)
{
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->name[i], name) == 0) {
            v->value[i] = value;
            return;
        }
    if (v->n < (int)(sizeof(v->name) / sizeof(v->name[0]))) {
        v->name[v->n] = name;
        v->value[v->n++] = value;
    }
}

int target_expand(const char *tmpl, const struct tg_vars *vars, char *out, size_t outlen,
                  char *err, size_t errlen)
{
    size_t o = 0;
    for (const char *p = tmpl; *p != '\0';) {
        const char *piece = p;
        size_t n = 1;
        const char *end = p[0] == '$' && p[1] == '{' ? strchr(p + 2, '}') : NULL;
        if (end != NULL) {
            size_t len = (size_t)(end - p - 2);
            piece = NULL;
            for (int i = 0; i < vars->n && piece == NULL; i++)
                if (strlen(vars->name[i]) == len && strncmp(vars->name[i], p + 2, len) == 0)
                    piece = vars->value[i];
            if (piece == NULL) {
                snprintf(err, errlen, "placeholder '%.*s' has no value here", (int)len, p + 2);
                return -1;
            }
            n = strlen(piece);
            p = end + 1;
        } else {
            p++;
        }
        if (o + n >= outlen) {
            snprintf(err, errlen, "'%.60s' expands beyond %zu bytes", tmpl, outlen - 1);
            return -1;
        }
        memcpy(out + o, piece, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

int target_fill_json(cJSON *tree, const struct tg_vars *vars, char *err, size_t errlen)
{
    if (cJSON_IsString(tree)) {
        char out[2048];
        if (target_expand(tree->valuestring, vars, out, sizeof(out), err, errlen) < 0)
            return -1;
        return cJSON_SetValuestring(tree, out) != NULL ? 0 : -1;
    }
    cJSON *it;
    cJSON_ArrayForEach(it, tree)
        if (target_fill_json(it, vars, err, errlen) < 0)
            return -1;
    return 0;
}

/* ---- the parts ---------------------------------------------------------- */

/* A non-empty array of non-empty strings (templates of scope) into argv. */
static int parse_argv(struct jv_ctx *v, const cJSON *arr, const char *field,
                      enum tg_scope scope, const char **argv, int *argc)
{
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
        return jv_err(v, field, "must be a non-empty array of strings");
    if (cJSON_GetArraySize(arr) > TG_MAX_ARGV)
        return jv_err(v, field, "more than %d words", TG_MAX_ARGV);
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        char f[160];
        snprintf(f, sizeof(f), "%s[%d]", field, n);
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
            return jv_err(v, f, "must be a non-empty string");
        if (check_template(v, f, it->valuestring, scope) < 0)
            return -1;
        argv[n++] = it->valuestring;
    }
    argv[n] = NULL;
    *argc = n;
    return 0;
}

/* "env": {"NAME": "template"} of a process or a set-up command. */
static int parse_env(struct jv_ctx *v, const cJSON *env, const char *field, int *n,
                     const char **names, const char **values)
{
    char f[192];
    if (env != NULL && !cJSON_IsObject(env))
        return jv_err(v, field, "env: must be an object of NAME: template");
    const cJSON *it;
    cJSON_ArrayForEach(it, env) {
        snprintf(f, sizeof(f), "%s.env.%s", field, it->string);
        if (*n == TG_MAX_ENV)
            return jv_err(v, f, "more than %d variables", TG_MAX_ENV);
        if (it->string[0] == '\0' || strchr(it->string, '=') != NULL)
            return jv_err(v, f, "not a variable name");
        if (!cJSON_IsString(it))
            return jv_err(v, f, "must be a string");
        if (check_template(v, f, it->valuestring, TG_SCOPE_PROCESS) < 0)
            return -1;
        names[*n] = it->string;
        values[(*n)++] = it->valuestring;
    }
    return 0;
}

static int parse_requires(struct jv_ctx *v, struct target *t, const cJSON *arr)
{
    if (arr == NULL)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > TG_MAX_REQUIRES)
        return jv_err(v, "requires", "must be an array of at most %d commands",
                      TG_MAX_REQUIRES);
    static const char *const fields[] = { "command", "why", NULL };
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        int i = t->nrequires;
        char f[64];
        snprintf(f, sizeof(f), "requires[%d]", i);
        if (!cJSON_IsObject(it) || jv_only_fields(v, it, f, fields) < 0)
            return cJSON_IsObject(it) ? -1 : jv_err(v, f, "must be an object");
        char cf[80];
        snprintf(cf, sizeof(cf), "%s.command", f);
        if (parse_argv(v, cJSON_GetObjectItemCaseSensitive(it, "command"), cf,
                       TG_SCOPE_PROCESS, t->require_argv[i], &t->require_argc[i]) < 0)
            return -1;
        if (jv_str(v, it, "why", f, 1, &t->require_why[i]) < 0)
            return -1;
        t->nrequires++;
    }
    return 0;
}

static int parse_database(struct jv_ctx *v, struct target *t, const cJSON *db)
{
    if (db == NULL)
        return 0;
    static const char *const fields[] = { "settings", NULL };
    if (!cJSON_IsObject(db))
        return jv_err(v, "database", "must be an object");
    if (jv_only_fields(v, db, "database", fields) < 0)
        return -1;
    const cJSON *set = cJSON_GetObjectItemCaseSensitive(db, "settings");
    if (set == NULL)
        return 0;
    if (!cJSON_IsObject(set))
        return jv_err(v, "database.settings", "must be an object of server settings");
    const cJSON *it;
    cJSON_ArrayForEach(it, set) {
        char f[128];
        snprintf(f, sizeof(f), "database.settings.%s", it->string);
        if (t->nsettings == TG_MAX_SETTINGS)
            return jv_err(v, "database.settings", "more than %d settings", TG_MAX_SETTINGS);
        for (const char *c = it->string; *c; c++)
            if (!islower((unsigned char)*c) && *c != '_' && !isdigit((unsigned char)*c))
                return jv_err(v, f, "a setting name is lower case letters, digits and '_'");
        int i = t->nsettings;
        if (cJSON_IsString(it))
            snprintf(t->setting_value[i], sizeof(t->setting_value[i]), "%s", it->valuestring);
        else if (cJSON_IsNumber(it) && it->valuedouble == (double)(long long)it->valuedouble)
            snprintf(t->setting_value[i], sizeof(t->setting_value[i]), "%lld",
                     (long long)it->valuedouble);
        else
            return jv_err(v, f, "must be a string or an integer");
        /* The value goes on the server's command line (-c name=value). */
        for (const char *c = t->setting_value[i]; *c; c++)
            if (!isalnum((unsigned char)*c) && strchr("_.-", *c) == NULL)
                return jv_err(v, f, "'%s': only letters, digits, '_', '.' and '-'",
                              t->setting_value[i]);
        t->setting_name[t->nsettings++] = it->string;
    }
    return 0;
}

static int parse_broker(struct jv_ctx *v, struct target *t, const cJSON *b)
{
    static const char *const fields[] = { "exchange", "queues", "message_id", NULL };
    if (!cJSON_IsObject(b))
        return jv_err(v, "broker", b ? "must be an object" : "missing (the exchange and "
                      "the queues are required)");
    if (jv_only_fields(v, b, "broker", fields) < 0 ||
        jv_str(v, b, "exchange", "broker", 1, &t->exchange) < 0)
        return -1;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(b, "queues");
    if (!cJSON_IsObject(q) || cJSON_GetArraySize(q) == 0)
        return jv_err(v, "broker.queues", "must be an object naming each consumer group's "
                      "queue ({\"accounting\": \"accounting\"})");
    const cJSON *it;
    cJSON_ArrayForEach(it, q) {
        if (t->nqueues == TG_MAX_QUEUES)
            return jv_err(v, "broker.queues", "more than %d queues", TG_MAX_QUEUES);
        char f[128];
        snprintf(f, sizeof(f), "broker.queues.%s", it->string);
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0')
            return jv_err(v, f, "must be a non-empty queue name");
        t->queue_group[t->nqueues] = it->string;
        t->queue_name[t->nqueues++] = it->valuestring;
    }
    const char *mid = NULL;
    if (jv_str(v, b, "message_id", "broker", 0, &mid) < 0)
        return -1;
    if (mid != NULL && strcmp(mid, "property") != 0) {
        if (strncmp(mid, "body:", 5) != 0 || mid[5] == '\0')
            return jv_err(v, "broker.message_id", "'%s': \"property\" (the AMQP message_id "
                          "property) or \"body:FIELD\" (a top-level field of a JSON body)", mid);
        t->message_id_field = mid + 5;
    }
    return 0;
}

static int parse_setup(struct jv_ctx *v, struct target *t, const cJSON *arr)
{
    if (arr == NULL)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > TG_MAX_SETUP)
        return jv_err(v, "setup", "must be an array of at most %d steps", TG_MAX_SETUP);
    static const char *const fields[] = { "command", "env", "sql_file", "timeout_ms", NULL };
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        struct tg_setup *s = &t->setup[t->nsetup];
        char f[64], cf[80];
        snprintf(f, sizeof(f), "setup[%d]", t->nsetup);
        if (!cJSON_IsObject(it))
            return jv_err(v, f, "must be an object");
        if (jv_only_fields(v, it, f, fields) < 0)
            return -1;
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(it, "command");
        if (jv_str(v, it, "sql_file", f, 0, &s->sql_file) < 0)
            return -1;
        if ((cmd != NULL) == (s->sql_file != NULL))
            return jv_err(v, f, "needs exactly one of \"command\" and \"sql_file\"");
        snprintf(cf, sizeof(cf), "%s.command", f);
        if (cmd != NULL && parse_argv(v, cmd, cf, TG_SCOPE_PROCESS, s->argv, &s->argc) < 0)
            return -1;
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(it, "env");
        if (env != NULL && cmd == NULL)
            return jv_err(v, f, "\"env\" is for a command");
        if (parse_env(v, env, f, &s->nenv, s->env_name, s->env_value) < 0)
            return -1;
        if (s->sql_file != NULL) {
            char path[PATH_MAX];
            cw_fmt(path, sizeof(path), "%s/%s", t->dir, s->sql_file);
            if (access(path, R_OK) != 0)
                return jv_err(v, f, "sql_file '%s' cannot be read (%s)", s->sql_file,
                              strerror(errno));
        }
        s->timeout_ms = 60000;
        if (jv_opt_int(v, it, "timeout_ms", f, 100, 600000, &s->timeout_ms) < 0)
            return -1;
        t->nsetup++;
    }
    return 0;
}

static int parse_ready(struct jv_ctx *v, struct tg_process *p, const cJSON *r,
                       const char *field)
{
    static const char *const fields[] = { "log_line", "tcp_port", "http_get", "sql",
                                          "timeout_ms", NULL };
    static const char *const kinds[] = { "log_line", "tcp_port", "http_get", "sql" };
    if (!cJSON_IsObject(r))
        return jv_err(v, field, r ? "must be an object" : "missing (how the runner knows "
                      "the process is ready: log_line, tcp_port, http_get or sql)");
    if (jv_only_fields(v, r, field, fields) < 0)
        return -1;
    int found = 0;
    for (int k = 0; k < 4; k++) {
        const char *text = NULL;
        if (jv_str(v, r, kinds[k], field, 0, &text) < 0)
            return -1;
        if (text == NULL)
            continue;
        if (found++)
            return jv_err(v, field, "needs exactly one of log_line, tcp_port, http_get, sql");
        p->ready = (enum tg_ready)k;
        p->ready_text = text;
    }
    if (!found)
        return jv_err(v, field, "needs one of log_line, tcp_port, http_get, sql");
    char f[192];
    snprintf(f, sizeof(f), "%s.%s", field, kinds[p->ready]);
    if (p->ready != TG_READY_SQL && check_template(v, f, p->ready_text, TG_SCOPE_PROCESS) < 0)
        return -1;
    if (p->ready == TG_READY_HTTP_GET && p->ready_text[0] != '/')
        return jv_err(v, f, "a path on the process's ${http_port}, starting with '/'");
    long long ms;
    if (jv_int(v, r, "timeout_ms", field, 1, 100, TG_READY_MAX_MS, &ms) < 0)
        return -1;
    p->ready_timeout_ms = (int)ms;
    return 0;
}

static int parse_process(struct jv_ctx *v, struct tg_process *p, const cJSON *obj,
                         const char *field)
{
    static const char *const fields[] = { "argv", "cwd", "env", "ready", "stop_signal",
                                          "restart", NULL };
    char f[128];
    if (!cJSON_IsObject(obj))
        return jv_err(v, field, "must be an object");
    if (jv_only_fields(v, obj, field, fields) < 0)
        return -1;
    snprintf(f, sizeof(f), "%s.argv", field);
    if (parse_argv(v, cJSON_GetObjectItemCaseSensitive(obj, "argv"), f, TG_SCOPE_PROCESS,
                   p->argv, &p->argc) < 0)
        return -1;
    if (jv_str(v, obj, "cwd", field, 0, &p->cwd) < 0)
        return -1;
    snprintf(f, sizeof(f), "%s.cwd", field);
    if (p->cwd != NULL && check_template(v, f, p->cwd, TG_SCOPE_PROCESS) < 0)
        return -1;
    if (parse_env(v, cJSON_GetObjectItemCaseSensitive(obj, "env"), field, &p->nenv,
                  p->env_name, p->env_value) < 0)
        return -1;
    snprintf(f, sizeof(f), "%s.ready", field);
    if (parse_ready(v, p, cJSON_GetObjectItemCaseSensitive(obj, "ready"), f) < 0)
        return -1;
    const char *sig = NULL;
    if (jv_str(v, obj, "stop_signal", field, 0, &sig) < 0)
        return -1;
    p->stop_signal = SIGTERM;
    if (sig != NULL) {
        static const char *const sigs[] = { "TERM", "INT", "KILL" };
        static const int nums[] = { SIGTERM, SIGINT, SIGKILL };
        int k = jv_name_index(sigs, 3, sig);
        if (k < 0)
            return jv_err(v, field, "stop_signal: '%s' is not TERM, INT or KILL", sig);
        p->stop_signal = nums[k];
    }
    p->restart = 1;
    if (jv_bool(v, obj, "restart", field, &p->restart) < 0)
        return -1;
    p->defined = 1;
    return 0;
}

static int parse_processes(struct jv_ctx *v, struct target *t, const cJSON *procs)
{
    if (!cJSON_IsObject(procs))
        return jv_err(v, "processes", procs ? "must be an object of roles" :
                      "missing (the target's processes by role)");
    const cJSON *it;
    cJSON_ArrayForEach(it, procs) {
        int r = tg_role_from_name(it->string);
        char f[96];
        snprintf(f, sizeof(f), "processes.%s", it->string);
        if (r < 0)
            return jv_err(v, "processes", "unknown role '%s' (producer, relay or consumer)",
                          it->string);
        if (parse_process(v, &t->proc[r], it, f) < 0)
            return -1;
    }
    /* A relay may live inside the producer (a framework's in-process
     * outbox); the producer and the consumer cannot be missing. */
    if (!t->proc[TG_PRODUCER].defined || !t->proc[TG_CONSUMER].defined)
        return jv_err(v, "processes", "needs a producer and a consumer (a relay is "
                      "optional: some frameworks relay inside the producer)");
    return 0;
}

/* Every string of a request body template is a template of an operation. */
static int check_body(struct jv_ctx *v, const cJSON *b, const char *field)
{
    if (cJSON_IsString(b))
        return check_template(v, field, b->valuestring, TG_SCOPE_OPERATION);
    const cJSON *it;
    int i = 0;
    cJSON_ArrayForEach(it, b) {
        char f[160];
        if (it->string != NULL)
            snprintf(f, sizeof(f), "%s.%s", field, it->string);
        else
            snprintf(f, sizeof(f), "%s[%d]", field, i);
        if (check_body(v, it, f) < 0)
            return -1;
        i++;
    }
    return 0;
}

static int parse_operation(struct jv_ctx *v, struct tg_operation *op, const cJSON *obj,
                           const char *field)
{
    static const char *const fields[] = { "http", "ack", "aggregate_field", NULL };
    static const char *const http_fields[] = { "method", "path", "headers", "body", NULL };
    static const char *const ack_fields[] = { "status", NULL };
    static const char *const methods[] = { "GET", "POST", "PUT", "PATCH", "DELETE" };
    char f[128];
    if (!cJSON_IsObject(obj))
        return jv_err(v, field, "must be an object");
    if (jv_only_fields(v, obj, field, fields) < 0)
        return -1;
    const cJSON *http = cJSON_GetObjectItemCaseSensitive(obj, "http");
    snprintf(f, sizeof(f), "%s.http", field);
    if (!cJSON_IsObject(http))
        return jv_err(v, f, "missing (the HTTP request that offers the operation)");
    if (jv_only_fields(v, http, f, http_fields) < 0 ||
        jv_str(v, http, "method", f, 1, &op->method) < 0 ||
        jv_str(v, http, "path", f, 1, &op->path) < 0)
        return -1;
    if (jv_name_index(methods, 5, op->method) < 0)
        return jv_err(v, f, "method: '%s' is not GET, POST, PUT, PATCH or DELETE", op->method);
    char pf[160];
    snprintf(pf, sizeof(pf), "%s.path", f);
    if (op->path[0] != '/')
        return jv_err(v, pf, "must start with '/'");
    if (check_template(v, pf, op->path, TG_SCOPE_OPERATION) < 0)
        return -1;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(http, "headers");
    if (h != NULL && !cJSON_IsObject(h))
        return jv_err(v, f, "headers: must be an object of Name: template");
    const cJSON *it;
    cJSON_ArrayForEach(it, h) {
        snprintf(pf, sizeof(pf), "%s.headers.%s", f, it->string);
        if (op->nheaders == TG_MAX_HEADERS)
            return jv_err(v, pf, "more than %d headers", TG_MAX_HEADERS);
        for (const char *c = it->string; *c; c++)
            if (!isalnum((unsigned char)*c) && *c != '-')
                return jv_err(v, pf, "not a header name");
        if (!cJSON_IsString(it) || strpbrk(it->valuestring, "\r\n") != NULL)
            return jv_err(v, pf, "must be a one-line string");
        if (check_template(v, pf, it->valuestring, TG_SCOPE_OPERATION) < 0)
            return -1;
        op->header_name[op->nheaders] = it->string;
        op->header_value[op->nheaders++] = it->valuestring;
    }
    op->body = cJSON_GetObjectItemCaseSensitive(http, "body");
    snprintf(pf, sizeof(pf), "%s.body", f);
    if (op->body != NULL && check_body(v, op->body, pf) < 0)
        return -1;
    const cJSON *ack = cJSON_GetObjectItemCaseSensitive(obj, "ack");
    snprintf(f, sizeof(f), "%s.ack", field);
    if (!cJSON_IsObject(ack))
        return jv_err(v, f, "missing (how the answer acknowledges the operation: "
                      "{\"status\": [201]})");
    if (jv_only_fields(v, ack, f, ack_fields) < 0)
        return -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(ack, "status");
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) == 0 ||
        cJSON_GetArraySize(st) > TG_MAX_ACK)
        return jv_err(v, f, "status: must be an array of 1 to %d HTTP statuses", TG_MAX_ACK);
    cJSON_ArrayForEach(it, st) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 200 || it->valuedouble > 299 ||
            it->valuedouble != (double)(int)it->valuedouble)
            return jv_err(v, f, "status: an acknowledgement is a 2xx status");
        op->ack_status[op->nack++] = (int)it->valuedouble;
    }
    op->aggregate_field = "id";
    if (jv_str(v, obj, "aggregate_field", field, 0, &op->aggregate_field) < 0)
        return -1;
    op->defined = 1;
    return 0;
}

static int parse_workload(struct jv_ctx *v, struct target *t, const cJSON *w)
{
    static const char *const fields[] = { "create", "follow_up", NULL };
    if (!cJSON_IsObject(w))
        return jv_err(v, "workload", w ? "must be an object" : "missing (how one business "
                      "operation is offered: \"create\")");
    if (jv_only_fields(v, w, "workload", fields) < 0)
        return -1;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(w, "create");
    if (c == NULL)
        return jv_err(v, "workload.create", "missing (the operation that creates an aggregate)");
    if (parse_operation(v, &t->create, c, "workload.create") < 0)
        return -1;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(w, "follow_up");
    return f == NULL ? 0 : parse_operation(v, &t->follow_up, f, "workload.follow_up");
}

static int parse_mapping(struct jv_ctx *v, struct target *t, const cJSON *m)
{
    if (!cJSON_IsObject(m))
        return jv_err(v, "mapping", m ? "must be an object of queries" : "missing (the "
                      "queries that map the target's tables: outbox and effects at least)");
    if (jv_only_fields(v, m, "mapping", map_names) < 0)
        return -1;
    for (int i = 0; i < TG_MAP_COUNT; i++) {
        if (jv_str(v, m, map_names[i], "mapping", 0, &t->mapping[i]) < 0)
            return -1;
        /* Each query becomes a view's body: one statement, no terminator. */
        if (t->mapping[i] != NULL && strchr(t->mapping[i], ';') != NULL) {
            char f[64];
            snprintf(f, sizeof(f), "mapping.%s", map_names[i]);
            return jv_err(v, f, "one SELECT without ';'");
        }
    }
    if (t->mapping[TG_MAP_OUTBOX] == NULL || t->mapping[TG_MAP_EFFECTS] == NULL)
        return jv_err(v, "mapping", "needs \"outbox\" and \"effects\" at least: without them "
                      "nothing can be judged");
    return 0;
}

static int parse_findings(struct jv_ctx *v, struct target *t, const cJSON *arr)
{
    static const char *const fields[] = { "scenario", "invariant", "witness", "why", "source",
                                          NULL };
    static const char *const judged[] = { "nothing_lost", "effect_once",
                                          "broker_log_matches_outbox", "versions_in_order",
                                          "one_payment_per_key", NULL };
    if (arr == NULL)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > TG_MAX_FINDINGS)
        return jv_err(v, "findings", "must be an array of at most %d findings",
                      TG_MAX_FINDINGS);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        struct tg_finding *f = &t->findings[t->nfindings];
        char fld[64];
        snprintf(fld, sizeof(fld), "findings[%d]", t->nfindings);
        if (!cJSON_IsObject(it))
            return jv_err(v, fld, "must be an object");
        if (jv_only_fields(v, it, fld, fields) < 0 ||
            jv_str(v, it, "scenario", fld, 1, &f->scenario) < 0 ||
            jv_str(v, it, "invariant", fld, 1, &f->invariant) < 0 ||
            jv_str(v, it, "witness", fld, 1, &f->witness) < 0 ||
            jv_str(v, it, "why", fld, 1, &f->why) < 0 ||
            jv_str(v, it, "source", fld, 1, &f->source) < 0)
            return -1;
        if (!jv_in_list(f->invariant, judged))
            return jv_err(v, fld, "invariant '%s' is not judged on a target (nothing_lost, "
                          "effect_once, broker_log_matches_outbox, versions_in_order, "
                          "one_payment_per_key)", f->invariant);
        /* Several findings may explain one invariant's violations in one
         * scenario (a loss of two kinds), each by its own text. */
        if (strchr(f->witness, '\n') != NULL || strlen(f->witness) > 150)
            return jv_err(v, fld, "witness: one line of at most 150 characters");
        for (int k = 0; k < t->nfindings; k++)
            if (strcmp(t->findings[k].scenario, f->scenario) == 0 &&
                strcmp(t->findings[k].invariant, f->invariant) == 0 &&
                strcmp(t->findings[k].witness, f->witness) == 0)
                return jv_err(v, fld, "the same witness text as findings[%d]", k);
        t->nfindings++;
    }
    return 0;
}

static int parse_not_applicable(struct jv_ctx *v, struct target *t, const cJSON *arr)
{
    static const char *const fields[] = { "scenario", "why", NULL };
    if (arr == NULL)
        return 0;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) > TG_MAX_NOT_APPLICABLE)
        return jv_err(v, "not_applicable", "must be an array of at most %d entries",
                      TG_MAX_NOT_APPLICABLE);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        struct tg_not_applicable *na = &t->not_applicable[t->nnot_applicable];
        char fld[64];
        snprintf(fld, sizeof(fld), "not_applicable[%d]", t->nnot_applicable);
        if (!cJSON_IsObject(it))
            return jv_err(v, fld, "must be an object");
        if (jv_only_fields(v, it, fld, fields) < 0 ||
            jv_str(v, it, "scenario", fld, 1, &na->scenario) < 0 ||
            jv_str(v, it, "why", fld, 1, &na->why) < 0)
            return -1;
        if (strchr(na->why, '\n') != NULL || strlen(na->why) > 200)
            return jv_err(v, fld, "why: one line of at most 200 characters");
        /* A scenario cannot be both: a finding is a window that opened. */
        if (target_not_applicable(t, na->scenario) != NULL)
            return jv_err(v, fld, "'%s' is named twice", na->scenario);
        for (int k = 0; k < t->nfindings; k++)
            if (strcmp(t->findings[k].scenario, na->scenario) == 0)
                return jv_err(v, fld, "'%s' has a finding (findings[%d]): a scenario with a "
                              "finding applies", na->scenario, k);
        t->nnot_applicable++;
    }
    return 0;
}

const char *target_not_applicable(const struct target *t, const char *scenario)
{
    for (int i = 0; i < t->nnot_applicable; i++)
        if (strcmp(t->not_applicable[i].scenario, scenario) == 0)
            return t->not_applicable[i].why;
    return NULL;
}

/* ---- the profile -------------------------------------------------------- */

struct target *target_parse(const char *text, const char *path, char *err, size_t errlen)
{
    struct jv_ctx v = { .path = path, .err = err, .errlen = errlen };
    struct target *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    snprintf(t->path, sizeof(t->path), "%s", path);
    char abs[PATH_MAX];
    if (realpath(path, abs) == NULL)
        snprintf(abs, sizeof(abs), "%s", path);
    char *slash = strrchr(abs, '/');
    if (slash != NULL)
        *slash = '\0';
    snprintf(t->dir, sizeof(t->dir), "%s", slash != NULL ? abs : ".");
    t->root = cJSON_Parse(text);
    if (t->root == NULL || !cJSON_IsObject(t->root)) {
        jv_err(&v, "", "not a JSON object");
        goto fail;
    }
    static const char *const fields[] = { "target", "title", "requires", "database", "broker",
                                          "setup", "processes", "workload", "mapping",
                                          "findings", "not_applicable", "progress_timeout_ms",
                                          NULL };
    const cJSON *r = t->root;
    if (jv_only_fields(&v, r, "", fields) < 0 ||
        jv_str(&v, r, "target", "", 1, &t->name) < 0 ||
        jv_str(&v, r, "title", "", 1, &t->title) < 0)
        goto fail;
    for (const char *c = t->name; *c; c++)
        if (!islower((unsigned char)*c) && !isdigit((unsigned char)*c) && *c != '-') {
            jv_err(&v, "target", "'%s': a name is lower case letters, digits and '-'", t->name);
            goto fail;
        }
    if (parse_requires(&v, t, cJSON_GetObjectItemCaseSensitive(r, "requires")) < 0 ||
        parse_database(&v, t, cJSON_GetObjectItemCaseSensitive(r, "database")) < 0 ||
        parse_broker(&v, t, cJSON_GetObjectItemCaseSensitive(r, "broker")) < 0 ||
        parse_setup(&v, t, cJSON_GetObjectItemCaseSensitive(r, "setup")) < 0 ||
        parse_processes(&v, t, cJSON_GetObjectItemCaseSensitive(r, "processes")) < 0 ||
        parse_workload(&v, t, cJSON_GetObjectItemCaseSensitive(r, "workload")) < 0 ||
        parse_mapping(&v, t, cJSON_GetObjectItemCaseSensitive(r, "mapping")) < 0 ||
        parse_findings(&v, t, cJSON_GetObjectItemCaseSensitive(r, "findings")) < 0 ||
        parse_not_applicable(&v, t, cJSON_GetObjectItemCaseSensitive(r, "not_applicable")) < 0 ||
        jv_opt_int(&v, r, "progress_timeout_ms", "", 1000, 600000, &t->progress_timeout_ms) < 0)
        goto fail;
    return t;
fail:
    target_free(t);
    return NULL;
}

struct target *target_load(const char *path, char *err, size_t errlen)
{
    enum cw_slurp_error why;
    size_t len;
    char *text = cw_slurp(path, 1u << 20, &len, &why);
    if (text == NULL) {
        if (why == CW_SLURP_OPEN)
            snprintf(err, errlen, "%s: cannot open (%s)", path, strerror(errno));
        else
            snprintf(err, errlen, "%s: %s", path, why == CW_SLURP_TOO_LARGE
                     ? "too large for a profile (over 1 MiB)" : "cannot read it");
        return NULL;
    }
    struct target *t = target_parse(text, path, err, errlen);
    free(text);
    return t;
}

void target_free(struct target *t)
{
    if (t == NULL)
        return;
    cJSON_Delete(t->root);
    free(t);
}

/* ---- --dry-run ------------------------------------------------------------ */

static void describe_argv(FILE *out, const char *const *argv)
{
    for (int i = 0; argv[i] != NULL; i++)
        fprintf(out, "%s%s", i ? " " : "", argv[i]);
}

void target_describe(const struct target *t, FILE *out)
{
    static const char *const ready_words[] = { "prints a line containing", "listens on port",
                                               "answers 2xx to GET", "makes this true:" };
    fprintf(out, "target %s: %s\n  profile: %s\n", t->name, t->title, t->path);
    for (int i = 0; i < t->nrequires; i++) {
        fprintf(out, "  requires: ");
        describe_argv(out, t->require_argv[i]);
        fprintf(out, " (%s)\n", t->require_why[i]);
    }
    for (int i = 0; i < t->nsettings; i++)
        fprintf(out, "  database setting: %s = %s\n", t->setting_name[i], t->setting_value[i]);
    fprintf(out, "  broker: RabbitMQ (a throwaway node), exchange '%s', message id from %s%s\n",
            t->exchange, t->message_id_field ? "the body's field " : "the message_id property",
            t->message_id_field ? t->message_id_field : "");
    for (int i = 0; i < t->nqueues; i++)
        fprintf(out, "    consumer group %s reads queue '%s'\n", t->queue_group[i],
                t->queue_name[i]);
    for (int i = 0; i < t->nsetup; i++) {
        fprintf(out, "  set-up %d (at most %d s): ", i + 1, t->setup[i].timeout_ms / 1000);
        if (t->setup[i].sql_file != NULL)
            fprintf(out, "SQL file %s\n", t->setup[i].sql_file);
        else {
            describe_argv(out, t->setup[i].argv);
            fputc('\n', out);
        }
    }
    for (int r = 0; r < TG_ROLE_COUNT; r++) {
        const struct tg_process *p = &t->proc[r];
        if (!p->defined) {
            fprintf(out, "  %s: none (the producer relays)\n", role_names[r]);
            continue;
        }
        fprintf(out, "  %s: ", role_names[r]);
        describe_argv(out, p->argv);
        fprintf(out, "\n    in %s; ready when it %s '%s' within %d ms; stopped with %s; %s\n",
                p->cwd ? p->cwd : ".", ready_words[p->ready], p->ready_text,
                p->ready_timeout_ms, p->stop_signal == SIGTERM ? "SIGTERM" :
                p->stop_signal == SIGINT ? "SIGINT" : "SIGKILL",
                p->restart ? "may be restarted" : "never restarted");
        for (int i = 0; i < p->nenv; i++)
            fprintf(out, "    %s=%s\n", p->env_name[i], p->env_value[i]);
    }
    const struct tg_operation *ops[2] = { &t->create, &t->follow_up };
    static const char *const op_names[2] = { "create", "follow-up" };
    for (int i = 0; i < 2; i++) {
        if (!ops[i]->defined)
            continue;
        fprintf(out, "  workload %s: %s %s, acknowledged by", op_names[i], ops[i]->method,
                ops[i]->path);
        for (int k = 0; k < ops[i]->nack; k++)
            fprintf(out, " %d", ops[i]->ack_status[k]);
        fprintf(out, "; the aggregate is the answer's '%s'\n", ops[i]->aggregate_field);
    }
    if (t->progress_timeout_ms > 0)
        fprintf(out, "  a wait for messages, and the heal, end after %d ms without a change in "
                "the mapping\n", t->progress_timeout_ms);
    for (int i = 0; i < t->nfindings; i++)
        fprintf(out, "  known finding: %s fails %s where a witness says '%s': %s (%s)\n",
                t->findings[i].scenario, t->findings[i].invariant, t->findings[i].witness,
                t->findings[i].why, t->findings[i].source);
    for (int i = 0; i < t->nnot_applicable; i++)
        fprintf(out, "  not applicable: %s, skipped: %s\n", t->not_applicable[i].scenario,
                t->not_applicable[i].why);
    for (int m = 0; m < TG_MAP_COUNT; m++) {
        if (t->mapping[m] == NULL) {
            fprintf(out, "  mapping %s: not mapped (what needs it is shown as not examined)\n",
                    map_names[m]);
            continue;
        }
        fprintf(out, "  mapping %s (", map_names[m]);
        for (const char *const *c = map_cols[m]; *c != NULL; c++)
            fprintf(out, "%s%s", c == map_cols[m] ? "" : ", ", *c);
        fprintf(out, "): %s\n", t->mapping[m]);
    }
}
