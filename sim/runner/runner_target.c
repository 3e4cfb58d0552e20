/* runner_target.c -- a run against a target (--target PROFILE): someone
 * else's outbox, described by a profile (sim/target/target.h).
 *
 * A target is a black box: its processes are started from the profile's
 * roles, never compiled with fault points, and its tables are read only
 * through the profile's mapping.  So a scenario run against it may use only
 * what can be done from outside -- roles, the workload, waits on what the
 * mapping shows, kills, pauses and restarts, link faults (wire windows
 * among them), database and broker faults -- and list only the invariants
 * the mapping can judge.  Everything else is refused before anything
 * starts, naming the scenario and the field: a scenario that promised a
 * check the target cannot give would otherwise pass on nothing. */
#include "runner_internal.h"
#include "common_json.h"
#include "target.h"
#include "cwlog.h"
#include "evlog.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The expectations computed from the mapping, the broker log and the
 * runner's own records. */
static const char *const target_expects[] = {
    "outbox_rows", "published", "effects", "publishes", "deliveries", "redeliveries",
    "ok", "lost", "duplicated", "recovered", NULL
};

/* The role that runs a scenario process of kind k. */
static enum tg_role role_of(enum sc_kind k)
{
    return k == SC_API ? TG_PRODUCER : k == SC_RELAY ? TG_RELAY : TG_CONSUMER;
}

static int refuse_procs(const struct target *t, const struct scenario *sc, char *err,
                        size_t errlen)
{
    for (int i = 0; i < sc->nprocs; i++) {
        const struct sc_proc *p = &sc->procs[i];
        enum tg_role r = role_of(p->kind);
        const char *why = NULL;
        char buf[256];
        if (!t->proc[r].defined) {
            snprintf(buf, sizeof(buf), "the target has no %s role", tg_role_name(r));
            why = buf;
        } else if (p->nargs > 0) {
            why = "\"args\" are our programs' flags; a target's processes take the profile's argv";
        } else if (p->faults != NULL) {
            why = "\"faults\" are fault points compiled into our programs; on a target, "
                  "hit a crash window from the wire (a \"net\" step with fault \"window\")";
        } else if (p->db_deadline_ms > 0) {
            why = "\"db_deadline_ms\" sets our programs' database deadline";
        } else if (p->kind == SC_CONSUMER) {
            int found = 0;
            for (int q = 0; q < t->nqueues; q++)
                found |= strcmp(t->queue_group[q], p->group ? p->group : p->consumer_name) == 0;
            if (!found) {
                snprintf(buf, sizeof(buf), "consumer group '%s' has no queue in the profile's "
                         "broker.queues", p->group ? p->group : p->consumer_name);
                why = buf;
            }
        }
        if (why != NULL) {
            snprintf(err, errlen, "%s: processes.%s: cannot run against target %s: %s",
                     sc->path, p->name, t->name, why);
            return -1;
        }
    }
    return 0;
}

/* Why step st cannot be taken from outside, or NULL. */
static const char *step_refused(const struct target *t, const struct sc_step *st)
{
    switch (st->verb) {
    case V_START:
    case V_RESTART:
        return st->faults != NULL ? "\"faults\" are fault points of our programs" : NULL;
    case V_FAULT:
        return "a fault point of our programs; from outside, use a \"net\" step with fault "
               "\"window\"";
    case V_HTTP:
        return "a request to our API's routes; the target's workload is the \"payments\" step";
    case V_SQL:
    case V_OUTBOXCTL:
        return "reads or runs our pipeline's tables and runbook";
    case V_SCRAPE:
        return "reads our programs' own /metrics";
    case V_PAYMENTS:
        if ((st->authorize || st->capture) && !t->follow_up.defined)
            return "asks for follow-up operations the profile's workload does not offer";
        return NULL;
    case V_WAIT:
        switch (st->until) {
        case U_EXITED:
        case U_PUBLISHED:
        case U_CONSUMED:
        case U_QUIET:
            return NULL;
        default:
            return "waits on what only our programs log or store (use exited, published, "
                   "consumed or quiet)";
        }
    case V_DB:
        if (st->db_action == DB_LOCK || st->db_action == DB_DEADLOCK ||
            st->db_action == DB_REFUSE || st->db_action == DB_SEVER)
            return "a lock, a refusal or a sever names a table of our schema; a target's "
                   "tables are its own";
        return st->db_action == DB_FAILOVER || st->db_action == DB_STALL_REPLICATION
                   ? "a failover needs the scenario's own standby, not built for targets yet"
                   : NULL;
    case V_BROKER:
        return runner_rabbit_can_control(st->control)
                   ? NULL : "a switch of the fake broker; a target runs on RabbitMQ";
    case V_NET:
        return st->net_peer == NP_BROKER && st->net.kind == NP_CUT
                   ? "a protocol cut reads the fake broker's lines; a target's broker link "
                     "carries AMQP frames"
                   : NULL;
    case V_STOP:
    case V_KILL:
    case V_PAUSE:
    case V_RESUME:
    case V_BROKER_CRASH:
    case V_SLEEP:
        return NULL;
    }
    return "unknown step";
}

int runner_target_refuses(const struct target *t, const struct scenario *sc, char *err,
                          size_t errlen)
{
    if (refuse_procs(t, sc, err, errlen) < 0)
        return -1;
    const char *why = NULL;
    char field[64] = "";
    for (int i = 0; i < sc->nsteps && why == NULL; i++) {
        why = step_refused(t, &sc->steps[i]);
        snprintf(field, sizeof(field), "steps[%d]", i);
    }
    for (int i = 0; i < sc->ninvariants && why == NULL; i++) {
        if (!checker_target_judges(sc->invariants[i])) {
            snprintf(field, sizeof(field), "invariants[%d]", i);
            why = "reads the insides of our pipeline; a target is judged on nothing_lost, "
                  "effect_once, broker_log_matches_outbox, versions_in_order and "
                  "one_payment_per_key";
        }
    }
    for (int i = 0; i < sc->nexpect && why == NULL; i++) {
        if (!jv_in_list(sc->expect[i].check, target_expects)) {
            snprintf(field, sizeof(field), "expect[%d]", i);
            why = "counts something only our pipeline's tables or logs hold";
        }
    }
    if (why == NULL && sc->standby) {
        snprintf(field, sizeof(field), "database");
        why = "a standby is not built for targets yet";
    }
    if (why == NULL && (sc->nhazard > 0 || sc->npoison > 0)) {
        snprintf(field, sizeof(field), sc->nhazard > 0 ? "hazard" : "poison_events");
        why = "names our pipeline's settings or events";
    }
    if (why == NULL && sc->broker_control != NULL) {
        snprintf(field, sizeof(field), "broker");
        why = "fake-broker settings; a target runs on RabbitMQ";
    }
    if (why == NULL)
        return 0;
    snprintf(err, errlen, "%s: %s: cannot run against target %s: %s", sc->path, field,
             t->name, why);
    return -1;
}

/* argv0 as a path: itself when it names one, else the first executable of
 * that name on PATH.  0, or -1 when there is none. */
static int find_on_path(const char *argv0, char *out, size_t outlen)
{
    if (strchr(argv0, '/') != NULL) {
        cw_fmt(out, outlen, "%s", argv0);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path != '\0') {
        size_t n = strcspn(path, ":");
        if (n > 0) {
            cw_fmt(out, outlen, "%.*s/%s", (int)n, path, argv0);
            if (access(out, X_OK) == 0)
                return 0;
        }
        path += n + (path[n] == ':');
    }
    return -1;
}

int runner_target_resolve(const char *argv0, char *out, size_t outlen)
{
    return find_on_path(argv0, out, outlen);
}

/* ${bin:PROGRAM} for each program of the build under test: the path
 * find_binaries picked for it (from --bin, else the fallback tree), as a
 * white-box run of the same build would start it. */
static void bin_vars(const struct runner *r, struct tg_vars *v)
{
    static const char *const names[] = { TG_BIN_PREFIX "payments-api",
                                          TG_BIN_PREFIX "outbox-relay",
                                          TG_BIN_PREFIX "accounting-consumer",
                                          TG_BIN_PREFIX "outboxctl" };
    const char *const paths[] = { r->exe_api, r->exe_relay, r->exe_consumer,
                                  r->exe_outboxctl };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tg_vars_set(v, names[i], paths[i]);
}

int runner_target_requirement(const struct runner *r, char *why, size_t whylen)
{
    const struct target *t = r->target;
    for (int i = 0; i < t->nrequires; i++) {
        char exe[PATH_MAX], out[512], rel[PATH_MAX * 2];
        const char *const *argv = t->require_argv[i];
        /* Only the profile's own folder and the build's programs are known
         * before anything starts. */
        struct tg_vars v = { 0 };
        tg_vars_set(&v, "target_dir", t->dir);
        bin_vars(r, &v);
        static char words[TG_MAX_ARGV][PATH_MAX];
        char *args[TG_MAX_ARGV + 1];
        for (int k = 0; k < t->require_argc[i]; k++) {
            if (target_expand(argv[k], &v, words[k], sizeof(words[k]), out, sizeof(out)) < 0) {
                snprintf(why, whylen, "%s: %s", t->require_why[i], out);
                return 1;
            }
            args[k] = words[k];
        }
        const char *want = words[0];
        if (strchr(want, '/') != NULL && want[0] != '/') {
            cw_fmt(rel, sizeof(rel), "%s/%s", t->dir, want);
            want = rel; /* relative to the profile's folder, like its processes */
        }
        if (find_on_path(want, exe, sizeof(exe)) < 0) {
            snprintf(why, whylen, "%s: '%s' not found", t->require_why[i], words[0]);
            return 1;
        }
        args[0] = exe;
        args[t->require_argc[i]] = NULL;
        int rc = proc_run_capture_in(t->dir, args, NULL, 30000, out, sizeof(out));
        if (rc != 0) {
            out[strcspn(out, "\n")] = '\0';
            snprintf(why, whylen, "%s: '%s' %s %d: %s", t->require_why[i], argv[0],
                     rc < 0 ? "could not run" : "exited with", rc, out);
            return 1;
        }
    }
    return 0;
}

/* ---- the scenario's database: set-up and mapping -------------------------- */

/* The placeholders every process template of instance idx may name (idx -1:
 * the set-up, which reaches the database directly).  Texts go into buf. */
struct tvars {
    struct tg_vars v;
    char conninfo[1024], url[1200], host[PATH_MAX], port[16], user[64], db[64];
    char amqp[PATH_MAX + 600], http_port[16], consumer[64];
};

static void fill_vars(struct sctx *s, int idx, struct tvars *tv)
{
    const struct target *t = s->run->target;
    memset(tv, 0, sizeof(*tv));
    const char *ci = s->db.conninfo;
    if (idx >= 0) {
        const char *env = runner_db_env(s, idx);
        ci = strncmp(env, "CW_DB=", 6) == 0 ? env + 6 : env;
    }
    cw_fmt(tv->conninfo, sizeof(tv->conninfo), "%s", ci ? ci : "");
    conninfo_get(tv->conninfo, "host", tv->host, sizeof(tv->host));
    conninfo_get(tv->conninfo, "port", tv->port, sizeof(tv->port));
    conninfo_get(tv->conninfo, "user", tv->user, sizeof(tv->user));
    conninfo_get(tv->conninfo, "dbname", tv->db, sizeof(tv->db));
    if (tv->host[0] == '/')
        cw_fmt(tv->url, sizeof(tv->url), "postgresql://%s@/%s?host=%s&port=%s", tv->user,
               tv->db, tv->host, tv->port);
    else
        cw_fmt(tv->url, sizeof(tv->url), "postgresql://%s@%s:%s/%s", tv->user, tv->host,
               tv->port, tv->db);
    /* The processes' broker URL without our programs' ?exchange=. */
    cw_fmt(tv->amqp, sizeof(tv->amqp), "%s", idx >= 0 ? runner_broker_addr(s, idx)
                                                       : s->run->rabbit_url);
    tv->amqp[strcspn(tv->amqp, "?")] = '\0';
    const char *names[] = { "pg_conninfo", "pg_url", "pg_host", "pg_port", "pg_user", "pg_db",
                            "amqp_url", "target_dir", "run_dir" };
    const char *values[] = { tv->conninfo, tv->url, tv->host, tv->port, tv->user, tv->db,
                             tv->amqp, t->dir, s->dir };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        tg_vars_set(&tv->v, names[i], values[i]);
    bin_vars(s->run, &tv->v);
    if (idx < 0)
        return;
    const struct sc_proc *sp = &s->sc->procs[idx];
    snprintf(tv->http_port, sizeof(tv->http_port), "%d", s->port[idx]);
    snprintf(tv->consumer, sizeof(tv->consumer), "%s",
             sp->group ? sp->group : sp->consumer_name ? sp->consumer_name : "");
    tg_vars_set(&tv->v, "http_port", tv->http_port);
    tg_vars_set(&tv->v, "instance", s->procs[idx].name);
    tg_vars_set(&tv->v, "role", tg_role_name(role_of(sp->kind)));
    tg_vars_set(&tv->v, "consumer", tv->consumer);
}

/* argv templates expanded into words (each PATH_MAX bytes in buf), argv[0]
 * resolved (on PATH, or against cwd when relative).  0 or -1 with err. */
static int expand_argv(const char *const *tmpl, const struct tg_vars *v, const char *cwd,
                       char (*buf)[PATH_MAX], char **argv, char *err, size_t errlen)
{
    int n = 0;
    for (; tmpl[n] != NULL; n++) {
        if (target_expand(tmpl[n], v, buf[n], PATH_MAX, err, errlen) < 0)
            return -1;
        argv[n] = buf[n];
    }
    argv[n] = NULL;
    char exe[PATH_MAX], rel[PATH_MAX * 2];
    const char *want = argv[0];
    if (strchr(want, '/') != NULL && want[0] != '/') {
        cw_fmt(rel, sizeof(rel), "%s/%s", cwd, want);
        want = rel;
    }
    if (find_on_path(want, exe, sizeof(exe)) < 0) {
        snprintf(err, errlen, "'%s' is not an executable (nor on PATH)", argv[0]);
        return -1;
    }
    cw_fmt(buf[0], PATH_MAX, "%s", exe);
    return 0;
}

/* An environment of n templates ("NAME=value" texts into buf) into env,
 * with room for one more variable and the NULL.  Returns the count, or -1
 * with err naming the variable. */
static int expand_env(const char *const *names, const char *const *values, int n,
                      const struct tg_vars *v, char (*buf)[1400], const char **env,
                      char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        char value[1300], why[256];
        if (target_expand(values[i], v, value, sizeof(value), why, sizeof(why)) < 0) {
            snprintf(err, errlen, "env.%s: %s", names[i], why);
            return -1;
        }
        cw_fmt(buf[i], sizeof(buf[i]), "%s=%s", names[i], value);
        env[i] = buf[i];
    }
    env[n] = NULL;
    return n;
}

/* A SQL file of the profile, run whole on the runner's connection. */
static int run_sql_file(struct sctx *s, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX * 2];
    cw_fmt(path, sizeof(path), "%s/%s", s->run->target->dir, name);
    size_t len;
    enum cw_slurp_error why;
    char *text = cw_slurp(path, 4 << 20, &len, &why);
    if (text == NULL) {
        snprintf(err, errlen, "cannot read %.900s", path);
        return -1;
    }
    PGresult *r = PQexec(s->db.conn, text);
    free(text);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok)
        snprintf(err, errlen, "%s", PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : -1;
}

/* Each mapping query as the view cw_target_<table> with the canonical
 * columns and types: a query that fails, or lacks a column, is named. */
static int make_views(struct sctx *s)
{
    const struct target *t = s->run->target;
    static const char *const types[TG_MAP_COUNT][5] = {
        { "text", "text" },
        { "text", "text", "bigint", "text" },
        { "text", "text" },
        { "text", "text", "text", "bigint", "bigint" },
    };
    for (int m = 0; m < TG_MAP_COUNT; m++) {
        if (t->mapping[m] == NULL)
            continue;
        char cols[512] = "";
        const char *const *c = tg_map_columns((enum tg_map)m);
        for (int k = 0; c[k] != NULL; k++)
            snprintf(cols + strlen(cols), sizeof(cols) - strlen(cols), "%sm.%s::%s AS %s",
                     k ? ", " : "", c[k], types[m][k], c[k]);
        size_t len = strlen(t->mapping[m]) + strlen(cols) + 128;
        char *sql = malloc(len);
        if (sql == NULL)
            return runner_fail(s, "mapping: out of memory");
        snprintf(sql, len, "CREATE VIEW cw_target_%s AS SELECT %s FROM (%s) AS m",
                 tg_map_name((enum tg_map)m), cols, t->mapping[m]);
        PGresult *r = PQexec(s->db.conn, sql);
        free(sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(r));
            msg[strcspn(msg, "\n")] = '\0';
            PQclear(r);
            return runner_fail(s, "%s: mapping.%s (it must yield %s): %s", t->path,
                               tg_map_name((enum tg_map)m), cols, msg);
        }
        PQclear(r);
    }
    return 0;
}

int runner_target_open_db(struct sctx *s)
{
    const struct target *t = s->run->target;
    char err[1024];
    s->db.conninfo = rdb_create_db_from(&s->run->db, s->label, "template0", s->db.name, err,
                                        sizeof(err));
    if (s->db.conninfo == NULL)
        return runner_fail(s, "database: %s", err);
    s->db.env = conninfo_env(s->db.conninfo);
    if (s->db.env == NULL || runner_connect(s, err, sizeof(err)) < 0)
        return runner_fail(s, "database: %s", s->db.env ? err : "out of memory");
    struct tvars tv;
    fill_vars(s, -1, &tv);
    for (int i = 0; i < t->nsetup; i++) {
        const struct tg_setup *st = &t->setup[i];
        if (st->sql_file != NULL) {
            if (run_sql_file(s, st->sql_file, err, sizeof(err)) < 0)
                return runner_fail(s, "set-up %d (%s): %s", i + 1, st->sql_file, err);
            continue;
        }
        char words[TG_MAX_ARGV + 1][PATH_MAX];
        char *argv[TG_MAX_ARGV + 1];
        if (expand_argv(st->argv, &tv.v, t->dir, words, argv, err, sizeof(err)) < 0)
            return runner_fail(s, "set-up %d: %s", i + 1, err);
        char envbuf[TG_MAX_ENV][1400];
        const char *env[TG_MAX_ENV + 1];
        if (expand_env(st->env_name, st->env_value, st->nenv, &tv.v, envbuf, env, err,
                       sizeof(err)) < 0)
            return runner_fail(s, "set-up %d: %s", i + 1, err);
        char out[2048];
        int rc = proc_run_capture_in(t->dir, argv, env, st->timeout_ms, out, sizeof(out));
        if (rc != 0)
            return runner_fail(s, "set-up %d (%s) %s %d: %.600s", i + 1, st->argv[0],
                               rc < 0 ? "failed" : "exited with", rc, out);
    }
    runner_rev_proc(s, "target_setup", "database", 0, "steps", NULL);
    return make_views(s);
}

/* ---- processes ------------------------------------------------------------ */

/* A free loopback TCP port (the instance's ${http_port}). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int tcp_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Does the log at path hold text after byte off? */
static int log_has(const char *path, long off, const char *text)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    fseek(f, off, SEEK_SET);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

/* One look at a process's readiness: 1 ready, 0 not yet. */
static int ready_now(struct sctx *s, int idx, const struct tg_process *tp, const char *text,
                     long off)
{
    switch (tp->ready) {
    case TG_READY_LOG_LINE:
        return log_has(s->procs[idx].log_path, off, text);
    case TG_READY_TCP_PORT:
        return tcp_open(atoi(text));
    case TG_READY_HTTP_GET: {
        struct http_resp r;
        http_request(s->port[idx], "GET", text, NULL, NULL, 1000, &r);
        int ok = r.status >= 200 && r.status < 300;
        http_resp_free(&r);
        return ok;
    }
    case TG_READY_SQL: {
        char err[256], sql[4200];
        snprintf(sql, sizeof(sql), "SELECT CASE WHEN (%s) THEN 1 ELSE 0 END", text);
        return runner_sql_value(s, sql, 0, NULL, err, sizeof(err)) == 1;
    }
    }
    return 0;
}

int runner_target_start_proc(struct sctx *s, int idx)
{
    const struct target *t = s->run->target;
    const struct sc_proc *sp = &s->sc->procs[idx];
    struct proc *p = &s->procs[idx];
    const struct tg_process *tp = &t->proc[role_of(sp->kind)];
    if (proc_poll(p))
        return runner_fail(s, "%s is already running (pid %d)", p->name, (int)p->pid);
    if (p->starts > 0 && !tp->restart)
        return runner_fail(s, "%s may not be restarted (the profile's %s says \"restart\": "
                           "false)", p->name, tg_role_name(role_of(sp->kind)));
    if (s->port[idx] <= 0)
        s->port[idx] = free_port();
    struct tvars tv;
    fill_vars(s, idx, &tv);
    char err[512];
    p->cwd[0] = '\0';
    if (tp->cwd != NULL) {
        char dir[PATH_MAX];
        if (target_expand(tp->cwd, &tv.v, dir, sizeof(dir), err, sizeof(err)) < 0)
            return runner_fail(s, "%s: cwd: %s", p->name, err);
        cw_fmt(p->cwd, sizeof(p->cwd), "%s%s%s", dir[0] == '/' ? "" : t->dir,
               dir[0] == '/' ? "" : "/", dir);
    } else {
        cw_fmt(p->cwd, sizeof(p->cwd), "%s", t->dir);
    }
    static char words[SC_MAX_PROCS][TG_MAX_ARGV + 1][PATH_MAX];
    char *argv[TG_MAX_ARGV + 1];
    if (expand_argv(tp->argv, &tv.v, p->cwd, words[idx], argv, err, sizeof(err)) < 0)
        return runner_fail(s, "%s: argv: %s", p->name, err);
    char envbuf[TG_MAX_ENV + 1][1400];
    const char *env[TG_MAX_ENV + 2];
    int ne = expand_env(tp->env_name, tp->env_value, tp->nenv, &tv.v, envbuf, env, err,
                        sizeof(err));
    if (ne < 0)
        return runner_fail(s, "%s: %s", p->name, err);
    /* libpq and node-postgres read it: "db terminate" aims at the instance. */
    cw_fmt(envbuf[ne], sizeof(envbuf[ne]), "PGAPPNAME=%s", p->name);
    env[ne] = envbuf[ne];
    ne++;
    env[ne] = NULL;
    int restart = p->starts > 0;
    long off = runner_file_size(p->log_path);
    if (proc_spawn(p, argv, NULL, env, err, sizeof(err)) < 0)
        return runner_fail(s, "%s", err);
    if (restart)
        s->count.restarts++;
    /* A wire window on its links kills or pauses this incarnation. */
    if (runner_net_proc_started(s, idx) < 0)
        return -1;
    cJSON *ev = runner_rev_begin(s, restart ? "restart" : "start");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "kind", sc_kind_name(sp->kind));
    cJSON_AddStringToObject(ev, "role", tg_role_name(role_of(sp->kind)));
    runner_rev_emit(s, ev);
    char text[1024];
    if (tp->ready == TG_READY_SQL)
        cw_fmt(text, sizeof(text), "%s", tp->ready_text);
    else if (target_expand(tp->ready_text, &tv.v, text, sizeof(text), err, sizeof(err)) < 0)
        return runner_fail(s, "%s: ready: %s", p->name, err);
    int64_t deadline = cw_mono_ms() + tp->ready_timeout_ms;
    for (;;) {
        if (ready_now(s, idx, tp, text, off))
            return 0;
        if (!proc_poll(p)) {
            char how[64], tail[400];
            proc_exit_text(p, how, sizeof(how));
            runner_log_first(p, off, tail, sizeof(tail));
            return runner_fail(s, "%s exited while starting (%s): %s", p->name, how,
                               tail[0] ? tail : "(no output)");
        }
        if (cw_mono_ms() >= deadline || runner_interrupted()) {
            char tail[400];
            runner_log_tail(p, tail, sizeof(tail));
            return runner_fail(s, "%s was not ready within %d ms (ready when %s '%s'); its "
                               "last log line: %s", p->name, tp->ready_timeout_ms,
                               tp->ready == TG_READY_LOG_LINE ? "it prints"
                               : tp->ready == TG_READY_TCP_PORT ? "it listens on"
                               : tp->ready == TG_READY_HTTP_GET ? "it answers GET"
                               : "this is true:", text, tail[0] ? tail : "(no output)");
        }
        nap(50);
    }
}

/* ---- what the mapping shows ----------------------------------------------- */

long long runner_target_count(struct sctx *s, enum sc_until until, const char *group,
                              char *err, size_t errlen)
{
    const char *p[1] = { group };
    switch (until) {
    case U_PUBLISHED:
        return runner_sql_value(s, "SELECT count(*) FROM cw_target_outbox"
                                " WHERE state = 'published'", 0, NULL, err, errlen);
    case U_CONSUMED:
        return runner_sql_value(s, "SELECT count(DISTINCT message_id) FROM cw_target_effects"
                                " WHERE consumer = $1", 1, p, err, errlen);
    default:
        snprintf(err, errlen, "not a wait a target can take");
        return -1;
    }
}

int runner_target_drained(struct sctx *s, char *why, size_t whylen)
{
    char err[256];
    long long pending = runner_sql_value(s, "SELECT count(*) FROM cw_target_outbox"
                                         " WHERE state = 'pending'", 0, NULL, err, sizeof(err));
    if (pending == 0)
        return 1;
    if (pending < 0)
        snprintf(why, whylen, "database: %s", err);
    else
        snprintf(why, whylen, "%lld outbox messages still pending", pending);
    return 0;
}

int runner_target_stalled(struct sctx *s, struct progress_watch *w)
{
    const struct target *t = s->run->target;
    if (t == NULL || t->progress_timeout_ms <= 0)
        return 0;
    int64_t now = cw_mono_ms();
    if (w->mark == -2)
        w->since = now;
    if (now < w->next_ms)
        return now - w->since >= t->progress_timeout_ms;
    w->next_ms = now + 500;
    /* One number that changes with the outbox's messages by state, the
     * effects, and the inbox when it is mapped. */
    char sql[1024], err[256];
    cw_fmt(sql, sizeof(sql),
           "SELECT hashtext(coalesce((SELECT string_agg(state || '=' || n, ',' ORDER BY state)"
           "   FROM (SELECT state, count(*)::text AS n FROM cw_target_outbox GROUP BY state)"
           "   AS b), '') || '|' || (SELECT count(*) FROM cw_target_effects)::text%s)::bigint"
           " + 2147483648",
           t->mapping[TG_MAP_INBOX] != NULL
               ? " || '|' || (SELECT count(*) FROM cw_target_inbox)::text" : "");
    long long mark = runner_sql_value(s, sql, 0, NULL, err, sizeof(err));
    if (mark < 0 || mark != w->mark) {
        w->mark = mark < 0 ? -2 : mark;
        w->since = now;
        return 0;
    }
    return now - w->since >= t->progress_timeout_ms;
}

long long runner_target_unconsumed(struct sctx *s, const char *group, char *err,
                                   size_t errlen)
{
    const char *p[1] = { group };
    return runner_sql_value(s,
        "SELECT count(*) FROM cw_target_outbox o WHERE o.state = 'published'"
        "   AND NOT EXISTS (SELECT 1 FROM cw_target_effects e"
        "                   WHERE e.consumer = $1 AND e.message_id = o.id)",
        1, p, err, errlen);
}

/* ---- the check -------------------------------------------------------------- */

/* A count expectation that failed only by the messages a reproduced
 * finding explains: the effects short, or the losses over, by exactly the
 * messages nothing_lost's finding names, or the recovered short by exactly
 * those of them whose client saw an error (a message lost is not counted
 * recovered).  Held to that bound, the expectation is the finding
 * reproduced, not a failure of its own; any other shortfall still fails.
 * detail gets the reason. */
static int explained_by_finding(const struct chk_input *in, const struct chk_result *res,
                                const struct sc_expect *x, char *detail, size_t detaillen)
{
    if (!checker_inv_finding(res, INV_NOTHING_LOST))
        return 0;
    long n;
    int sign;
    if (strcmp(x->check, "effects") == 0)
        sign = -1, n = res->inv[INV_NOTHING_LOST].explained;
    else if (strcmp(x->check, "lost") == 0)
        sign = 1, n = res->inv[INV_NOTHING_LOST].explained;
    else if (strcmp(x->check, "recovered") == 0)
        sign = -1, n = res->lost_recoverable;
    else
        return 0;
    if (n == 0)
        return 0;
    struct sc_expect shifted = *x;
    shifted.min += sign * n;
    shifted.max += sign * n;
    shifted.equals += sign * n;
    char why[400];
    if (!checker_expect(in, res, &shifted, why, sizeof(why)))
        return 0;
    char was[320];
    snprintf(was, sizeof(was), "%.300s", detail);
    snprintf(detail, detaillen, "%s: the %ld messages of nothing_lost's known finding", was, n);
    return 1;
}

void runner_target_check(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    const struct target *t = s->run->target;
    char err[512];
    cJSON *broker = evlog_read_strict(s->broker.events_path, NULL, NULL, err, sizeof(err));
    if (broker == NULL) {
        runner_fail(s, "check: the broker log: %s", err);
        return;
    }
    struct chk_input in;
    memset(&in, 0, sizeof(in));
    in.sc = sc;
    in.conn = s->db.conn;
    in.broker_events = broker;
    in.http = s->http.recs;
    in.nhttp = s->http.n;
    /* Several findings of one invariant: their texts, one a line. */
    static char texts[INV_COUNT][TG_MAX_FINDINGS * 160];
    for (int i = 0; i < t->nfindings; i++) {
        int inv = sc_invariant_from_name(t->findings[i].invariant);
        if (inv < 0 || strcmp(t->findings[i].scenario, sc->name) != 0)
            continue;
        char *buf = texts[inv];
        if (in.explains[inv] == NULL)
            buf[0] = '\0';
        snprintf(buf + strlen(buf), sizeof(texts[inv]) - strlen(buf), "%s%s",
                 buf[0] ? "\n" : "", t->findings[i].witness);
        in.explains[inv] = buf;
    }
    if (checker_run_target(&in, t->mapping[TG_MAP_ACKNOWLEDGED] != NULL, &oc->res) < 0 &&
        s->error[0] == '\0')
        runner_fail(s, "check: %s", oc->res.error[0] ? oc->res.error
                                                     : "the mapping's views could not be read");
    for (int i = 0; i < sc->nexpect; i++) {
        char detail[512];
        int ok = checker_expect(&in, &oc->res, &sc->expect[i], detail, sizeof(detail));
        if (!ok && explained_by_finding(&in, &oc->res, &sc->expect[i], detail, sizeof(detail)))
            runner_add_expect_verdict(s, sc->expect[i].check, "finding reproduced", detail);
        else
            runner_add_expect(s, sc->expect[i].check, ok, detail);
    }
    oc->broker_events = broker;
    oc->checked = 1;
}

/* ---- fitting a generated scenario to a target ---------------------------- */

/* Deletes the steps that name process name (as their process or as the
 * client end of their link).  Returns how many went. */
static int drop_steps_of(cJSON *steps, const char *name)
{
    int n = 0;
    size_t len = strlen(name);
    for (int i = cJSON_GetArraySize(steps) - 1; i >= 0; i--) {
        const cJSON *st = cJSON_GetArrayItem(steps, i);
        const char *proc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "proc"));
        const char *link = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "link"));
        if ((proc != NULL && strcmp(proc, name) == 0) ||
            (link != NULL && strncmp(link, name, len) == 0 && strncmp(link + len, "->", 2) == 0)) {
            cJSON_DeleteItemFromArray(steps, i);
            n++;
        }
    }
    return n;
}

/* Why a step of a generated scenario cannot be taken from outside (the
 * same rules as step_refused, on the JSON), or NULL. */
static const char *json_step_refused(const struct target *t, cJSON *st)
{
    const char *verb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "do"));
    if (verb == NULL)
        return "no verb";
    static const char *const never[] = { "fault", "http", "sql", "outboxctl", NULL };
    if (jv_in_list(verb, never))
        return verb;
    if (strcmp(verb, "wait") == 0) {
        static const char *const waits[] = { "exited", "published", "consumed", "quiet", NULL };
        const char *until = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "until"));
        return until != NULL && jv_in_list(until, waits) ? NULL : "wait";
    }
    if (strcmp(verb, "db") == 0) {
        const char *a = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "action"));
        static const char *const ours[] = { "failover", "stall_replication", "lock", "deadlock",
                                            "refuse", "sever", NULL };
        return a != NULL && jv_in_list(a, ours) ? "db" : NULL;
    }
    if (strcmp(verb, "broker") == 0)
        return runner_rabbit_can_control(cJSON_GetObjectItemCaseSensitive(st, "control"))
                   ? NULL : "broker";
    if (strcmp(verb, "net") == 0) {
        const char *link = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "link"));
        const char *fault = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "fault"));
        size_t n = link ? strlen(link) : 0;
        if (n > 8 && strcmp(link + n - 8, "->broker") == 0 && fault != NULL &&
            strcmp(fault, "cut") == 0)
            return "net";
    }
    if (strcmp(verb, "payments") == 0 && !t->follow_up.defined) {
        cJSON_DeleteItemFromObjectCaseSensitive(st, "authorize");
        cJSON_DeleteItemFromObjectCaseSensitive(st, "capture");
    }
    if (strcmp(verb, "start") == 0 || strcmp(verb, "restart") == 0)
        cJSON_DeleteItemFromObjectCaseSensitive(st, "faults");
    return NULL;
}

int runner_target_fit(const struct target *t, cJSON *sc, char *err, size_t errlen)
{
    int left = 0;
    static const char *const whole[] = { "hazard", "hazard_why", "poison_events", "broker",
                                         "database" };
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
        if (cJSON_HasObjectItem(sc, whole[i])) {
            cJSON_DeleteItemFromObjectCaseSensitive(sc, whole[i]);
            left++;
        }
    }
    cJSON *steps = cJSON_GetObjectItemCaseSensitive(sc, "steps");
    cJSON *procs = cJSON_GetObjectItemCaseSensitive(sc, "processes");
    int consumers = 0;
    cJSON *p = procs != NULL ? procs->child : NULL;
    while (p != NULL) {
        cJSON *next = p->next;
        static const char *const inside[] = { "args", "faults", "clock", "db_deadline_ms" };
        for (size_t i = 0; i < sizeof(inside) / sizeof(inside[0]); i++)
            if (cJSON_HasObjectItem(p, inside[i])) {
                cJSON_DeleteItemFromObjectCaseSensitive(p, inside[i]);
                left++;
            }
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(p, "kind"));
        int role = kind == NULL ? -1 : strcmp(kind, "api") == 0 ? TG_PRODUCER
                 : strcmp(kind, "relay") == 0 ? TG_RELAY : TG_CONSUMER;
        /* Without its flags a consumer is group "accounting": one of them,
         * and only when the profile has that queue. */
        int keep = role >= 0 && t->proc[role].defined;
        if (keep && role == TG_CONSUMER) {
            int queue = 0;
            for (int q = 0; q < t->nqueues; q++)
                queue |= strcmp(t->queue_group[q], "accounting") == 0;
            keep = queue && consumers++ == 0;
        }
        if (!keep) {
            left += 1 + drop_steps_of(steps, p->string);
            cJSON_DeleteItemFromObjectCaseSensitive(procs, p->string);
        }
        p = next;
    }
    for (int i = cJSON_GetArraySize(steps) - 1; i >= 0; i--) {
        if (json_step_refused(t, cJSON_GetArrayItem(steps, i)) != NULL) {
            cJSON_DeleteItemFromArray(steps, i);
            left++;
        }
    }
    /* A wait on a consumer that went waits on the one that stayed. */
    cJSON *st;
    cJSON_ArrayForEach(st, steps) {
        cJSON *c = cJSON_GetObjectItemCaseSensitive(st, "consumer");
        if (cJSON_IsString(c) && strcmp(c->valuestring, "accounting") != 0)
            cJSON_SetValuestring(c, "accounting");
    }
    cJSON *inv = cJSON_GetObjectItemCaseSensitive(sc, "invariants");
    for (int i = cJSON_GetArraySize(inv) - 1; i >= 0; i--) {
        const char *name = cJSON_GetStringValue(cJSON_GetArrayItem(inv, i));
        int k = name ? sc_invariant_from_name(name) : -1;
        if (k < 0 || !checker_target_judges(k)) {
            cJSON_DeleteItemFromArray(inv, i);
            left++;
        }
    }
    if (inv != NULL && cJSON_GetArraySize(inv) == 0) {
        cJSON_AddItemToArray(inv, cJSON_CreateString("nothing_lost"));
        cJSON_AddItemToArray(inv, cJSON_CreateString("effect_once"));
    }
    cJSON *ex = cJSON_GetObjectItemCaseSensitive(sc, "expect");
    for (int i = cJSON_GetArraySize(ex) - 1; i >= 0; i--) {
        const char *check = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ex, i), "check"));
        if (check == NULL || !jv_in_list(check, target_expects)) {
            cJSON_DeleteItemFromArray(ex, i);
            left++;
        }
    }
    /* What is left must be a scenario the target can run. */
    char *text = cJSON_PrintUnformatted(sc);
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(sc, "name"));
    struct scenario *parsed = text ? scenario_parse(text, name ? name : "generated", NULL, err,
                                                    errlen) : NULL;
    cJSON_free(text);
    if (parsed == NULL)
        return -1;
    int rc = runner_target_refuses(t, parsed, err, errlen) < 0 ? -1 : left;
    scenario_free(parsed);
    return rc;
}
