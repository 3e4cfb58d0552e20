/* target.h -- a target: an outbox pipeline crashwindow did not write,
 * described from outside by a profile (targets/NAME/profile.json).
 *
 * A profile says what the runner needs to drive and judge someone else's
 * system without reading its code: its processes by role (argv, working
 * directory, environment, how the runner knows each is ready, how it
 * stops, whether it may be restarted), the set-up run once per scenario
 * database, how one business operation is offered and acknowledged (the
 * workload), the broker's names, and the SQL that maps the target's own
 * tables onto what the checker judges (the mapping).  Like a scenario it
 * is data: strictly validated (an unknown field, role or placeholder is an
 * error naming the file and the field) and shown by --dry-run.
 *
 * Shape:
 *   {"target": "NAME", "title": "...",
 *    "requires": [{"command": ["node", "--version"], "why": "..."}],
 *    "database": {"settings": {"wal_level": "logical"}},
 *    "broker": {"exchange": "payments", "queues": {"accounting": "accounting"},
 *               "message_id": "property" | "body:FIELD"},
 *    "setup": [{"command": [...], "env": {...}, "timeout_ms": N} |
 *              {"sql_file": "setup.sql"}],
 *    "processes": {"producer": PROC, "relay": PROC, "consumer": PROC},
 *    "workload": {"create": OP, "follow_up": OP},
 *    "mapping": {"acknowledged": SQL, "outbox": SQL, "inbox": SQL, "effects": SQL},
 *    "findings": [{"scenario": NAME, "invariant": NAME, "witness": "TEXT",
 *                  "why": "...", "source": "FILE:LINE"}],
 *    "not_applicable": [{"scenario": NAME, "why": "..."}]}
 *   PROC = {"argv": [...], "cwd": "DIR", "env": {"NAME": "TEMPLATE"},
 *           "ready": {"log_line" | "tcp_port" | "http_get" | "sql": "...",
 *                     "timeout_ms": N},
 *           "stop_signal": "TERM" | "INT" | "KILL", "restart": true}
 *   OP = {"http": {"method": "POST", "path": "/payments",
 *                  "headers": {"Idempotency-Key": "${key}"}, "body": {...}},
 *         "ack": {"status": [200, 201]}, "aggregate_field": "id"}
 *
 * Templates (argv, cwd, env values, the workload's path, headers and body
 * strings) may name placeholders ${NAME}, filled per process instance or per
 * operation by the runner; target_placeholders() lists them.  A process's
 * templates (and requires' and setup's commands) may also name
 * ${bin:PROGRAM}, a program of the build under test (target_build_programs):
 * the path the runner picks for it as it picks our programs for a white-box
 * run -- from --bin DIR (or the harness's own build tree), else from the
 * fallback tree (`crashwindow mutants`: a mutant's tree holds only what it
 * rebuilt, the rest comes from the unmutated build).  So a profile of this
 * repository's pipeline runs whichever build the harness points it at. */
#ifndef CW_TARGET_H
#define CW_TARGET_H

#include <cjson/cJSON.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#define TG_MAX_ARGV 32
#define TG_MAX_ENV 32
#define TG_MAX_SETUP 8
#define TG_MAX_REQUIRES 4
#define TG_MAX_SETTINGS 16
#define TG_MAX_QUEUES 8
#define TG_MAX_HEADERS 8
#define TG_MAX_ACK 8
#define TG_READY_MAX_MS 120000
#define TG_MAX_FINDINGS 16
#define TG_MAX_NOT_APPLICABLE 16

/* The roles of a target's processes.  A scenario's kind "api" is the
 * producer role. */
enum tg_role { TG_PRODUCER = 0, TG_RELAY, TG_CONSUMER, TG_ROLE_COUNT };

enum tg_ready { TG_READY_LOG_LINE = 0, TG_READY_TCP_PORT, TG_READY_HTTP_GET, TG_READY_SQL };

/* Where a placeholder may appear: a process's templates, or a workload
 * operation's. */
enum tg_scope { TG_SCOPE_PROCESS = 0, TG_SCOPE_OPERATION };

/* The tables the mapping yields, and the columns each must have. */
enum tg_map { TG_MAP_ACKNOWLEDGED = 0, TG_MAP_OUTBOX, TG_MAP_INBOX, TG_MAP_EFFECTS,
              TG_MAP_COUNT };

/* Strings borrow from the profile's JSON tree. */
struct tg_process {
    int defined;
    int argc;
    const char *argv[TG_MAX_ARGV + 1];   /* NULL-terminated templates */
    const char *cwd;                     /* a template, relative to the profile's folder; NULL: it */
    int nenv;
    const char *env_name[TG_MAX_ENV];
    const char *env_value[TG_MAX_ENV];   /* templates */
    enum tg_ready ready;
    const char *ready_text;              /* the line, the port, the path or the query */
    int ready_timeout_ms;
    int stop_signal;                     /* SIGTERM, SIGINT or SIGKILL */
    int restart;                         /* may the runner start it again */
};

struct tg_setup {
    int argc;
    const char *argv[TG_MAX_ARGV + 1];   /* a command (templates), or argc 0 */
    int nenv;                            /* its environment, as a process's */
    const char *env_name[TG_MAX_ENV];
    const char *env_value[TG_MAX_ENV];
    const char *sql_file;                /* or a SQL file, relative to the profile */
    int timeout_ms;
};

struct tg_operation {
    int defined;
    const char *method, *path;           /* path: a template */
    int nheaders;
    const char *header_name[TG_MAX_HEADERS];
    const char *header_value[TG_MAX_HEADERS]; /* templates */
    const cJSON *body;                   /* its strings are templates; NULL: no body */
    int nack;
    int ack_status[TG_MAX_ACK];          /* the answers that acknowledge it */
    const char *aggregate_field;         /* the answer's field naming the aggregate */
};

struct target {
    cJSON *root;
    char path[PATH_MAX];
    char dir[PATH_MAX];                  /* the profile's folder, absolute */
    const char *name, *title;
    int nrequires;
    int require_argc[TG_MAX_REQUIRES];
    const char *require_argv[TG_MAX_REQUIRES][TG_MAX_ARGV + 1];
    const char *require_why[TG_MAX_REQUIRES];
    int nsettings;
    const char *setting_name[TG_MAX_SETTINGS];
    char setting_value[TG_MAX_SETTINGS][64];
    const char *exchange;
    int nqueues;
    const char *queue_group[TG_MAX_QUEUES]; /* consumer group -> its queue */
    const char *queue_name[TG_MAX_QUEUES];
    const char *message_id_field;        /* NULL: the message_id property */
    int nsetup;
    struct tg_setup setup[TG_MAX_SETUP];
    struct tg_process proc[TG_ROLE_COUNT];
    struct tg_operation create, follow_up;
    const char *mapping[TG_MAP_COUNT];   /* NULL: not mapped */
    /* "progress_timeout_ms": the longest the target may show no change in
     * its mapping and still be working (its longest retry backoff, with a
     * margin); a wait for messages or the heal that sees no change for this
     * long ends, and the checker judges what is missing.  0: none, every
     * wait runs to its own timeout. */
    int progress_timeout_ms;
    /* What the target is known to do wrong: in scenario, invariant fails,
     * and every violation whose witness contains witness is that finding,
     * reproduced (why says what, source where in the target's code).  A
     * violation it does not explain still fails the scenario. */
    int nfindings;
    struct tg_finding {
        const char *scenario, *invariant, *witness, *why, *source;
    } findings[TG_MAX_FINDINGS];
    /* Scenarios whose window the target's design never opens (a relay
     * that publishes nothing of its own has no confirm to be killed at):
     * skipped with why, shown as not applicable, never counted as run. */
    int nnot_applicable;
    struct tg_not_applicable {
        const char *scenario, *why;
    } not_applicable[TG_MAX_NOT_APPLICABLE];
};

/* Why scenario does not apply to t, or NULL when it does. */
const char *target_not_applicable(const struct target *t, const char *scenario);

/* Reads and validates the profile at path.  NULL with "PATH: FIELD: problem"
 * in err (a bad profile is the user's mistake: exit status 2). */
struct target *target_load(const char *path, char *err, size_t errlen);
/* Parses text as the profile at path (path names it in errors and locates
 * its folder).  NULL with err. */
struct target *target_parse(const char *text, const char *path, char *err, size_t errlen);
void target_free(struct target *t);

const char *tg_role_name(enum tg_role r);
/* The role of a role name ("producer", "relay", "consumer"), -1 if none. */
int tg_role_from_name(const char *name);
const char *tg_map_name(enum tg_map m);
/* The columns table m must yield, NULL-terminated. */
const char *const *tg_map_columns(enum tg_map m);
/* The placeholders of a scope, NULL-terminated. */
const char *const *target_placeholders(enum tg_scope scope);
/* ${bin:PROGRAM}: the prefix, and the programs it may name (NULL-terminated). */
#define TG_BIN_PREFIX "bin:"
const char *const *target_build_programs(void);

/* Values of placeholders: parallel arrays of n names and values. */
struct tg_vars {
    int n;
    const char *name[24];
    const char *value[24];
};
/* Sets (or replaces) placeholder name to value (both borrowed). */
void tg_vars_set(struct tg_vars *v, const char *name, const char *value);

/* Fills the placeholders of tmpl into out.  0, or -1 with err naming the
 * placeholder that has no value or the output that does not fit. */
int target_expand(const char *tmpl, const struct tg_vars *vars, char *out, size_t outlen,
                  char *err, size_t errlen);

/* target_expand on every string of a JSON tree, in place (a workload
 * operation's body).  0, or -1 with err. */
int target_fill_json(cJSON *tree, const struct tg_vars *vars, char *err, size_t errlen);

/* What the profile describes, in words, for --dry-run. */
void target_describe(const struct target *t, FILE *out);

#endif
