/* runner_db.h -- the PostgreSQL side of a run: cluster, template, databases.
 *
 * Without --pg the runner starts one throwaway cluster per run with
 * scripts/pg-cluster (initdb as the postgres account, Unix socket, free
 * port, fsync on) and stops it at the end unless --keep.  Either way it
 * migrates one template database once (`outboxctl migrate`) and gives each
 * scenario a fresh clone (CREATE DATABASE ... TEMPLATE), which is far
 * quicker than migrating every time and starts every scenario from the same
 * bytes. */
#ifndef CW_RUNNER_DB_H
#define CW_RUNNER_DB_H

#include <limits.h>
#include <stddef.h>

struct rdb {
    char *admin;                  /* conninfo of the maintenance database */
    char cluster_dir[PATH_MAX];   /* "" unless we started the cluster */
    char template_db[64];         /* "" until rdb_make_template */
    char server_version[32];
    int created;                  /* databases created (for unique names) */
};

/* Starts a throwaway cluster with script (scripts/pg-cluster).  0, or -1
 * with a message in err. */
int rdb_start_cluster(struct rdb *db, const char *script, char *err, size_t errlen);

/* Uses an existing server (--pg CONNINFO): checks that it answers. */
int rdb_use(struct rdb *db, const char *conninfo, char *err, size_t errlen);

/* Creates the template database and migrates it with the outboxctl binary. */
int rdb_make_template(struct rdb *db, const char *outboxctl, const char *tag,
                      char *err, size_t errlen);

/* Creates a fresh database cloned from the template, named after hint
 * (sanitized).  Returns its conninfo (caller frees) and its name in
 * name_out[64], or NULL with a message. */
char *rdb_create_db(struct rdb *db, const char *hint, char *name_out,
                    char *err, size_t errlen);
/* The same cloned from template_db ("template0": an empty database, for a
 * target that creates its own tables). */
char *rdb_create_db_from(struct rdb *db, const char *hint, const char *template_db,
                         char *name_out, char *err, size_t errlen);

/* Drops a database (WITH FORCE): 0 or -1. */
int rdb_drop_db(struct rdb *db, const char *name, char *err, size_t errlen);

/* Runs `script VERB DIR [ARG]` (scripts/pg-cluster's fault and standby
 * verbs: crash, up, restart, standby, sync, promote, stop) within
 * timeout_ms; its first output line, if any, goes to out.  0, or -1 with the
 * script's message in err. */
int rdb_cluster_cmd(const char *script, const char *verb, const char *dir, const char *arg,
                    int timeout_ms, char *out, size_t outlen, char *err, size_t errlen);

/* A libpq notice processor that drops every notice: the runner's own
 * connections hear of the faults it causes ("terminating connection due
 * to immediate shutdown") and need not repeat them on the terminal. */
void rdb_quiet_notices(void *arg, const char *message);

/* Drops the template; stops and removes the cluster we started unless keep.
 * Frees what db holds. */
void rdb_finish(struct rdb *db, const char *script, int keep);

/* conninfo with its dbname replaced (caller frees), or NULL when conninfo
 * does not parse. */
char *conninfo_with_db(const char *conninfo, const char *dbname);

/* conninfo fit to print: the same connection without its password (caller
 * frees); *hidden (may be NULL) is set when a password was left out.  NULL
 * when conninfo does not parse. */
char *conninfo_for_display(const char *conninfo, int *hidden);

/* "CW_DB=<conninfo>" for a child's environment (caller frees), or NULL on
 * out of memory.  Every daemon and outboxctl read CW_DB when --db is not
 * given; the runner never puts a connection string on a command line,
 * which any user can read in ps or /proc. */
char *conninfo_env(const char *conninfo);

/* The value of one keyword of conninfo ("host", "port"...) into out, or "". */
void conninfo_get(const char *conninfo, const char *keyword, char *out, size_t outlen);

#endif
