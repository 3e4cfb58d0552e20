/* runner_db.c -- throwaway cluster, template and per-scenario databases;
 * see runner_db.h.
 *
 * CREATE/DROP DATABASE take an identifier, which cannot be a bind
 * parameter; the names are generated here from [a-z0-9_] only and quoted
 * with PQescapeIdentifier on top, and the statements go through pgx_exec
 * with zero parameters like every other statement. */
#include "runner_db.h"
#include "claim_history.h"
#include "pgx.h"
#include "procs.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void rdb_quiet_notices(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

enum admin_op { OP_CREATE, OP_CREATE_FROM, OP_DROP };

/* A logical replication slot belongs to its database, and DROP DATABASE
 * refuses while one exists (a target's logical-replication listener makes
 * them; each holds WAL, and the server has only max_replication_slots).
 * So the database's slots go first: a walsender still holding one is
 * terminated, and a slot its dying walsender has not let go of yet is
 * tried again, for two seconds at most.  0, or -1 with err. */
static int drop_slots_of(PGconn *c, const char *dbname, char *err, size_t errlen)
{
    const char *p[1] = { dbname };
    char msg[256] = "";
    for (int tries = 0; tries < 40; tries++) {
        pgx_cmd(c, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
                   " WHERE database = $1 AND active_pid IS NOT NULL", 1, p, NULL, NULL, 0);
        pgx_cmd(c, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                   " WHERE database = $1 AND NOT active", 1, p, NULL, msg, sizeof(msg));
        PGresult *r = pgx_exec(c, "SELECT count(*) FROM pg_replication_slots WHERE database = $1",
                               1, p, NULL, msg, sizeof(msg));
        if (r == NULL)
            break;
        int left = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (left == 0)
            return 0;
        struct timespec nap = { 0, 50 * 1000000L };
        nanosleep(&nap, NULL);
    }
    snprintf(err, errlen, "the replication slots of database %s cannot be dropped: %s", dbname,
             msg[0] ? msg : "a walsender still holds one");
    return -1;
}

/* CREATE DATABASE a [TEMPLATE b] or DROP DATABASE IF EXISTS a WITH (FORCE). */
static int admin_cmd(struct rdb *db, enum admin_op op, const char *ident1, const char *ident2,
                     char *err, size_t errlen)
{
    char msg[256];
    int rc = -1;
    PGconn *c = pgx_connect(db->admin, msg, sizeof(msg));
    char *q1 = NULL, *q2 = NULL;
    char sql[512];
    if (c == NULL) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    /* "database ... does not exist, skipping" is expected: keep it quiet. */
    PQsetNoticeProcessor(c, rdb_quiet_notices, NULL);
    q1 = PQescapeIdentifier(c, ident1, strlen(ident1));
    if (ident2 != NULL)
        q2 = PQescapeIdentifier(c, ident2, strlen(ident2));
    if (q1 == NULL || (ident2 != NULL && q2 == NULL)) {
        snprintf(err, errlen, "cannot quote a database name");
        goto out;
    }
    switch (op) {
    case OP_CREATE:
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s", q1);
        break;
    case OP_CREATE_FROM:
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s TEMPLATE %s", q1, q2 ? q2 : "template1");
        break;
    case OP_DROP:
        if (drop_slots_of(c, ident1, err, errlen) < 0)
            goto out;
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", q1);
        break;
    }
    if (pgx_cmd(c, sql, 0, NULL, NULL, msg, sizeof(msg)) < 0) {
        snprintf(err, errlen, "%s: %s", sql, msg);
        goto out;
    }
    rc = 0;
out:
    PQfreemem(q1);
    PQfreemem(q2);
    PQfinish(c);
    return rc;
}

/* conninfo rebuilt as keyword='value' pairs: dbname replaced when dbname is
 * not NULL, password left out when hide_password (*hidden says whether
 * there was one).  NULL when conninfo does not parse or on out of memory. */
static char *conninfo_rebuild(const char *conninfo, const char *dbname, int hide_password,
                              int *hidden)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (hidden != NULL)
        *hidden = 0;
    if (opts == NULL) {
        PQfreemem(perr);
        return NULL;
    }
    size_t cap = strlen(conninfo) * 2 + (dbname ? strlen(dbname) * 2 : 0) + 64;
    char *out = malloc(cap);
    size_t n = 0;
    if (out == NULL) {
        PQconninfoFree(opts);
        return NULL;
    }
    out[0] = '\0';
    int have_db = 0;
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        const char *val = o->val;
        if (dbname != NULL && strcmp(o->keyword, "dbname") == 0)
            val = dbname;
        if (val == NULL)
            continue;
        if (hide_password && strcmp(o->keyword, "password") == 0) {
            if (hidden != NULL)
                *hidden = 1;
            continue;
        }
        have_db |= strcmp(o->keyword, "dbname") == 0;
        /* keyword='value' with ' and \ escaped, as libpq reads it back. */
        size_t need = strlen(o->keyword) + strlen(val) * 2 + 5;
        if (n + need >= cap) {
            cap = (n + need) * 2;
            char *nb = realloc(out, cap);
            if (nb == NULL) {
                free(out);
                PQconninfoFree(opts);
                return NULL;
            }
            out = nb;
        }
        n += (size_t)snprintf(out + n, cap - n, "%s%s='", n ? " " : "", o->keyword);
        for (const char *p = val; *p; p++) {
            if (*p == '\'' || *p == '\\')
                out[n++] = '\\';
            out[n++] = *p;
        }
        out[n++] = '\'';
        out[n] = '\0';
    }
    /* dbname absent from the options list cannot happen with libpq, but be sure. */
    if (dbname != NULL && !have_db) {
        size_t need = strlen(dbname) * 2 + 16;
        char *nb = realloc(out, n + need);
        if (nb == NULL) {
            free(out);
            PQconninfoFree(opts);
            return NULL;
        }
        out = nb;
        snprintf(out + n, need, " dbname='%s'", dbname);
    }
    PQconninfoFree(opts);
    return out;
}

char *conninfo_with_db(const char *conninfo, const char *dbname)
{
    return conninfo_rebuild(conninfo, dbname, 0, NULL);
}

char *conninfo_for_display(const char *conninfo, int *hidden)
{
    return conninfo_rebuild(conninfo, NULL, 1, hidden);
}

char *conninfo_env(const char *conninfo)
{
    size_t len = strlen(conninfo) + sizeof("CW_DB=");
    char *v = malloc(len);
    if (v != NULL)
        snprintf(v, len, "CW_DB=%s", conninfo);
    return v;
}

void conninfo_get(const char *conninfo, const char *keyword, char *out, size_t outlen)
{
    out[0] = '\0';
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (opts == NULL) {
        PQfreemem(perr);
        return;
    }
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
        if (strcmp(o->keyword, keyword) == 0 && o->val != NULL)
            snprintf(out, outlen, "%s", o->val);
    PQconninfoFree(opts);
}

static int fetch_version(struct rdb *db, char *err, size_t errlen)
{
    char msg[256];
    PGconn *c = pgx_connect(db->admin, msg, sizeof(msg));
    if (c == NULL) {
        snprintf(err, errlen, "%s", msg);
        return -1;
    }
    PGresult *r = pgx_exec(c, "SELECT current_setting('server_version')", 0, NULL, NULL,
                           msg, sizeof(msg));
    if (r == NULL) {
        snprintf(err, errlen, "%s", msg);
        PQfinish(c);
        return -1;
    }
    if (PQntuples(r) == 1)
        snprintf(db->server_version, sizeof(db->server_version), "%s", PQgetvalue(r, 0, 0));
    /* "15.20 (Debian 15.20-0+deb12u1)" -> "15.20" */
    char *sp = strchr(db->server_version, ' ');
    if (sp != NULL)
        *sp = '\0';
    PQclear(r);
    PQfinish(c);
    return 0;
}

int rdb_start_cluster(struct rdb *db, const char *script, char *err, size_t errlen)
{
    char out[2048];
    char *argv[] = { (char *)script, (char *)"start", NULL };
    int rc = proc_run_capture(argv, NULL, 120000, out, sizeof(out));
    if (rc != 0) {
        size_t n = strlen(out);
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
        snprintf(err, errlen, "could not start a throwaway PostgreSQL cluster with %s: %s",
                 script, out);
        return -1;
    }
    /* The connection string is the last line printed. */
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    char *line = strrchr(out, '\n');
    line = line ? line + 1 : out;
    conninfo_get(line, "host", db->cluster_dir, sizeof(db->cluster_dir));
    if (db->cluster_dir[0] == '\0') {
        snprintf(err, errlen, "pg-cluster printed no host= in '%s'", line);
        return -1;
    }
    db->admin = strdup(line);
    if (db->admin == NULL)
        return -1;
    return fetch_version(db, err, errlen);
}

int rdb_use(struct rdb *db, const char *conninfo, char *err, size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
    if (opts == NULL) {
        snprintf(err, errlen, "--pg: not a valid connection string: %s",
                 perr ? perr : "parse error");
        PQfreemem(perr);
        return -1;
    }
    PQconninfoFree(opts);
    db->admin = strdup(conninfo);
    if (db->admin == NULL)
        return -1;
    return fetch_version(db, err, errlen);
}

/* Keeps [a-z0-9_] of s, lowercased, at most max-1 chars. */
static void sanitize(const char *s, char *out, size_t max)
{
    size_t n = 0;
    for (; *s && n + 1 < max; s++) {
        char c = (char)tolower((unsigned char)*s);
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
            out[n++] = c;
        else if (c == '-')
            out[n++] = '_';
    }
    out[n] = '\0';
}

int rdb_make_template(struct rdb *db, const char *outboxctl, const char *tag,
                      char *err, size_t errlen)
{
    char t[24];
    sanitize(tag, t, sizeof(t));
    snprintf(db->template_db, sizeof(db->template_db), "cw_tpl_%s", t);
    if (admin_cmd(db, OP_DROP, db->template_db, NULL,
                  err, errlen) < 0 ||
        admin_cmd(db, OP_CREATE, db->template_db, NULL, err, errlen) < 0) {
        db->template_db[0] = '\0';
        return -1;
    }
    char *conn = conninfo_with_db(db->admin, db->template_db);
    if (conn == NULL) {
        snprintf(err, errlen, "cannot build the template's connection string");
        return -1;
    }
    char out[2048];
    char *env = conninfo_env(conn);
    free(conn);
    if (env == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *argv[] = { (char *)outboxctl, (char *)"migrate", NULL };
    const char *extra[] = { env, NULL };
    int rc = proc_run_capture(argv, extra, 60000, out, sizeof(out));
    free(env);
    if (rc != 0) {
        size_t n = strlen(out);
        while (n > 0 && out[n - 1] == '\n')
            out[--n] = '\0';
        snprintf(err, errlen, "outboxctl migrate failed (%d): %s", rc, out);
        return -1;
    }
    /* Every scenario database is cloned from the template: each gets the
     * claim history the checker reads. */
    conn = conninfo_with_db(db->admin, db->template_db);
    if (conn == NULL) {
        snprintf(err, errlen, "cannot build the template's connection string");
        return -1;
    }
    PGconn *c = pgx_connect(conn, err, errlen);
    free(conn);
    if (c == NULL)
        return -1;
    rc = claim_history_install(c, err, errlen);
    PQfinish(c);
    return rc;
}

char *rdb_create_db(struct rdb *db, const char *hint, char *name_out,
                    char *err, size_t errlen)
{
    return rdb_create_db_from(db, hint, db->template_db, name_out, err, errlen);
}

char *rdb_create_db_from(struct rdb *db, const char *hint, const char *template_db,
                         char *name_out, char *err, size_t errlen)
{
    char h[32];
    sanitize(hint, h, sizeof(h));
    db->created++;
    char name[128];
    snprintf(name, sizeof(name), "%.24s_%d_%s", db->template_db, db->created, h);
    name[63] = '\0';
    memcpy(name_out, name, 64);
    if (admin_cmd(db, OP_DROP, name_out, NULL, err, errlen) < 0 ||
        admin_cmd(db, OP_CREATE_FROM, name_out, template_db, err, errlen) < 0)
        return NULL;
    char *conn = conninfo_with_db(db->admin, name_out);
    if (conn == NULL)
        snprintf(err, errlen, "cannot build a connection string");
    return conn;
}

int rdb_drop_db(struct rdb *db, const char *name, char *err, size_t errlen)
{
    return admin_cmd(db, OP_DROP, name, NULL, err, errlen);
}

int rdb_cluster_cmd(const char *script, const char *verb, const char *dir, const char *arg,
                    int timeout_ms, char *out, size_t outlen, char *err, size_t errlen)
{
    char text[4096];
    char *argv[] = { (char *)script, (char *)verb, (char *)dir, (char *)arg, NULL };
    int rc = proc_run_capture(argv, NULL, timeout_ms, text, sizeof(text));
    text[strcspn(text, "\n")] = '\0';
    if (rc != 0) {
        snprintf(err, errlen, "pg-cluster %s %s: %s", verb, dir,
                 text[0] ? text : "failed without a message");
        return -1;
    }
    if (out != NULL)
        snprintf(out, outlen, "%s", text);
    return 0;
}

void rdb_finish(struct rdb *db, const char *script, int keep)
{
    char err[256];
    if (!keep && db->template_db[0] != '\0' && db->cluster_dir[0] == '\0')
        rdb_drop_db(db, db->template_db, err, sizeof(err));
    if (!keep && db->cluster_dir[0] != '\0' && script != NULL) {
        char out[1024];
        char *argv[] = { (char *)script, (char *)"stop", db->cluster_dir, NULL };
        proc_run_capture(argv, NULL, 120000, out, sizeof(out));
    }
    free(db->admin);
    db->admin = NULL;
}
