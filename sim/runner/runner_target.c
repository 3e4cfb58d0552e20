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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The invariants a profile's mapping and the broker log can judge; the
 * others read the insides of our own pipeline (claims, leases, retries,
 * sessions, payloads). */
static const enum sc_invariant judged_on_targets[] = {
    INV_NOTHING_LOST, INV_EFFECT_ONCE, INV_BROKER_LOG_MATCHES_OUTBOX, INV_VERSIONS_IN_ORDER,
    INV_ONE_PAYMENT_PER_KEY
};

/* The expectations computed from the mapping, the broker log and the
 * runner's own records. */
static const char *const target_expects[] = {
    "outbox_rows", "published", "effects", "publishes", "deliveries", "redeliveries",
    "ok", "lost", "duplicated", "recovered", "faults_fired", "http_status", NULL
};

int runner_target_judges(enum sc_invariant inv)
{
    for (size_t i = 0; i < sizeof(judged_on_targets) / sizeof(judged_on_targets[0]); i++)
        if (judged_on_targets[i] == inv)
            return 1;
    return 0;
}

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
        return st->db_action == DB_FAILOVER || st->db_action == DB_STALL_REPLICATION
                   ? "a failover needs the scenario's own standby, not built for targets yet"
                   : NULL;
    case V_BROKER:
        return runner_rabbit_can_control(st->control)
                   ? NULL : "a switch of the fake broker; a target runs on RabbitMQ";
    case V_STOP:
    case V_KILL:
    case V_PAUSE:
    case V_RESUME:
    case V_BROKER_CRASH:
    case V_SLEEP:
    case V_NET:
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
        if (!runner_target_judges(sc->invariants[i])) {
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

int runner_target_requirement(const struct target *t, char *why, size_t whylen)
{
    for (int i = 0; i < t->nrequires; i++) {
        char exe[PATH_MAX], out[512];
        const char *const *argv = t->require_argv[i];
        if (find_on_path(argv[0], exe, sizeof(exe)) < 0) {
            snprintf(why, whylen, "%s: '%s' not found", t->require_why[i], argv[0]);
            return 1;
        }
        char *args[TG_MAX_ARGV + 1];
        args[0] = exe;
        for (int k = 1; k <= t->require_argc[i]; k++)
            args[k] = (char *)argv[k];
        int rc = proc_run_capture(args, NULL, 30000, out, sizeof(out));
        if (rc != 0) {
            out[strcspn(out, "\n")] = '\0';
            snprintf(why, whylen, "%s: '%s' %s %d: %s", t->require_why[i], argv[0],
                     rc < 0 ? "could not run" : "exited with", rc, out);
            return 1;
        }
    }
    return 0;
}
