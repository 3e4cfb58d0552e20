/* runner_steps.c -- the verbs of a scenario: what each step does.
 *
 * runner_run_step dispatches one step to its verb.  Fourteen of the
 * seventeen verbs are run here: start and restart, stop, kill, pause and
 * resume (signals), fault (libfiu's remote control), http and payments
 * (the workload, recorded in the HTTP log the checker reads), broker (the
 * broker's switches), sql, outboxctl, wait and sleep.  The other three
 * live with what they fault: db in runner_dbfault.c, broker_crash in
 * runner_broker_crash.c, net in runner_net.c.  Each verb either does its
 * job or records the scenario's error with runner_fail and returns -1;
 * runner_scenario.c then skips the remaining steps but still heals and
 * checks.
 *
 * A payments step with concurrency > 1 runs one worker thread per
 * connection; the workers append to the HTTP log and the runner's events
 * under the scenario's lock.  Every wait is a condition polled against a
 * deadline: the step's timeout, capped by the run's wait_cap_ms and by the
 * scenario's own deadline. */
#include "runner_internal.h"
#include "target.h"
#include "brokerctl.h"
#include "checker.h"
#include "cwlog.h"
#include "evlog.h"
#include "fault.h"
#include "history.h"
#include "pgx.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- HTTP --------------------------------------------------------------- */

static void http_log_add(struct sctx *s, const struct http_rec *h)
{
    pthread_mutex_lock(&s->lock);
    if (s->http.n == s->http.cap) {
        int ncap = s->http.cap ? s->http.cap * 2 : 64;
        struct http_rec *nv = realloc(s->http.recs, (size_t)ncap * sizeof(*nv));
        if (nv == NULL) {
            pthread_mutex_unlock(&s->lock);
            free(h->body);
            return;
        }
        s->http.recs = nv;
        s->http.cap = ncap;
    }
    s->http.recs[s->http.n++] = *h;
    pthread_mutex_unlock(&s->lock);
}

/* One request, recorded in the HTTP log and the runner's events.  When out
 * is not NULL it receives a copy of the record whose body the caller frees
 * (the log keeps its own).  Returns the answer's Retry-After in seconds, -1
 * when it had none. */
static int do_http(struct sctx *s, int port, int step, const char *name, const char *method,
                    const char *path, const char *key, const cJSON *extra_headers,
                    const char *body, int timeout_ms, struct http_rec *out)
{
    struct http_rec h;
    memset(&h, 0, sizeof(h));
    h.step = step;
    snprintf(h.name, sizeof(h.name), "%s", name ? name : "");
    snprintf(h.method, sizeof(h.method), "%s", method);
    snprintf(h.path, sizeof(h.path), "%s", path);
    snprintf(h.key, sizeof(h.key), "%s", key ? key : "");
    /* A target's operations are named by the payments step: "create". */
    h.creation = s->run->target != NULL
                     ? name != NULL && strcmp(name, "create") == 0
                     : strcmp(method, "POST") == 0 && strcmp(path, "/payments") == 0;
    const char *headers[24];
    char hbuf[24][256];
    int nh = 0;
    if (key != NULL) {
        snprintf(hbuf[nh], sizeof(hbuf[nh]), "Idempotency-Key: %s", key);
        headers[nh] = hbuf[nh];
        nh++;
    }
    /* Idempotency keys belong to a client: the runner's own unless the
     * request names another. */
    snprintf(h.client, sizeof(h.client), "%s", CHK_DEFAULT_CLIENT);
    int named = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, extra_headers) {
        if (nh >= 21)
            break;
        snprintf(hbuf[nh], sizeof(hbuf[nh]), "%s: %s", it->string, it->valuestring);
        headers[nh] = hbuf[nh];
        nh++;
        if (strcasecmp(it->string, "Idempotency-Key") == 0)
            snprintf(h.key, sizeof(h.key), "%s", it->valuestring);
        if (strcasecmp(it->string, "X-Client-Id") == 0) {
            snprintf(h.client, sizeof(h.client), "%s", it->valuestring);
            named = 1;
        }
    }
    if (!named) {
        snprintf(hbuf[nh], sizeof(hbuf[nh]), "X-Client-Id: %s", CHK_DEFAULT_CLIENT);
        headers[nh] = hbuf[nh];
        nh++;
    }
    headers[nh] = NULL;
    h.t0_us = cw_now_us();
    struct http_resp resp;
    if (port <= 0) {
        memset(&resp, 0, sizeof(resp));
        snprintf(resp.error, sizeof(resp.error), "the API is not running");
    } else {
        http_request(port, method, path, headers, body, timeout_ms, &resp);
    }
    h.t1_us = cw_now_us();
    h.status = resp.status;
    h.body = resp.body ? resp.body : strdup("");
    snprintf(h.error, sizeof(h.error), "%s", resp.error);
    if (h.status >= 200 && h.status < 300) {
        cJSON *j = cJSON_Parse(h.body);
        const char *field = s->run->target ? s->run->target->create.aggregate_field : "id";
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, field);
        if (!cJSON_IsString(id))
            id = cJSON_GetObjectItemCaseSensitive(j, "payment_id");
        if (cJSON_IsString(id))
            snprintf(h.payment_id, sizeof(h.payment_id), "%s", id->valuestring);
        cJSON_Delete(j);
    }
    history_http_digest(&h);
    cJSON *ev = runner_rev_begin(s, "http");
    cJSON_AddStringToObject(ev, "method", method);
    cJSON_AddStringToObject(ev, "path", path);
    if (name != NULL)
        cJSON_AddStringToObject(ev, "name", name);
    if (key != NULL)
        cJSON_AddStringToObject(ev, "key", key);
    cJSON_AddNumberToObject(ev, "status", h.status);
    if (h.status == 0)
        cJSON_AddStringToObject(ev, "error", h.error);
    if (h.payment_id[0])
        cJSON_AddStringToObject(ev, "payment_id", h.payment_id);
    cwlog_add_int64(ev, "duration_us", h.t1_us - h.t0_us);
    runner_rev_emit(s, ev);
    if (out != NULL) {
        *out = h;
        out->body = strdup(h.body);
    }
    http_log_add(s, &h);
    return h.status != 0 ? resp.retry_after_s : -1;
}

/* A runner event for a request sent again: its path, key, the Retry-After
 * it honoured (-1: none) and which retry it is. */
static void log_retry(struct sctx *s, const char *event, const char *path, const char *key,
                      int retry_after_s, int retry)
{
    cJSON *ev = runner_rev_begin(s, event);
    cJSON_AddStringToObject(ev, "path", path);
    if (key != NULL)
        cJSON_AddStringToObject(ev, "key", key);
    if (retry_after_s >= 0)
        cJSON_AddNumberToObject(ev, "retry_after_s", retry_after_s);
    cJSON_AddNumberToObject(ev, "retry", retry);
    runner_rev_emit(s, ev);
}

/* do_http as the article's client sends it: an answer that says when to
 * come back (Retry-After) -- a 503, or a 409 while another request with the
 * same key or on the same payment is in flight -- is sent again with the
 * same key and body after that delay (capped), up to busy_retries times,
 * within the scenario's deadline.  A 409 without Retry-After (an illegal
 * transition, a key reused with another body) is final.  A request sent
 * whose answer did not come within timeout_ms is sent again with its key,
 * up to timeout_retries times (a connection refused or closed is final:
 * that is a crash, which a scenario restarts).  Each answer is its own
 * record, judged like any other; out gets the last. */
static void do_http_client(struct sctx *s, int port, int step, const char *name,
                           const char *method, const char *path, const char *key,
                           const cJSON *extra_headers, const char *body, int timeout_ms,
                           int busy_retries, int timeout_retries, struct http_rec *out)
{
    int ra = do_http(s, port, step, name, method, path, key, extra_headers, body, timeout_ms,
                     out);
    for (int k = 0; k < timeout_retries && out->status == 0 &&
                    strstr(out->error, "waiting for the response") != NULL; k++) {
        if (cw_mono_ms() + timeout_ms > s->deadline || runner_interrupted())
            return;
        log_retry(s, "http_timeout_retry", path, key, -1, k + 1);
        free(out->body);
        ra = do_http(s, port, step, name, method, path, key, extra_headers, body, timeout_ms,
                     out);
    }
    for (int k = 0; k < busy_retries && (out->status == 503 || out->status == 409) && ra >= 0;
         k++) {
        int64_t wait_ms = (int64_t)ra * 1000;
        if (wait_ms > SC_BUSY_WAIT_MAX_MS)
            wait_ms = SC_BUSY_WAIT_MAX_MS;
        int64_t until = cw_mono_ms() + wait_ms;
        if (until + timeout_ms > s->deadline)
            return;
        while (cw_mono_ms() < until && !runner_interrupted())
            nap(20);
        if (runner_interrupted())
            return;
        log_retry(s, "http_busy_retry", path, key, ra, k + 1);
        free(out->body);
        ra = do_http(s, port, step, name, method, path, key, extra_headers, body, timeout_ms,
                     out);
    }
}

static const struct http_rec *http_find(struct sctx *s, const char *name)
{
    for (int i = s->http.n - 1; i >= 0; i--)
        if (strcmp(s->http.recs[i].name, name) == 0)
            return &s->http.recs[i];
    return NULL;
}

/* Replaces {NAME.id} in path with the payment id the named request got. */
static int expand_path(struct sctx *s, const char *path, char *out, size_t outlen)
{
    size_t n = 0;
    for (const char *p = path; *p && n + 1 < outlen;) {
        if (*p == '{') {
            const char *end = strchr(p, '}');
            const char *dot = end ? memchr(p, '.', (size_t)(end - p)) : NULL;
            if (end != NULL && dot != NULL && strncmp(dot, ".id}", 4) == 0) {
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int)(dot - p - 1), p + 1);
                const struct http_rec *h = http_find(s, name);
                if (h == NULL || h->payment_id[0] == '\0')
                    return runner_fail(s, "path %s: request '%s' gave no payment id", path, name);
                n += (size_t)snprintf(out + n, outlen - n, "%s", h->payment_id);
                p = end + 1;
                continue;
            }
        }
        out[n++] = *p++;
    }
    out[n] = '\0';
    return 0;
}

struct pay_job {
    struct sctx *s;
    const struct sc_step *st;
    int port;
    int step;
    int worker;
    int created, failed;
};

/* The workers of one payments step: in the background, the scenario
 * keeps it until the heal phase joins it. */
struct pay_run {
    struct pay_job jobs[64];
    pthread_t th[64];
    int started;
    int inline_run;         /* concurrency 1, in the runner's own thread */
};

/* One operation of a target's workload (op, templates filled with key,
 * amount and aggregate), as the runner's client: recorded like any request,
 * named "create" or "follow_up".  The record's copy goes to out. */
static void target_op(struct pay_job *j, const struct tg_operation *op, const char *name,
                      const char *key, const char *amount, const char *aggregate,
                      struct http_rec *out)
{
    struct tg_vars v = { 0 };
    char seq[16], err[256], path[512], body[4096] = "";
    snprintf(seq, sizeof(seq), "%d", j->s->http.n + 1);
    tg_vars_set(&v, "key", key);
    tg_vars_set(&v, "amount", amount);
    tg_vars_set(&v, "aggregate", aggregate ? aggregate : "");
    tg_vars_set(&v, "seq", seq);
    cJSON *headers = cJSON_CreateObject();
    cJSON *b = op->body ? cJSON_Duplicate(op->body, 1) : NULL;
    int ok = target_expand(op->path, &v, path, sizeof(path), err, sizeof(err)) == 0;
    for (int i = 0; ok && i < op->nheaders; i++) {
        char value[256];
        ok = target_expand(op->header_value[i], &v, value, sizeof(value), err, sizeof(err)) == 0;
        cJSON_AddStringToObject(headers, op->header_name[i], value);
    }
    ok = ok && (b == NULL || target_fill_json(b, &v, err, sizeof(err)) == 0);
    if (ok && b != NULL) {
        char *text = cJSON_PrintUnformatted(b);
        snprintf(body, sizeof(body), "%s", text ? text : "");
        cJSON_free(text);
    }
    if (!ok) {
        /* Placeholders are checked at load: only a value too long gets here. */
        runner_fail(j->s, "workload %s: %s", name, err);
        memset(out, 0, sizeof(*out));
        out->body = strdup("");
    } else {
        do_http_client(j->s, j->port, j->step, name, op->method, path, NULL, headers,
                       b != NULL ? body : NULL, j->st->timeout_ms, j->st->busy_retries,
                       j->st->timeout_retries, out);
    }
    cJSON_Delete(b);
    cJSON_Delete(headers);
}

/* The payments step against a target: each payment its create operation
 * (and follow-up when the step asks for authorize), retried with the same
 * key as the step says. */
static void target_payment(struct pay_job *j, int i)
{
    const struct sc_step *st = j->st;
    const struct target *t = j->s->run->target;
    char key[160], amount[32];
    snprintf(key, sizeof(key), "%s-%d", st->key_prefix, i + 1);
    if (st->amount != NULL)
        snprintf(amount, sizeof(amount), "%s", st->amount);
    else
        snprintf(amount, sizeof(amount), "%d.%02d", 10 + i % 90, (i * 37) % 100);
    struct http_rec h;
    target_op(j, &t->create, "create", key, amount, NULL, &h);
    for (int k = 0; k < st->retries; k++) {
        struct http_rec again;
        target_op(j, &t->create, "create", key, amount, NULL, &again);
        free(again.body);
    }
    int acked = 0;
    for (int k = 0; k < t->create.nack; k++)
        acked |= h.status == t->create.ack_status[k];
    if (!acked || h.payment_id[0] == '\0') {
        j->failed++;
        free(h.body);
        return;
    }
    j->created++;
    if (st->authorize || st->capture) {
        char k2[200];
        snprintf(k2, sizeof(k2), "%s-follow", key);
        struct http_rec h2;
        target_op(j, &t->follow_up, "follow_up", k2, amount, h.payment_id, &h2);
        int ok = 0;
        for (int k = 0; k < t->follow_up.nack; k++)
            ok |= h2.status == t->follow_up.ack_status[k];
        j->failed += !ok;
        free(h2.body);
    }
    free(h.body);
}

static void *pay_worker(void *arg)
{
    struct pay_job *j = arg;
    const struct sc_step *st = j->st;
    if (j->s->run->target != NULL) {
        for (int i = j->worker; i < st->count && !runner_interrupted(); i += st->concurrency)
            target_payment(j, i);
        return NULL;
    }
    for (int i = j->worker; i < st->count && !runner_interrupted(); i += st->concurrency) {
        char key[160], body[160], amount[32];
        snprintf(key, sizeof(key), "%s-%d", st->key_prefix, i + 1);
        if (st->amount != NULL)
            snprintf(amount, sizeof(amount), "%s", st->amount);
        else
            snprintf(amount, sizeof(amount), "%d.%02d", 10 + i % 90, (i * 37) % 100);
        snprintf(body, sizeof(body), "{\"amount\":\"%s\",\"currency\":\"%s\"}", amount,
                 st->currency);
        struct http_rec h;
        do_http_client(j->s, j->port, j->step, NULL, "POST", "/payments", key, NULL, body,
                       st->timeout_ms, st->busy_retries, st->timeout_retries, &h);
        for (int k = 0; k < st->retries; k++) {
            do_http(j->s, j->port, j->step, NULL, "POST", "/payments", key, NULL, body,
                    st->timeout_ms, NULL);
        }
        if (h.status < 200 || h.status > 299 || h.payment_id[0] == '\0') {
            j->failed++;
            free(h.body);
            continue;
        }
        j->created++;
        const char *verbs[2] = { "authorize", "capture" };
        int nverbs = st->capture ? 2 : st->authorize ? 1 : 0;
        for (int v = 0; v < nverbs; v++) {
            char path[160], k2[200];
            snprintf(path, sizeof(path), "/payments/%s/%s", h.payment_id, verbs[v]);
            snprintf(k2, sizeof(k2), "%s-%s", key, verbs[v]);
            struct http_rec h2;
            do_http_client(j->s, j->port, j->step, NULL, "POST", path, k2, NULL, "{}",
                           st->timeout_ms, st->busy_retries, st->timeout_retries, &h2);
            int ok = h2.status >= 200 && h2.status < 300;
            free(h2.body);
            if (!ok) {
                j->failed++;
                break;
            }
        }
        free(h.body);
    }
    return NULL;
}

/* ---- waits -------------------------------------------------------------- */

/* The last fault_hit of incarnation pid in path: its point, or "". */
static void last_fault_hit(const char *path, int pid, char *point, size_t len)
{
    point[0] = '\0';
    cJSON *evs = evlog_read(path, NULL);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        double p = 0;
        ev_num(ev, "pid", &p);
        if ((int)p != pid || strcmp(ev_name(ev), "fault_hit") != 0)
            continue;
        const char *pt = ev_str(ev, "point");
        snprintf(point, len, "%s", pt ? pt : "");
    }
    cJSON_Delete(evs);
}

/* One evaluation of a wait condition: 1 met, 0 not yet, -1 never will be
 * (the process it waits on is gone).  last describes the current state. */
static int wait_check(struct sctx *s, const struct sc_step *st, char *last, size_t lastlen)
{
    char err[256];
    struct proc *p = st->proc >= 0 ? &s->procs[st->proc] : NULL;
    long long v;
    switch (st->until) {
    case U_EXITED:
        if (!proc_poll(p)) {
            proc_exit_text(p, last, lastlen);
            return 1;
        }
        snprintf(last, lastlen, "running, state %c", proc_state(p->pid));
        return 0;
    case U_PARKED:
        if (!proc_poll(p)) {
            char how[64];
            proc_exit_text(p, how, sizeof(how));
            snprintf(last, lastlen, "%s (%s) instead of parking", p->name, how);
            return -1;
        }
        if (!proc_stopped(p)) {
            snprintf(last, lastlen, "running, state %c", proc_state(p->pid));
            return 0;
        }
        if (st->point != NULL) {
            char pt[96];
            last_fault_hit(p->events_path, p->pid, pt, sizeof(pt));
            if (strcmp(pt, st->point) != 0) {
                snprintf(last, lastlen, "stopped, last fault hit '%s'", pt);
                return 0;
            }
        }
        s->count.pauses++;
        snprintf(last, lastlen, "parked");
        return 1;
    case U_EVENT: {
        const char *path = p ? p->events_path : s->broker.events_path;
        int n = evlog_count(path, st->event, st->where_key, st->where_value);
        snprintf(last, lastlen, "%d x %s", n, st->event);
        if (n >= st->count)
            return 1;
        if (p != NULL && !proc_poll(p)) {
            /* Exited: a last look, since it may have logged before dying. */
            n = evlog_count(path, st->event, st->where_key, st->where_value);
            if (n >= st->count)
                return 1;
            char how[64];
            proc_exit_text(p, how, sizeof(how));
            snprintf(last, lastlen, "%d x %s, and %s exited (%s)", n, st->event, p->name, how);
            return -1;
        }
        return 0;
    }
    case U_PUBLISHED:
        if (s->run->target != NULL) {
            v = runner_target_count(s, U_PUBLISHED, NULL, err, sizeof(err));
            snprintf(last, lastlen, "%lld published", v);
            return v >= st->count;
        }
        v = runner_sql_value(s,
            "SELECT count(*) FROM outbox_messages WHERE published_at IS NOT NULL",
            0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld published", v);
        return v >= st->count;
    case U_CONSUMED: {
        if (s->run->target != NULL) {
            v = runner_target_count(s, U_CONSUMED, st->consumer, err, sizeof(err));
            snprintf(last, lastlen, "%lld consumed", v);
            return v >= st->count;
        }
        const char *prm[1] = { st->consumer };
        v = runner_sql_value(s,
            "SELECT count(*) FROM inbox_messages WHERE consumer_name = $1",
            1, prm, err, sizeof(err));
        snprintf(last, lastlen, "%lld consumed", v);
        return v >= st->count;
    }
    case U_DEAD_LETTERED:
        v = runner_sql_value(s,
            "SELECT count(*) FROM outbox_messages WHERE dead_lettered_at IS NOT NULL",
            0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld dead-lettered", v);
        return v >= st->count;
    case U_LEASE_EXPIRED:
        v = runner_sql_value(s,
            "SELECT count(*) FROM outbox_messages"
            " WHERE published_at IS NULL AND dead_lettered_at IS NULL"
            "   AND lock_id IS NOT NULL AND locked_until < now()", 0, NULL, err, sizeof(err));
        snprintf(last, lastlen, "%lld expired leases", v);
        return v >= st->count;
    case U_QUIET:
        if (runner_pipeline_quiet(s, last, lastlen)) {
            snprintf(last, lastlen, "quiet");
            return 1;
        }
        return 0;
    case U_SQL:
        v = runner_sql_value(s, st->sql, 0, NULL, err, sizeof(err));
        if (v < 0 && err[0] != '\0') {
            snprintf(last, lastlen, "sql failed: %s", err);
            /* A statement that fails is the scenario's mistake; a server
             * that went away (a "db" step) is only not back yet: the next
             * poll connects again. */
            return s->db.conn == NULL || PQstatus(s->db.conn) != CONNECTION_OK ? 0 : -1;
        }
        snprintf(last, lastlen, "value %lld", v);
        return v >= st->count;
    }
    return -1;
}

static int step_wait(struct sctx *s, const struct sc_step *st)
{
    char what[512], last[512] = "";
    scenario_step_describe(s->sc, st, what, sizeof(what));
    int64_t start = cw_mono_ms();
    int64_t deadline = start + st->timeout_ms;
    if (s->run->o->wait_cap_ms > 0 && st->timeout_ms > s->run->o->wait_cap_ms)
        deadline = start + s->run->o->wait_cap_ms;
    if (deadline > s->deadline)
        deadline = s->deadline;
    struct progress_watch progress = { .mark = -2 };
    int64_t ask_at = start + RUNNER_DECIDE_AFTER_MS;
    for (;;) {
        int r = wait_check(s, st, last, sizeof(last));
        runner_reap_all(s);
        if (r == 1) {
            cJSON *ev = runner_rev_begin(s, "wait_done");
            cJSON_AddStringToObject(ev, "until", sc_until_name(st->until));
            cJSON_AddNumberToObject(ev, "waited_ms", (double)(cw_mono_ms() - start));
            runner_rev_emit(s, ev);
            return 0;
        }
        if (runner_interrupted())
            return runner_fail(s, "%s: interrupted", what);
        /* On a target, a count of messages the mapping shows that never
         * comes is no error of the run: the target lost or left them, and
         * the checker names each (nothing_lost), where a known finding may
         * explain them.  Like a target that does not converge at the heal. */
        int target_count = s->run->target != NULL &&
                           (st->until == U_CONSUMED || st->until == U_PUBLISHED);
        /* A target whose mapping stopped changing for as long as its
         * profile says it may: the count will not come either. */
        int stalled = target_count && r == 0 && runner_target_stalled(s, &progress);
        if ((r < 0 || stalled || cw_mono_ms() >= deadline) &&
            (st->wait_continue || target_count)) {
            /* An anchor, not a requirement: a schedule waits for a moment
             * that may not come (a park a crash pre-empted) and goes on. */
            if (stalled)
                runner_progress(s, "%s: no progress for %d ms (last: %s): the checker decides",
                                what, s->run->target->progress_timeout_ms, last);
            else if (target_count)
                runner_progress(s, "%s: timed out after %lld ms (last: %s): the checker decides",
                                what, (long long)(cw_mono_ms() - start), last);
            cJSON *ev = runner_rev_begin(s, "wait_timeout");
            cJSON_AddStringToObject(ev, "until", sc_until_name(st->until));
            cJSON_AddNumberToObject(ev, "waited_ms", (double)(cw_mono_ms() - start));
            cJSON_AddStringToObject(ev, "last", last);
            if (stalled)
                cJSON_AddNumberToObject(ev, "no_progress_ms",
                                        s->run->target->progress_timeout_ms);
            runner_rev_emit(s, ev);
            return 0;
        }
        if (r < 0)
            return runner_fail(s, "%s: gave up: %s", what, last);
        if (cw_mono_ms() >= deadline)
            return runner_fail(s, "%s: timed out after %lld ms (last: %s)", what,
                               (long long)(cw_mono_ms() - start), last);
        /* A mutant's run whose wait has gone on a while: once an invariant
         * no later event can undo has failed, what the wait is for cannot
         * change its verdict. */
        char decided[400];
        if (cw_mono_ms() >= ask_at) {
            ask_at = cw_mono_ms() + RUNNER_DECIDE_AFTER_MS;
            if (runner_verdict_decided(s, decided, sizeof(decided)))
                return runner_fail(s, "%s: stopped after %lld ms (last: %s), with the verdict "
                                   "decided: %s", what, (long long)(cw_mono_ms() - start), last,
                                   decided);
        }
        nap(POLL_MS);
    }
}

/* ---- steps -------------------------------------------------------------- */

static int step_start(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (st->verb == V_RESTART && proc_poll(p)) {
        runner_rev_proc(s, "stop", p->name, p->pid, "signal", "SIGTERM");
        if (proc_stop(p, STOP_TIMEOUT_MS) == 1)
            runner_rev_proc(s, "kill", p->name, p->pid, "why", "did not stop on SIGTERM");
        runner_reap_all(s);
    }
    return runner_start_proc(s, st->proc, st->faults);
}

static int step_signal(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p)) {
        char how[64];
        proc_exit_text(p, how, sizeof(how));
        return runner_fail(s, "%s %s: it is not running (%s)", sc_verb_name(st->verb), p->name,
                           how);
    }
    int pid = p->pid;
    switch (st->verb) {
    case V_STOP: {
        runner_rev_proc(s, "stop", p->name, pid, "signal", "SIGTERM");
        if (proc_stop(p, st->timeout_ms) == 1)
            runner_rev_proc(s, "kill", p->name, pid, "why", "did not stop on SIGTERM");
        runner_reap_all(s);
        return 0;
    }
    case V_KILL:
        runner_rev_proc(s, "kill", p->name, pid, "signal", "SIGKILL");
        if (proc_kill(p) < 0)
            return runner_fail(s, "%s (pid %d) did not die on SIGKILL", p->name, pid);
        runner_reap_all(s);
        return 0;
    case V_PAUSE: {
        runner_rev_proc(s, "pause", p->name, pid, "signal", "SIGSTOP");
        proc_signal(p, SIGSTOP);
        int64_t deadline = cw_mono_ms() + st->timeout_ms;
        while (!proc_stopped(p)) {
            if (!proc_poll(p) || cw_mono_ms() >= deadline)
                return runner_fail(s, "%s did not stop on SIGSTOP (state %c)", p->name,
                                   proc_state(p->pid));
            nap(2);
        }
        s->count.pauses++;
        return 0;
    }
    case V_RESUME: {
        runner_rev_proc(s, "resume", p->name, pid, "signal", "SIGCONT");
        proc_signal(p, SIGCONT);
        int64_t deadline = cw_mono_ms() + st->timeout_ms;
        while (proc_stopped(p)) {
            if (cw_mono_ms() >= deadline)
                return runner_fail(s, "%s stayed stopped after SIGCONT", p->name);
            nap(2);
        }
        return 0;
    }
    default:
        return runner_fail(s, "not a signal step");
    }
}

/* The failinfo fiu-ctrl passes for an action, in the encoding fault_fire
 * (src/core/fault.c) decodes: crash 0, fail 1, park 2, stall:MS the MS.
 * The action was validated at load by the same parser. */
static int action_failinfo(const char *action)
{
    enum fault_action a;
    long ms;
    if (fault_parse_action(action, &a, &ms) < 0)
        return 0;
    return a == FAULT_STALL ? (int)ms : (int)a;
}

static int step_fault(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p))
        return runner_fail(s, "fault: %s is not running", p->name);
    if (proc_stopped(p))
        return runner_fail(s, "fault: %s is stopped; libfiu's remote control cannot reach it "
                           "(resume it first)", p->name);
    char cmd[192], err[1200];
    if (st->disable)
        snprintf(cmd, sizeof(cmd), "disable name=%s", st->point);
    else
        snprintf(cmd, sizeof(cmd), "enable name=%s,failinfo=%d", st->point,
                 action_failinfo(st->action));
    if (runner_fiu_ctrl(p, cmd, 5000, err, sizeof(err)) < 0)
        return runner_fail(s, "%s", err);
    if (st->disable) {
        for (int i = 0; i < s->armed.n; i++)
            if (s->armed.list[i].proc == st->proc && s->armed.list[i].pid == p->pid &&
                strcmp(s->armed.list[i].point, st->point) == 0)
                s->armed.list[i].disabled = 1;
    } else if (s->armed.n < MAX_ARMED) {
        struct armed *a = &s->armed.list[s->armed.n++];
        memset(a, 0, sizeof(*a));
        a->proc = st->proc;
        a->pid = p->pid;
        a->runtime = 1;
        snprintf(a->point, sizeof(a->point), "%s", st->point);
        snprintf(a->action, sizeof(a->action), "%s", st->action);
    }
    cJSON *ev = runner_rev_begin(s, "fault");
    cJSON_AddStringToObject(ev, "target", p->name);
    cJSON_AddNumberToObject(ev, "target_pid", p->pid);
    cJSON_AddStringToObject(ev, "point", st->point);
    cJSON_AddStringToObject(ev, "command", cmd);
    runner_rev_emit(s, ev);
    return 0;
}

static int step_http(struct sctx *s, const struct sc_step *st)
{
    char path[512];
    if (expand_path(s, st->path, path, sizeof(path)) < 0)
        return -1;
    struct proc *p = &s->procs[st->proc];
    int port = proc_poll(p) ? s->port[st->proc] : 0;
    struct http_rec h;
    do_http(s, port, s->step, st->name, st->method, path, st->key, st->headers, st->body,
            st->timeout_ms, &h);
    if (h.status == 0)
        runner_progress(s, "  -> no response: %s", h.error);
    else
        runner_progress(s, "  -> HTTP %d %.100s", h.status, h.body);
    char check[64], detail[600];
    if (st->expect_status != 0) {
        snprintf(check, sizeof(check), "steps[%d].expect_status", s->step);
        cw_fmt(detail, sizeof(detail), "%s %s got %d%s%s (want %d)", st->method, path,
                 h.status, h.status ? "" : ": ", h.status ? "" : h.error, st->expect_status);
        runner_add_expect(s, check, h.status == st->expect_status, detail);
    }
    if (st->same_as != NULL) {
        const struct http_rec *ref = NULL;
        for (int i = 0; i < s->http.n - 1; i++)
            if (strcmp(s->http.recs[i].name, st->same_as) == 0)
                ref = &s->http.recs[i];
        snprintf(check, sizeof(check), "steps[%d].same_as", s->step);
        int same = ref != NULL && ref->status == h.status && strcmp(ref->body, h.body) == 0;
        snprintf(detail, sizeof(detail), "%s: HTTP %d %.200s; %s: HTTP %d %.200s",
                 st->same_as, ref ? ref->status : 0, ref ? ref->body : "",
                 st->name ? st->name : "this request", h.status, h.body);
        runner_add_expect(s, check, same, detail);
    }
    free(h.body);
    return 0;
}

/* Waits for the workers of a payments step and reports what they did. */
static void payments_join(struct sctx *s, struct pay_run *pr)
{
    for (int w = 0; w < pr->started; w++)
        pthread_join(pr->th[w], NULL);
    int created = 0, failed = 0;
    int nw = pr->inline_run ? 1 : pr->started;
    for (int w = 0; w < nw; w++) {
        created += pr->jobs[w].created;
        failed += pr->jobs[w].failed;
    }
    runner_progress(s, "  -> %d payments created, %d requests without success", created, failed);
    cJSON *ev = runner_rev_begin(s, "payments");
    cJSON_AddNumberToObject(ev, "created", created);
    cJSON_AddNumberToObject(ev, "failed", failed);
    runner_rev_emit(s, ev);
    pr->started = 0;
    pr->inline_run = 0;
}

void runner_payments_join(struct sctx *s)
{
    if (s->http.background == NULL)
        return;
    payments_join(s, s->http.background);
    free(s->http.background);
    s->http.background = NULL;
}

static int step_payments(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    if (!proc_poll(p))
        return runner_fail(s, "payments: %s is not running", p->name);
    if (st->background && s->http.background != NULL)
        return runner_fail(s, "payments: a background payments step is still running");
    struct pay_run *pr = calloc(1, sizeof(*pr));
    if (pr == NULL)
        return runner_fail(s, "payments: out of memory");
    for (int w = 0; w < st->concurrency; w++) {
        struct pay_job *j = &pr->jobs[w];
        j->s = s;
        j->st = st;
        j->port = s->port[st->proc];
        j->step = s->step;
        j->worker = w;
        if (st->concurrency == 1 && !st->background) {
            pay_worker(j);
            pr->inline_run = 1;
            break;
        }
        if (pthread_create(&pr->th[w], NULL, pay_worker, j) != 0)
            break;
        pr->started++;
    }
    if (st->background) {
        s->http.background = pr;
        return 0;
    }
    payments_join(s, pr);
    free(pr);
    return 0;
}

static int step_broker(struct sctx *s, const struct sc_step *st)
{
    char err[512];
    if (runner_rabbit(s->run) && runner_rabbit_can_control(st->control)) {
        if (runner_rabbit_close_connections(s) < 0)
            return -1;
    } else if (brokerctl_control(s->broker_sock, st->control, 3000, err, sizeof(err)) < 0) {
        return runner_fail(s, "broker control: %s", err);
    }
    runner_rev_broker_control(s, st->control);
    return 0;
}

static int step_sql(struct sctx *s, const struct sc_step *st)
{
    char err[512], state[6];
    if (s->db.conn == NULL || PQstatus(s->db.conn) != CONNECTION_OK) {
        if (runner_connect(s, err, sizeof(err)) < 0)
            return runner_fail(s, "sql: %s", err);
    }
    PGresult *r = pgx_exec(s->db.conn, st->sql, 0, NULL, state, err, sizeof(err));
    if (r == NULL)
        return runner_fail(s, "sql failed (%s): %s", state, err);
    long rows = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : atol(PQcmdTuples(r));
    PQclear(r);
    runner_progress(s, "  -> %ld rows", rows);
    if (st->expect_rows >= 0) {
        char check[64], detail[128];
        snprintf(check, sizeof(check), "steps[%d].expect_rows", s->step);
        snprintf(detail, sizeof(detail), "%ld rows (want %d)", rows, st->expect_rows);
        runner_add_expect(s, check, rows == st->expect_rows, detail);
    }
    cJSON *ev = runner_rev_begin(s, "sql");
    cJSON_AddNumberToObject(ev, "rows", (double)rows);
    runner_rev_emit(s, ev);
    return 0;
}

/* The step's expect_output: what (its output, a page) must hold want. */
static int expect_output(struct sctx *s, const char *what, const char *out, const char *want)
{
    char check[64], detail[400];
    int found = strstr(out, want) != NULL;
    snprintf(check, sizeof(check), "steps[%d].expect_output", s->step);
    snprintf(detail, sizeof(detail), "%s %s \"%s\"", what, found ? "contains" : "lacks", want);
    runner_add_expect(s, check, found, detail);
    return found;
}

static int step_outboxctl(struct sctx *s, const struct sc_step *st)
{
    char *argv[24];
    int n = 0;
    argv[n++] = s->run->exe_outboxctl;
    for (int i = 0; i < st->argc; i++)
        argv[n++] = (char *)st->argv[i];
    argv[n] = NULL;
    char out[16384];
    const char *env[] = { s->db.env, NULL };
    int rc = proc_run_capture(argv, env, st->timeout_ms, out, sizeof(out));
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/outboxctl.step%d.log", s->dir, s->step + 1);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(out, f);
        fclose(f);
    }
    char first[200];
    cw_fmt(first, sizeof(first), "%s", out);
    first[strcspn(first, "\n")] = '\0';
    runner_progress(s, "  -> exit %d: %s", rc, first);
    cJSON *ev = runner_rev_begin(s, "outboxctl");
    cJSON *args = cJSON_CreateArray();
    for (int i = 0; i < st->argc; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(st->argv[i]));
    cJSON_AddItemToObject(ev, "args", args);
    cJSON_AddNumberToObject(ev, "exit", rc);
    runner_rev_emit(s, ev);
    if (rc < 0)
        return runner_fail(s, "outboxctl: %s", out);
    char check[64], detail[400];
    if (st->expect_exit >= 0) {
        snprintf(check, sizeof(check), "steps[%d].expect_exit", s->step);
        snprintf(detail, sizeof(detail), "outboxctl exited %d (want %d): %.200s", rc,
                 st->expect_exit, first);
        runner_add_expect(s, check, rc == st->expect_exit, detail);
    }
    if (st->expect_output != NULL)
        expect_output(s, "output", out, st->expect_output);
    return 0;
}

/* The address the process's current incarnation serves /metrics on, from
 * its metrics_listening event: its port on the loopback, or -1. */
static int metrics_port(const struct proc *p)
{
    int bad = 0, port = -1;
    cJSON *evs = evlog_read(p->events_path, &bad);
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        double pid;
        const char *name = ev_name(ev), *addr = ev_str(ev, "address");
        if (name == NULL || strcmp(name, "metrics_listening") != 0 || addr == NULL ||
            ev_num(ev, "pid", &pid) < 0 || (pid_t)pid != p->pid)
            continue;
        const char *colon = strrchr(addr, ':');
        if ((strncmp(addr, "127.0.0.1:", 10) == 0 || strncmp(addr, "localhost:", 10) == 0) &&
            colon != NULL)
            port = atoi(colon + 1);
    }
    cJSON_Delete(evs);
    return port > 0 && port < 65536 ? port : -1;
}

/* A scrape's series judged as an expectation: the line "SERIES VALUE" of
 * the page (the exposition format's sample line; a timestamp after the
 * value is allowed and not read) and its value within the step's bounds. */
static void expect_series(struct sctx *s, const char *what, const char *page,
                          const struct sc_step *st)
{
    char check[64], detail[400], bounds[64];
    size_t n = strlen(st->series);
    const char *line = page, *value = NULL;
    while (line != NULL && *line != '\0') {
        if (strncmp(line, st->series, n) == 0 && line[n] == ' ') {
            value = line + n + 1;
            break;
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    sc_series_bounds(st, bounds, sizeof(bounds));
    snprintf(check, sizeof(check), "steps[%d].series", s->step);
    if (value == NULL) {
        snprintf(detail, sizeof(detail), "%s lacks the series %s (want %s)", what, st->series,
                 bounds);
        runner_add_expect(s, check, 0, detail);
        return;
    }
    char *end;
    double v = strtod(value, &end);
    int ok = end != value && (*end == '\n' || *end == '\0' || *end == ' ') &&
             (st->series_min < 0 || v >= st->series_min) &&
             (st->series_max < 0 || v <= st->series_max);
    snprintf(detail, sizeof(detail), "%s has %s %.*s (want %s)", what, st->series,
             (int)strcspn(value, "\n"), value, bounds);
    runner_add_expect(s, check, ok, detail);
    runner_progress(s, "  -> %s %.*s", st->series, (int)strcspn(value, "\n"), value);
}

/* scrape: one GET /metrics, as Prometheus would, kept in the scenario's
 * directory and judged as an expectation. */
static int step_scrape(struct sctx *s, const struct sc_step *st)
{
    struct proc *p = &s->procs[st->proc];
    int port = -1;
    int64_t until = cw_mono_ms() + st->timeout_ms;
    /* The event comes once the listener is bound, just after a (re)start. */
    while ((port = metrics_port(p)) < 0 && cw_mono_ms() < until && !runner_interrupted())
        runner_hold(20);
    if (port < 0)
        return runner_fail(s, "scrape %s: no metrics_listening event on the loopback from its "
                           "running incarnation within %d ms", p->name, st->timeout_ms);
    struct http_resp r;
    http_request(port, "GET", "/metrics", NULL, NULL, st->timeout_ms, &r);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s.scrape.step%d.txt", s->dir, p->name, s->step + 1);
    FILE *f = fopen(path, "w");
    if (f != NULL) {
        fputs(r.body, f);
        fclose(f);
    }
    if (r.status != 200) {
        char why[200];
        cw_fmt(why, sizeof(why), "%s", r.status == 0 ? r.error : "");
        int status = r.status;
        http_resp_free(&r);
        return runner_fail(s, "scrape %s: GET /metrics answered %d %s", p->name, status, why);
    }
    char page[SC_NAME_MAX + 16];
    snprintf(page, sizeof(page), "%s's /metrics", p->name);
    if (st->expect_output != NULL) {
        int found = expect_output(s, page, r.body, st->expect_output);
        runner_progress(s, "  -> %zu bytes, %s \"%s\"", r.body_len, found ? "with" : "without",
                        st->expect_output);
    }
    if (st->series != NULL)
        expect_series(s, page, r.body, st);
    http_resp_free(&r);
    return 0;
}

/* sleep: time passes, in poll-sized naps so that an interruption or the
 * scenario's deadline ends it early (the latter as the scenario's error). */
static int step_sleep(struct sctx *s, const struct sc_step *st)
{
    int64_t start = cw_mono_ms();
    int64_t until = start + st->ms;
    for (;;) {
        int64_t now = cw_mono_ms();
        if (now >= until)
            break;
        if (runner_interrupted())
            return runner_fail(s, "sleep %d ms: interrupted", st->ms);
        if (now >= s->deadline)
            return runner_fail(s, "sleep %d ms: the scenario's deadline came first", st->ms);
        int64_t left = until - now;
        nap(left < POLL_MS ? (int)left : POLL_MS);
    }
    cJSON *ev = runner_rev_begin(s, "slept");
    cJSON_AddNumberToObject(ev, "ms", (double)(cw_mono_ms() - start));
    runner_rev_emit(s, ev);
    return 0;
}

int runner_run_step(struct sctx *s, const struct sc_step *st)
{
    switch (st->verb) {
    case V_START:
    case V_RESTART:
        return step_start(s, st);
    case V_STOP:
    case V_KILL:
    case V_PAUSE:
    case V_RESUME:
        return step_signal(s, st);
    case V_FAULT:
        return step_fault(s, st);
    case V_HTTP:
        return step_http(s, st);
    case V_PAYMENTS:
        return step_payments(s, st);
    case V_BROKER:
        return step_broker(s, st);
    case V_SQL:
        return step_sql(s, st);
    case V_OUTBOXCTL:
        return step_outboxctl(s, st);
    case V_DB:
        return runner_step_db(s, st);
    case V_BROKER_CRASH:
        return runner_step_broker_crash(s, st);
    case V_NET:
        return runner_net_step(s, st);
    case V_WAIT:
        return step_wait(s, st);
    case V_SLEEP:
        return step_sleep(s, st);
    case V_SCRAPE:
        return step_scrape(s, st);
    }
    return runner_fail(s, "unknown step");
}
