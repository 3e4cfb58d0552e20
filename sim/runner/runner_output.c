/* runner_output.c -- the end of a scenario: teardown, the verdict and
 * what the scenario leaves behind.
 *
 * Stopping every process (or, with --keep, printing how to reach them);
 * faults_fired and faults_not_hit, an armed fault that never fired failing
 * the scenario; the verdict; timeline.jsonl, every events file of the
 * scenario merged by ts_us; the scenario's entry in result.json; the
 * terminal summary; and the run's totals.  runner_scenario.c calls these
 * in that order once the checker has run. */
#include "runner_internal.h"
#include "cwlog.h"
#include "evlog.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- teardown and outputs ----------------------------------------------- */

static void teardown(struct sctx *s)
{
    struct proc *all[SC_MAX_PROCS + 1];
    int n = 0;
    runner_reap_all(s);
    s->tearing_down = 1;
    for (int i = 0; i < s->sc->nprocs; i++)
        all[n++] = &s->procs[i];
    all[n++] = &s->broker;
    /* Signal everyone at once, then wait against one deadline. */
    for (int i = 0; i < n; i++) {
        if (!proc_poll(all[i]))
            continue;
        kill(all[i]->pid, SIGCONT);
        kill(all[i]->pid, SIGTERM);
    }
    int64_t deadline = cw_mono_ms() + STOP_TIMEOUT_MS;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < n; i++)
            alive += proc_poll(all[i]);
        if (alive == 0 || cw_mono_ms() >= deadline)
            break;
        nap(5);
    }
    for (int i = 0; i < n; i++) {
        if (!proc_poll(all[i]))
            continue;
        runner_rev_proc(s, "kill", all[i]->name, all[i]->pid, "why", "did not stop on SIGTERM");
        proc_kill(all[i]);
    }
    unlink(s->broker_sock);
    runner_stop_netproxy(s);
}

/* A parsed line holds its numbers as doubles, and cJSON would print some
 * microsecond values in exponent form; the timeline keeps the digits the
 * process wrote.  Done last, just before printing: a raw item is no longer
 * a number to the readers of the event. */
static void us_fields_as_integers(cJSON *ev)
{
    cJSON *it = ev->child;
    while (it != NULL) {
        cJSON *next = it->next;
        size_t n = it->string ? strlen(it->string) : 0;
        if (cJSON_IsNumber(it) && n > 3 && strcmp(it->string + n - 3, "_us") == 0 &&
            it->valuedouble >= -9e18 && it->valuedouble <= 9e18) {
            char text[24];
            snprintf(text, sizeof(text), "%lld", (long long)it->valuedouble);
            cJSON *raw = cJSON_CreateRaw(text);
            if (raw != NULL)
                cJSON_ReplaceItemInObjectCaseSensitive(ev, it->string, raw);
        }
        it = next;
    }
}

struct tl_item {
    cJSON *ev;
    int64_t ts;
    long seq;
};

static int cmp_tl(const void *a, const void *b)
{
    const struct tl_item *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Merges every events file of the scenario into timeline.jsonl, naming
 * each line after the scenario's process.  Returns the number of events. */
long runner_write_timeline(struct sctx *s)
{
    const char *paths[SC_MAX_PROCS + 2];
    const char *names[SC_MAX_PROCS + 2];
    char runner_path[PATH_MAX + 32];
    int n = 0;
    for (int i = 0; i < s->sc->nprocs; i++) {
        paths[n] = s->procs[i].events_path;
        names[n++] = s->procs[i].name;
    }
    paths[n] = s->broker.events_path;
    names[n++] = "broker";
    snprintf(runner_path, sizeof(runner_path), "%s/runner.events.jsonl", s->dir);
    paths[n] = runner_path;
    names[n++] = "runner";
    struct tl_item *items = NULL;
    long count = 0, cap = 0;
    cJSON *arrays[SC_MAX_PROCS + 2];
    for (int i = 0; i < n; i++) {
        arrays[i] = evlog_read(paths[i], NULL);
        cJSON *ev;
        cJSON_ArrayForEach(ev, arrays[i]) {
            const cJSON *pr = cJSON_GetObjectItemCaseSensitive(ev, "proc");
            if (!cJSON_IsString(pr) || strcmp(pr->valuestring, names[i]) != 0) {
                if (cJSON_IsString(pr))
                    cJSON_AddStringToObject(ev, "self", pr->valuestring);
                cJSON_DeleteItemFromObjectCaseSensitive(ev, "proc");
                cJSON_AddStringToObject(ev, "proc", names[i]);
            }
            if (count == cap) {
                cap = cap ? cap * 2 : 1024;
                struct tl_item *ni = realloc(items, (size_t)cap * sizeof(*ni));
                if (ni == NULL)
                    break;
                items = ni;
            }
            items[count].ev = ev;
            items[count].ts = ev_ts(ev);
            items[count].seq = count;
            count++;
        }
    }
    if (count > 0)
        qsort(items, (size_t)count, sizeof(*items), cmp_tl);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s/timeline.jsonl", s->dir);
    FILE *f = fopen(path, "w");
    for (long i = 0; f != NULL && i < count; i++) {
        us_fields_as_integers(items[i].ev);
        char *text = cJSON_PrintUnformatted(items[i].ev);
        if (text != NULL) {
            fprintf(f, "%s\n", text);
            cJSON_free(text);
        }
    }
    if (f != NULL)
        fclose(f);
    free(items);
    for (int i = 0; i < n; i++)
        cJSON_Delete(arrays[i]);
    return count;
}

/* faults_fired from every fault_hit event; faults_not_hit from what was
 * armed and never fired in that incarnation. */
static void fault_report(struct sctx *s, const cJSON *const *proc_events, cJSON *fired,
                         cJSON *not_hit)
{
    for (int i = 0; i < s->sc->nprocs; i++) {
        const cJSON *ev;
        cJSON_ArrayForEach(ev, proc_events[i]) {
            if (strcmp(ev_name(ev), "fault_hit") != 0)
                continue;
            cJSON *o = cJSON_CreateObject();
            const char *pt = ev_str(ev, "point");
            const char *ac = ev_str(ev, "action");
            cJSON_AddStringToObject(o, "point", pt ? pt : "");
            cJSON_AddStringToObject(o, "proc", s->procs[i].name);
            cJSON_AddStringToObject(o, "action", ac ? ac : "");
            cwlog_add_int64(o, "ts_us", (int64_t)ev_ts(ev));
            cJSON_AddItemToArray(fired, o);
        }
    }
    for (int i = 0; i < s->armed.n; i++) {
        const struct armed *a = &s->armed.list[i];
        int hit = 0;
        const cJSON *ev;
        cJSON_ArrayForEach(ev, proc_events[a->proc]) {
            double pid = 0;
            ev_num(ev, "pid", &pid);
            const char *pt = ev_str(ev, "point");
            if ((int)pid == a->pid && strcmp(ev_name(ev), "fault_hit") == 0 && pt != NULL &&
                strcmp(pt, a->point) == 0)
                hit = 1;
        }
        if (hit)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", a->point);
        cJSON_AddStringToObject(o, "proc", s->procs[a->proc].name);
        cJSON_AddStringToObject(o, "action", a->action);
        cJSON_AddItemToArray(not_hit, o);
    }
}

/* One faults_fired entry per broker switch a broker_control turned on
 * ("outage=refuse duplicate" -> broker/outage refuse, broker/duplicate on). */
static void broker_faults(const char *on, int64_t ts_us, cJSON *fired)
{
    while (on != NULL && *on != '\0') {
        size_t n = strcspn(on, " ");
        char word[96], *eq;
        snprintf(word, sizeof(word), "%.*s", (int)n, on);
        eq = strchr(word, '=');
        if (eq != NULL)
            *eq++ = '\0';
        char point[112];
        snprintf(point, sizeof(point), "broker/%s", word);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", point);
        cJSON_AddStringToObject(o, "proc", "broker");
        cJSON_AddStringToObject(o, "action", eq != NULL ? eq : "on");
        cwlog_add_int64(o, "ts_us", ts_us);
        cJSON_AddStringToObject(o, "kind", "broker");
        cJSON_AddItemToArray(fired, o);
        on += n;
        on += strspn(on, " ");
    }
}

/* The faults the runner made from outside the processes, as faults_fired
 * entries beside the fault points: a link's fault ("net/LINK/FAULT", its
 * client's name), a database or broker outage ("postgres/crash",
 * "broker/crash", ...), a broker switch turned on ("broker/outage") and a
 * process started with a shifted clock ("clock/offset"), each with "kind"
 * so the report can tell them from points.  A scenario that breaks the
 * network has faults, whether or not any process was compiled to know it. */
static void outside_faults(struct sctx *s, cJSON *fired)
{
    cJSON *evs = evlog_read(s->run_events_path, NULL);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        const char *name = ev_name(ev);
        char point[SC_NAME_MAX * 2 + 64], proc[SC_NAME_MAX + 16];
        const char *action, *kind;
        double ts = ev_ts(ev);
        if (strcmp(name, "net_fault") == 0) {
            const char *link = ev_str(ev, "link");
            action = ev_str(ev, "fault");
            /* A window is counted when it fires (runner_net_windows_fired). */
            if (link == NULL || action == NULL || strcmp(action, "window") == 0)
                continue;
            snprintf(point, sizeof(point), "net/%s/%s", link, action);
            const char *arrow = strstr(link, "->");
            snprintf(proc, sizeof(proc), "%.*s", arrow ? (int)(arrow - link) : (int)strlen(link),
                     link);
            kind = "net";
        } else if (strcmp(name, "db_fault") == 0) {
            const char *target = ev_str(ev, "target");
            action = ev_str(ev, "action");
            if (target == NULL || action == NULL)
                continue;
            snprintf(point, sizeof(point), "%s/%s", target, action);
            snprintf(proc, sizeof(proc), "%s", target);
            ev_num(ev, "started_us", &ts); /* when the outage began */
            kind = strcmp(target, "broker") == 0 ? "broker" : "database";
        } else if (strcmp(name, "broker_control") == 0) {
            broker_faults(ev_str(ev, "faults_on"), (int64_t)ts, fired);
            continue;
        } else {
            continue;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", point);
        cJSON_AddStringToObject(o, "proc", proc);
        cJSON_AddStringToObject(o, "action", action);
        cwlog_add_int64(o, "ts_us", (int64_t)ts);
        cJSON_AddStringToObject(o, "kind", kind);
        cJSON_AddItemToArray(fired, o);
    }
    cJSON_Delete(evs);
    for (int i = 0; i < s->sc->nprocs; i++) {
        if (s->sc->procs[i].faketime[0] == '\0')
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "point", "clock/offset");
        cJSON_AddStringToObject(o, "proc", s->procs[i].name);
        cJSON_AddStringToObject(o, "action", s->sc->procs[i].faketime);
        cwlog_add_int64(o, "ts_us", s->started_us); /* from its first start */
        cJSON_AddStringToObject(o, "kind", "clock");
        cJSON_AddItemToArray(fired, o);
    }
}

/* Fails the scenario naming every armed fault that never fired. */
static void fail_not_hit(struct sctx *s, const cJSON *not_hit)
{
    char list[600] = "";
    size_t n = 0;
    const cJSON *nh;
    cJSON_ArrayForEach(nh, not_hit) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(nh, "point");
        const cJSON *pr = cJSON_GetObjectItemCaseSensitive(nh, "proc");
        const cJSON *ac = cJSON_GetObjectItemCaseSensitive(nh, "action");
        int w = snprintf(list + n, sizeof(list) - n, "%s%s=%s in %s", n ? ", " : "",
                         cJSON_IsString(pt) ? pt->valuestring : "?",
                         cJSON_IsString(ac) ? ac->valuestring : "?",
                         cJSON_IsString(pr) ? pr->valuestring : "?");
        if (w < 0 || (size_t)w >= sizeof(list) - n)
            break; /* truncated: faults_not_hit in result.json has them all */
        n += (size_t)w;
    }
    runner_fail(s, "armed fault%s never hit: %s: the run never reached the window it is meant "
                "to test (make the workload reach it, or mark the scenario faults_optional)",
                cJSON_GetArraySize(not_hit) == 1 ? "" : "s", list);
}

static void print_keep(struct sctx *s)
{
    printf("    --keep: the system stays up. To poke it:\n");
    int hidden = 0;
    char *shown = conninfo_for_display(s->db.conninfo, &hidden);
    printf("      psql \"%s\"%s\n", shown ? shown : "(connection string unreadable)",
           hidden ? "   (password not shown: give it with PGPASSWORD)" : "");
    free(shown);
    for (int i = 0; i < s->sc->nprocs; i++) {
        struct proc *p = &s->procs[i];
        if (!proc_poll(p))
            continue;
        printf("      %-12s pid %d: fiu-ctrl -f %s -c \"enable name=%s/...,failinfo=2\" %d\n",
               p->name, (int)p->pid, p->fifo_prefix,
               s->sc->procs[i].kind == SC_API ? "api" :
               s->sc->procs[i].kind == SC_RELAY ? "relay" : "consumer", (int)p->pid);
        if (s->sc->procs[i].kind == SC_API && s->port[i] > 0)
            printf("      curl -s -X POST -H 'X-Client-Id: me' -H 'Idempotency-Key: try-1' "
                   "-H 'Content-Type: application/json' "
                   "-d '{\"amount\":\"12.50\",\"currency\":\"EUR\"}' "
                   "http://127.0.0.1:%d/payments\n", s->port[i]);
    }
    printf("      broker socket: %s (pid %d)\n", s->broker_sock, (int)s->broker.pid);
    runner_net_print_keep(s);
    printf("      stop it all: kill");
    for (int i = 0; i < s->sc->nprocs; i++)
        if (proc_poll(&s->procs[i]))
            printf(" %d", (int)s->procs[i].pid);
    printf(" %d", (int)s->broker.pid);
    int proxy_pid = runner_netproxy_pid(s);
    if (proxy_pid > 0)
        printf(" %d", proxy_pid);
    printf("\n");
}

/* Stops the metrics sampler and every process, or with --keep leaves them
 * running and prints how to reach them. */
void runner_stop_scenario(struct sctx *s)
{
    if (s->metrics != NULL)
        metrics_stop(s->metrics);
    s->metrics = NULL;
    if (s->run->o->keep)
        print_keep(s);
    else
        teardown(s);
    runner_reap_all(s);
}

/* faults_fired and faults_not_hit.  A scenario whose armed fault never
 * fired did not reach the window it is about, and proves nothing about it:
 * that fails it, unless it says faults_optional. */
void runner_collect_faults(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    oc->fired = cJSON_CreateArray();
    oc->not_hit = cJSON_CreateArray();
    const cJSON *pe[SC_MAX_PROCS];
    cJSON *empty = cJSON_CreateArray();
    for (int i = 0; i < sc->nprocs; i++)
        pe[i] = oc->proc_events[i] ? oc->proc_events[i] : empty;
    if (oc->checked)
        fault_report(s, pe, oc->fired, oc->not_hit);
    runner_net_windows_fired(s, oc->fired); /* the proxy's windows fire outside the process */
    outside_faults(s, oc->fired);
    cJSON_Delete(empty);
    if (oc->checked && !sc->faults_optional && cJSON_GetArraySize(oc->not_hit) > 0)
        fail_not_hit(s, oc->not_hit);
}

/* The scenario's "hazard" object: what the setting risks, whether the
 * checker caught it, and by which invariants with their first witness. */
static cJSON *hazard_json(const struct sctx *s, const struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    cJSON *h = cJSON_CreateObject();
    cJSON_AddStringToObject(h, "why", sc->hazard_why);
    cJSON_AddStringToObject(h, "explains", sc_hazard_kind_name(sc->hazard_explains));
    cJSON_AddNumberToObject(h, "at_most", sc->hazard_at_most);
    cJSON_AddBoolToObject(h, "caught", oc->hazard_caught);
    /* how many events, and acknowledged payments, the hazard explained:
     * each is a witness of at least one caught violation */
    cJSON_AddNumberToObject(h, "explained_events", oc->checked ? (double)oc->res.hazard_events : 0);
    cJSON_AddNumberToObject(h, "explained_payments",
                            oc->checked ? (double)oc->res.hazard_payments : 0);
    cJSON *by = cJSON_AddArrayToObject(h, "caught_by");
    for (int i = 0; i < sc->nhazard; i++) {
        const struct chk_inv *inv = &oc->res.inv[sc->hazard[i]];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "invariant", sc_invariant_name(sc->hazard[i]));
        cJSON_AddNumberToObject(o, "violations", oc->checked ? (double)inv->violations : 0);
        cJSON_AddNumberToObject(o, "explained", oc->checked ? (double)inv->hazard_explained : 0);
        const cJSON *w = oc->checked ? inv->witnesses : NULL;
        if (cJSON_GetArraySize(w) > 0)
            cJSON_AddStringToObject(o, "witness", cJSON_GetArrayItem(w, 0)->valuestring);
        cJSON_AddItemToArray(by, o);
    }
    return h;
}

/* The name of a verdict: interrupted, pass or fail. */
const char *runner_verdict_name(const struct outcome *oc)
{
    return oc->interrupted ? "interrupted" : oc->pass ? "pass" : "fail";
}

/* The verdict: checked, no error, every invariant and every expectation
 * held; in a hazard scenario, every hazard invariant caught its loss, on
 * violations the hazard explains alone (a violation it does not explain
 * fails the scenario as anywhere), and every other one held.  Logged as
 * scenario_end. */
void runner_decide_verdict(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    oc->pass = s->error[0] == '\0' && oc->checked && !oc->interrupted;
    oc->ninv_checked = 0;
    oc->hazard_caught = sc->nhazard > 0 && oc->checked;
    for (int i = 0; i < INV_COUNT && oc->checked; i++) {
        if (oc->res.inv[i].not_examined)
            continue; /* a target's: neither passed nor failed, and not counted */
        oc->ninv_checked++;
        if (sc_is_hazard_invariant(sc, i)) {
            /* The loss this setting is known for must be caught, and only
             * it excused: every violation's witness an event the hazard
             * explains (checker_hazard.c). */
            int hz = checker_inv_hazard(&oc->res, sc, i);
            if (hz != CHK_HAZARD_CAUGHT)
                oc->hazard_caught = 0;
            if (hz == CHK_HAZARD_UNEXPLAINED)
                oc->pass = 0;
        } else if (checker_inv_finding(&oc->res, i)) {
            /* A target's known finding, reproduced: every violation is one
             * it explains.  A violation it does not explain fails below. */
            continue;
        } else if (!checker_inv_pass(&oc->res, sc, i)) {
            oc->pass = 0;
        }
    }
    if (sc->nhazard > 0 && !oc->hazard_caught)
        oc->pass = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, s->expects) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
        if (cJSON_IsString(v) && strcmp(v->valuestring, "fail") == 0)
            oc->pass = 0;
    }
    if (s->ev != NULL) {
        cJSON *ev = runner_rev_begin(s, "scenario_end");
        cJSON_AddStringToObject(ev, "verdict", runner_verdict_name(oc));
        runner_rev_emit(s, ev);
    }
}

/* The scenario's entry in result.json.  It takes over fired, not_hit and
 * the expectations. */
cJSON *runner_scenario_json(struct sctx *s, struct outcome *oc)
{
    const struct scenario *sc = s->sc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sc->name);
    cJSON_AddStringToObject(o, "title", sc->title);
    cJSON_AddStringToObject(o, "crash_window", sc->crash_window);
    if (sc->article_case > 0)
        cJSON_AddNumberToObject(o, "article_case", sc->article_case);
    else
        cJSON_AddNullToObject(o, "article_case");
    cJSON_AddStringToObject(o, "file", sc->path);
    if (s->run->o->repeat > 1)
        cJSON_AddNumberToObject(o, "repeat", s->rep);
    cJSON_AddStringToObject(o, "verdict", runner_verdict_name(oc));
    cJSON_AddNumberToObject(o, "duration_ms", (double)(cw_mono_ms() - s->t0));
    char iso[40];
    us_to_iso(s->started_us, iso, sizeof(iso));
    cJSON_AddStringToObject(o, "started_at", iso);
    cJSON_AddStringToObject(o, "dir", s->label);
    cJSON_AddItemToObject(o, "faults_fired", oc->fired);
    cJSON_AddItemToObject(o, "faults_not_hit", oc->not_hit);
    cJSON_AddNumberToObject(o, "kills", s->count.kills);
    cJSON_AddNumberToObject(o, "pauses", s->count.pauses);
    cJSON_AddNumberToObject(o, "restarts", s->count.restarts);
    cJSON_AddNumberToObject(o, "events", (double)oc->nevents);
    cJSON_AddNumberToObject(o, "http_requests", s->http.n);
    cJSON_AddItemToObject(o, "counts", checker_counts_json(&oc->res));
    cJSON_AddItemToObject(o, "classification", checker_class_json(&oc->res));
    cJSON_AddItemToObject(o, "invariants", oc->checked ? checker_invariants_json(&oc->res, sc)
                                                       : cJSON_CreateArray());
    cJSON_AddItemToObject(o, "expect", s->expects);
    s->expects = NULL;
    if (sc->nhazard > 0)
        cJSON_AddItemToObject(o, "hazard", hazard_json(s, oc));
    cJSON_AddItemToObject(o, "recovery", oc->recovery ? oc->recovery : cJSON_CreateArray());
    oc->recovery = NULL;
    if (s->error[0] != '\0')
        cJSON_AddStringToObject(o, "error", s->error);
    else
        cJSON_AddNullToObject(o, "error");
    return o;
}

/* For a hazard scenario, whether the checker caught the loss and how; for
 * every database or broker fault, how long until a consumer applied again. */
static void print_hazard_and_recovery(const struct sctx *s, const struct outcome *oc,
                                      const cJSON *o)
{
    const struct scenario *sc = s->sc;
    for (int i = 0; i < sc->nhazard && oc->checked; i++) {
        const struct chk_inv *inv = &oc->res.inv[sc->hazard[i]];
        const cJSON *w = inv->witnesses;
        int hz = checker_inv_hazard(&oc->res, sc, sc->hazard[i]);
        printf("      hazard %s by %s (%ld violations, %ld explained by the hazard)%s%s\n",
               hz == CHK_HAZARD_CAUGHT ? "caught" : hz == CHK_HAZARD_UNEXPLAINED
                                                     ? "NOT excused" : "NOT caught",
               sc_invariant_name(sc->hazard[i]), inv->violations, inv->hazard_explained,
               cJSON_GetArraySize(w) > 0 ? ": " : "",
               cJSON_GetArraySize(w) > 0 ? cJSON_GetArrayItem(w, 0)->valuestring : "");
    }
    if (sc->nhazard > 0 && oc->checked)
        printf("      hazard %s explains %ld events and %ld acknowledged payments (at most %d "
               "each)\n", sc_hazard_kind_name(sc->hazard_explains), oc->res.hazard_events,
               oc->res.hazard_payments, sc->hazard_at_most);
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(o, "recovery")) {
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "recovery_ms");
        const char *t = cJSON_GetObjectItemCaseSensitive(r, "target")->valuestring;
        const char *a = cJSON_GetObjectItemCaseSensitive(r, "action")->valuestring;
        if (cJSON_IsNumber(ms))
            printf("      recovery after %s %s: %.0f ms to the next applied event\n", t, a,
                   ms->valuedouble);
        else
            printf("      recovery after %s %s: no event applied afterwards\n", t, a);
    }
}

/* The invariants that examined nothing, listed or not: a listed one fails
 * (and is shown with the failures), an unlisted one is only named here, so
 * that a reader never takes "pass" for "checked". */
static void print_vacuous(const struct sctx *s, const struct outcome *oc)
{
    char names[512] = "";
    size_t n = 0;
    for (int i = 0; i < INV_COUNT && oc->checked; i++) {
        if (!checker_inv_vacuous(&oc->res, i) || sc_is_hazard_invariant(s->sc, i))
            continue;
        int w = snprintf(names + n, sizeof(names) - n, "%s%s", n ? ", " : "",
                         sc_invariant_name((enum sc_invariant)i));
        if (w > 0 && (size_t)w < sizeof(names) - n)
            n += (size_t)w;
    }
    if (n > 0)
        printf("      vacuous (examined nothing): %s\n", names);
}

/* The terminal summary: one line, then for a failure what failed, and a
 * note for every armed fault that never fired. */
void runner_print_summary(const struct sctx *s, const struct outcome *oc, const cJSON *o)
{
    const struct scenario *sc = s->sc;
    if (oc->interrupted) {
        printf("    %s: interrupted after %.1f s: nothing judged (%d faults fired, %d kills, "
               "%d pauses, %d restarts)\n", s->label, (double)(cw_mono_ms() - s->t0) / 1000.0,
               cJSON_GetArraySize(oc->fired), s->count.kills, s->count.pauses,
               s->count.restarts);
        fflush(stdout);
        return;
    }
    printf("    %s: %s in %.1f s (%d invariants, %d faults fired, %d kills, %d pauses, "
           "%d restarts)\n", s->label, oc->pass ? "PASS" : "FAIL",
           (double)(cw_mono_ms() - s->t0) / 1000.0, oc->ninv_checked,
           cJSON_GetArraySize(oc->fired), s->count.kills, s->count.pauses, s->count.restarts);
    print_hazard_and_recovery(s, oc, o);
    print_vacuous(s, oc);
    if (!oc->pass) {
        if (s->error[0])
            printf("      error: %s\n", s->error);
        for (int i = 0; i < INV_COUNT && oc->checked; i++) {
            /* Neither passed nor failed: what a target's mapping cannot show,
             * or a known finding of the target reproduced. */
            if (oc->res.inv[i].not_examined || checker_inv_finding(&oc->res, i))
                continue;
            int unexplained = checker_inv_hazard(&oc->res, sc, i) == CHK_HAZARD_UNEXPLAINED;
            if (sc_is_hazard_invariant(sc, i) ? !unexplained : checker_inv_pass(&oc->res, sc, i))
                continue;
            const struct chk_inv *inv = &oc->res.inv[i];
            const cJSON *w = inv->witnesses, *it;
            const char *first = cJSON_GetArraySize(w) > 0 ? cJSON_GetArrayItem(w, 0)->valuestring
                                : inv->checked == 0 ? "vacuous: nothing checked" : "";
            /* A hazard's invariant fails on what the hazard does not
             * explain: show that witness. */
            cJSON_ArrayForEach(it, w) {
                if (unexplained && strstr(it->valuestring, "[explained by the hazard]") == NULL) {
                    first = it->valuestring;
                    break;
                }
            }
            printf("      invariant %s failed (%ld violations)%s%s\n",
                   sc_invariant_name((enum sc_invariant)i), inv->violations,
                   first[0] ? ": " : "", first);
        }
        const cJSON *exps = cJSON_GetObjectItemCaseSensitive(o, "expect");
        const cJSON *x;
        cJSON_ArrayForEach(x, exps) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(x, "verdict");
            if (strcmp(v->valuestring, "fail") == 0)
                printf("      expectation %s failed: %s\n",
                       cJSON_GetObjectItemCaseSensitive(x, "check")->valuestring,
                       cJSON_GetObjectItemCaseSensitive(x, "detail")->valuestring);
        }
    }
    for (int i = 0; i < cJSON_GetArraySize(oc->not_hit); i++) {
        const cJSON *nh = cJSON_GetArrayItem(oc->not_hit, i);
        printf("      note: fault %s armed in %s was never hit\n",
               cJSON_GetObjectItemCaseSensitive(nh, "point")->valuestring,
               cJSON_GetObjectItemCaseSensitive(nh, "proc")->valuestring);
    }
    fflush(stdout);
}

void runner_add_totals(struct runner *r, const struct sctx *s, const struct outcome *oc)
{
    if (oc->interrupted)
        return; /* neither run to its end nor judged: not counted */
    r->t_scen++;
    r->t_passed += oc->pass;
    r->t_inv += oc->ninv_checked;
    r->t_faults += cJSON_GetArraySize(oc->fired);
    r->t_kills += s->count.kills;
    r->t_pauses += s->count.pauses;
    r->t_restarts += s->count.restarts;
    r->t_events += oc->nevents;
}
