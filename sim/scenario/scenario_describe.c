/* scenario_describe.c -- a parsed scenario in words, without running it:
 * what `crashwindow run --dry-run` prints (scenario_print) and the step
 * lines of the runner's progress (scenario_step_describe); see scenario.h. */
#include "scenario.h"
#include "scenario_internal.h"

#include <stdio.h>
#include <string.h>

static void describe_db(const struct sc_step *st, const char *pn, char *out, size_t outlen)
{
    switch (st->db_action) {
    case DB_CRASH:
        snprintf(out, outlen, "db crash (immediate shutdown, no checkpoint), down %d ms, "
                 "start: crash recovery", st->down_ms);
        break;
    case DB_RESTART:
        snprintf(out, outlen, "db restart (fast shutdown, start)");
        break;
    case DB_TERMINATE:
        snprintf(out, outlen, "db terminate the sessions of %s (pg_terminate_backend)",
                 pn[0] ? pn : "every process");
        break;
    case DB_FREEZE:
        snprintf(out, outlen, "db freeze (SIGSTOP the server) for %d ms, then SIGCONT", st->ms);
        break;
    case DB_FAILOVER:
        snprintf(out, outlen, "db failover: kill the primary, promote the standby");
        break;
    case DB_STALL_REPLICATION:
        snprintf(out, outlen, "db stall replication: the standby receives no WAL until failover");
        break;
    case DB_HOLD_COMMITS:
        snprintf(out, outlen, "db hold commits for %d ms (a synchronous standby that never "
                 "answers: each commit durable, not yet visible)", st->ms);
        break;
    case DB_LOCK:
        snprintf(out, outlen, "db lock %s ACCESS EXCLUSIVE for %d ms (another session, as a "
                 "migration's ALTER TABLE)", st->table, st->ms);
        break;
    case DB_DEADLOCK:
        snprintf(out, outlen, "db deadlock: another session takes locks, waits up to %d ms for "
                 "a process to wait on it, then waits on that process", st->ms);
        break;
    case DB_REFUSE:
    case DB_SEVER: {
        const int sever = st->db_action == DB_SEVER;
        char how[48] = "";
        if (!sever)
            snprintf(how, sizeof(how), " with SQLSTATE %s", st->sqlstate);
        snprintf(out, outlen, "db %s %s %s%s%s on %s by %s%s, %d time%s after letting %d "
                 "pass%s", sever ? "sever the session of" : "refuse",
                 st->refuse_at_commit ? "the COMMIT after" : "each", st->refuse_on,
                 st->refuse_of[0] ? " of " : "", st->refuse_of, st->table,
                 pn[0] ? pn : "any process", how, st->refuse_times,
                 st->refuse_times == 1 ? "" : "s", st->refuse_skip,
                 !st->refuse_must_fire ? sever ? " (it may sever nothing)"
                                               : " (it may refuse nothing)" : "");
        break;
    }
    }
}

void sc_series_bounds(const struct sc_step *st, char *out, size_t len)
{
    if (st->series_max < 0)
        snprintf(out, len, "at least %d", st->series_min);
    else if (st->series_min < 0)
        snprintf(out, len, "at most %d", st->series_max);
    else
        snprintf(out, len, "%d to %d", st->series_min, st->series_max);
}

void scenario_step_describe(const struct scenario *sc, const struct sc_step *st,
                            char *out, size_t outlen)
{
    const char *pn = st->proc >= 0 ? sc->procs[st->proc].name
                     : st->verb == V_WAIT && st->until == U_EVENT ? "broker" : "";
    switch (st->verb) {
    case V_START:
    case V_RESTART:
        snprintf(out, outlen, "%s %s%s%s", sc_verb_names[st->verb], pn,
                 st->faults ? " with faults " : "", st->faults ? st->faults : "");
        break;
    case V_STOP:
        snprintf(out, outlen, "stop %s (SIGTERM, SIGKILL after %d ms)", pn, st->timeout_ms);
        break;
    case V_KILL:
        snprintf(out, outlen, "kill %s (SIGKILL)", pn);
        break;
    case V_PAUSE:
        snprintf(out, outlen, "pause %s (SIGSTOP)", pn);
        break;
    case V_RESUME:
        snprintf(out, outlen, "resume %s (SIGCONT)", pn);
        break;
    case V_FAULT:
        if (st->disable)
            snprintf(out, outlen, "fault: disable %s in %s", st->point, pn);
        else
            snprintf(out, outlen, "fault: enable %s=%s in %s (every hit until disabled)",
                     st->point, st->action, pn);
        break;
    case V_HTTP:
        snprintf(out, outlen, "http%s%s: %s %s%s%s%s%s", st->name ? " " : "",
                 st->name ? st->name : "", st->method, st->path,
                 st->key ? " Idempotency-Key " : "", st->key ? st->key : "",
                 st->same_as ? ", response must equal " : "", st->same_as ? st->same_as : "");
        break;
    case V_PAYMENTS:
        snprintf(out, outlen, "payments: %d creation%s%s%s, keys %s-N, concurrency %d%s%s%s",
                 st->count, st->count == 1 ? "" : "s", st->authorize ? " + authorize" : "",
                 st->capture ? " + capture" : "", st->key_prefix, st->concurrency,
                 st->retries ? ", each retried with its key" : "",
                 st->timeout_retries ? ", a request unanswered in time sent again" : "",
                 st->background ? ", in the background (the next steps run meanwhile)" : "");
        break;
    case V_BROKER: {
        cJSON *shown = sc_control_for_display(st->control);
        char *c = cJSON_PrintUnformatted(shown);
        snprintf(out, outlen, "broker control %s", c ? c : "?");
        cJSON_free(c);
        cJSON_Delete(shown);
        break;
    }
    case V_SQL:
        snprintf(out, outlen, "sql: %.160s%s", st->sql, strlen(st->sql) > 160 ? "..." : "");
        break;
    case V_SCRAPE:
        if (st->series != NULL && st->expect_output == NULL) {
            char bounds[64];
            sc_series_bounds(st, bounds, sizeof(bounds));
            snprintf(out, outlen, "scrape %s's /metrics for %.120s %s", pn, st->series, bounds);
        } else
            snprintf(out, outlen, "scrape %s's /metrics for \"%.120s\"%s", pn,
                     st->expect_output, st->series != NULL ? " and a series" : "");
        break;
    case V_OUTBOXCTL: {
        char args[256] = "";
        for (int i = 0; i < st->argc; i++) {
            size_t n = strlen(args);
            snprintf(args + n, sizeof(args) - n, " %s", st->argv[i]);
        }
        snprintf(out, outlen, "outboxctl%s%s", args,
                 st->expect_exit >= 0 ? " (exit status checked)" : "");
        break;
    }
    case V_WAIT: {
        char what[256];
        switch (st->until) {
        case U_EXITED: snprintf(what, sizeof(what), "%s exited", pn); break;
        case U_PARKED:
            snprintf(what, sizeof(what), "%s parked%s%s", pn, st->point ? " at " : "",
                     st->point ? st->point : " at a fault point");
            break;
        case U_EVENT:
            snprintf(what, sizeof(what), "%s logged %d x %s%s%s%s%s", pn, st->count, st->event,
                     st->where_key ? " where " : "", st->where_key ? st->where_key : "",
                     st->where_key ? "=" : "", st->where_value ? st->where_value : "");
            break;
        case U_PUBLISHED: snprintf(what, sizeof(what), "%d outbox rows published", st->count); break;
        case U_CONSUMED:
            snprintf(what, sizeof(what), "%d events consumed by %s", st->count, st->consumer);
            break;
        case U_DEAD_LETTERED:
            snprintf(what, sizeof(what), "%d outbox rows dead-lettered", st->count);
            break;
        case U_LEASE_EXPIRED:
            snprintf(what, sizeof(what), "%d unpublished leases expired (locked_until < now())",
                     st->count);
            break;
        case U_QUIET: snprintf(what, sizeof(what), "the pipeline is quiet"); break;
        case U_SQL:
            snprintf(what, sizeof(what), "sql value >= %d: %.120s", st->count, st->sql);
            break;
        }
        snprintf(out, outlen, "wait until %s (%d ms%s)", what, st->timeout_ms,
                 st->wait_continue ? ", then go on regardless" : "");
        break;
    }
    case V_DB:
        describe_db(st, pn, out, outlen);
        break;
    case V_BROKER_CRASH:
        snprintf(out, outlen, "broker crash (SIGKILL), down %d ms, start again on its %s store",
                 st->down_ms, sc->broker_durable ? "durable" : "in-memory");
        break;
    case V_SLEEP:
        snprintf(out, outlen, "sleep %d ms", st->ms);
        break;
    case V_NET:
        if (st->net_clear) {
            snprintf(out, outlen, "net %s: clear its faults", st->link);
        } else {
            char what[160];
            np_fault_describe(&st->net, what, sizeof(what));
            char bound[64] = "";
            if (st->reconnect_within_ms > 0)
                snprintf(bound, sizeof(bound), "; %s must reconnect within %d ms",
                         sc->procs[st->proc].name, st->reconnect_within_ms);
            snprintf(out, outlen, "net %s: %s%s", st->link, what, bound);
        }
        break;
    }
}

void scenario_print(const struct scenario *sc, FILE *f)
{
    fprintf(f, "scenario %s: %s\n", sc->name, sc->title);
    fprintf(f, "  file: %s\n  crash window: %s", sc->path, sc->crash_window);
    if (sc->article_case > 0)
        fprintf(f, " (article case %d)", sc->article_case);
    fprintf(f, "\n  broker:%s", sc->visibility_timeout_ms ? "" : " defaults");
    if (sc->visibility_timeout_ms)
        fprintf(f, " visibility timeout %d ms", sc->visibility_timeout_ms);
    if (sc->broker_control != NULL) {
        cJSON *shown = sc_control_for_display(sc->broker_control);
        char *c = cJSON_PrintUnformatted(shown);
        fprintf(f, ", switches %s", c ? c : "?");
        cJSON_free(c);
        cJSON_Delete(shown);
    }
    fprintf(f, "\n  processes:\n");
    for (int i = 0; i < sc->nprocs; i++) {
        const struct sc_proc *p = &sc->procs[i];
        fprintf(f, "    %-14s %-8s", p->name, sc_kind_names[p->kind]);
        for (int j = 0; j < p->nargs; j++)
            fprintf(f, " --%s%s%s", p->arg_key[j], p->arg_val[j] ? " " : "",
                    p->arg_val[j] ? p->arg_val[j] : "");
        if (p->faults)
            fprintf(f, "  [CW_FAULTS=%s]", p->faults);
        if (!p->autostart)
            fprintf(f, "  (started by a step)");
        fprintf(f, "\n");
    }
    fprintf(f, "  steps:\n");
    for (int i = 0; i < sc->nsteps; i++) {
        char d[512];
        scenario_step_describe(sc, &sc->steps[i], d, sizeof(d));
        fprintf(f, "    %2d. %s\n", i + 1, d);
        if (sc->steps[i].why)
            fprintf(f, "        why: %s\n", sc->steps[i].why);
    }
    if (sc->standby)
        fprintf(f, "  database: own primary + streaming standby, %s replication\n",
                sc->synchronous ? "synchronous" : "asynchronous");
    if (sc->broker_durable)
        fprintf(f, "  broker store: durable (SQLite file, WAL)\n");
    if (sc->heal_restart)
        fprintf(f, "  heal: faults off, broker reset, every process running, converge within "
                "%d ms\n", sc->heal_timeout_ms);
    else
        fprintf(f, "  heal: faults off, broker reset, no restarts (every process must have "
                "recovered by itself), converge within %d ms\n", sc->heal_timeout_ms);
    if (sc->nhazard > 0) {
        fprintf(f, "  hazard: %s\n  caught by:", sc->hazard_why);
        for (int i = 0; i < sc->nhazard; i++)
            fprintf(f, " %s", sc_invariant_names[sc->hazard[i]]);
        fprintf(f, " (each must fail)\n");
        fprintf(f, "  hazard explains: %s, at most %d events; every other violation fails\n",
                sc_hazard_kind_name(sc->hazard_explains), sc->hazard_at_most);
    }
    if (sc->faults_optional)
        fprintf(f, "  faults: optional (an armed fault that never fires is noted, not failed)\n");
    fprintf(f, "  invariants:");
    for (int i = 0; i < sc->ninvariants; i++)
        fprintf(f, " %s", sc_invariant_names[sc->invariants[i]]);
    fprintf(f, "\n");
    for (int i = 0; i < sc->nexpect; i++) {
        const struct sc_expect *x = &sc->expect[i];
        fprintf(f, "  expect %s", x->check);
        if (x->event)
            fprintf(f, " %s", x->event);
        if (x->proc)
            fprintf(f, " of %s", x->proc);
        if (x->point)
            fprintf(f, " at %s", x->point);
        if (x->request)
            fprintf(f, " of request %s", x->request);
        if (x->has_equals)
            fprintf(f, " = %lld", x->equals);
        if (x->has_min)
            fprintf(f, " >= %lld", x->min);
        if (x->has_max)
            fprintf(f, " <= %lld", x->max);
        if (x->why)
            fprintf(f, "  (%s)", x->why);
        fprintf(f, "\n");
    }
}
