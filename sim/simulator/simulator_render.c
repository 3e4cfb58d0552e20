/* simulator_render.c -- rendering: a plan as the runner's scenario JSON;
 * see simulator.h.
 *
 * Rendering is a small state machine over the processes -- up or not, may
 * have crashed (a crash fault armed in this incarnation), paused by us,
 * holding a park fault -- that decides, step by step, whether an action can
 * be performed: a kill of a process that may already be dead would make the
 * step itself fail, and a failing step is not what the simulator looks for.
 * Such actions are left out, deterministically; shrinking relies on it,
 * since dropping one action can make a later one impossible. */
#include "simulator.h"
#include "simulator_internal.h"

#include <stdio.h>
#include <string.h>

void sim_scenario_name(uint64_t seed, uint64_t run, char *out, size_t outlen)
{
    snprintf(out, outlen, "sim-%llu-%llu", (unsigned long long)seed, (unsigned long long)run);
}

static const char *const group_names[] = { "accounting", "notifications" };

/* How long an anchor (the wait before a park's follow-up, or before a
 * requeue) waits for its moment: long enough for a schedule that gets there
 * to get there, short since some never do. */
#define SIM_ANCHOR_MS 3000

/* "api", "relay-2", "acct-1", "notif-2": ordinal among the same kind/group. */
void sim_proc_name(const struct sim_plan *p, int idx, char *out, size_t outlen)
{
    const struct sim_proc *x = &p->procs[idx];
    int ord = 1;
    for (int i = 0; i < idx; i++)
        if (p->procs[i].kind == x->kind && p->procs[i].group == x->group)
            ord++;
    switch (x->kind) {
    case SIM_API:
        snprintf(out, outlen, ord == 1 ? "api" : "api-%d", ord);
        break;
    case SIM_RELAY:
        snprintf(out, outlen, "relay-%d", ord);
        break;
    case SIM_CONSUMER:
        snprintf(out, outlen, "%s-%d", x->group ? "notif" : "acct", ord);
        break;
    }
}

/* The CW_FAULTS value of incarnation inc of proc into out ("" for none).
 * Returns the number of faults; *crashy says whether one may kill it,
 * *parks how many may park it. */
static int fault_spec(const struct sim_plan *p, int proc, int inc, char *out, size_t outlen,
                      int *crashy, int *parks, const char **park_point)
{
    if (park_point != NULL)
        *park_point = NULL;
    size_t n = 0;
    int count = 0;
    out[0] = '\0';
    *crashy = *parks = 0;
    for (int i = 0; i < p->nfaults; i++) {
        const struct sim_fault *f = &p->faults[i];
        if (f->proc != proc || f->incarnation != inc)
            continue;
        char act[32];
        if (f->action == SIM_STALL)
            snprintf(act, sizeof(act), "stall:%d", f->stall_ms);
        else
            snprintf(act, sizeof(act), "%s", sim_action_names[f->action]);
        int w = snprintf(out + n, outlen - n, "%s%s=%s@%d%s", count ? ";" : "", f->point, act,
                         f->hit, f->every ? "+" : "");
        if (w < 0 || (size_t)w >= outlen - n)
            break;
        n += (size_t)w;
        count++;
        *crashy |= f->action == SIM_CRASH;
        *parks += f->action == SIM_PARK;
        if (f->action == SIM_PARK && park_point != NULL)
            *park_point = f->point;
    }
    return count;
}

/* Per-process state while rendering. */
struct rstate {
    int up;        /* started and not killed by us */
    int crashy;    /* this incarnation may have crashed on its own */
    int parks;     /* park faults armed in this incarnation (each fires once) */
    int paused;    /* stopped by us */
    int faulty;    /* (API) this incarnation has faults */
    int spent;     /* (API) a payments batch already met those faults */
    const char *park_point; /* the point of its (last) park fault */
};

static cJSON *relay_args(const struct sim_proc *x)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "lease-ms", x->lease_ms);
    cJSON_AddNumberToObject(a, "idle-ms", x->idle_ms);
    cJSON_AddNumberToObject(a, "batch", x->batch);
    cJSON_AddNumberToObject(a, "backoff-base-ms", x->backoff_base_ms);
    cJSON_AddNumberToObject(a, "backoff-cap-ms", x->backoff_cap_ms);
    cJSON_AddNumberToObject(a, "max-attempts", x->max_attempts);
    if (x->per_aggregate)
        cJSON_AddStringToObject(a, "order", "per-aggregate");
    return a;
}

static cJSON *consumer_args(const struct sim_proc *x)
{
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "name", group_names[x->group]);
    cJSON_AddNumberToObject(a, "prefetch", x->prefetch);
    cJSON_AddNumberToObject(a, "batch", x->cbatch);
    cJSON_AddNumberToObject(a, "retry-delay-ms", x->retry_delay_ms);
    cJSON_AddNumberToObject(a, "gap-delay-ms", x->gap_delay_ms);
    if (x->gap_park_ms > 0)
        cJSON_AddNumberToObject(a, "gap-park-after-ms", x->gap_park_ms);
    if (x->bus_timeout_ms > 0)
        cJSON_AddNumberToObject(a, "bus-timeout-ms", x->bus_timeout_ms);
    return a;
}

/* The settle condition: every live event published and taken in by every
 * consumer group, or ms passed since the newest event (ms 0: no such
 * bound).  A bounded wait that ends at once when the pipeline has caught
 * up: the processes get time to walk into their armed faults before the
 * heal switches them off. */
static void settle_sql(const struct sim_plan *p, int ms, char *out, size_t outlen)
{
    int has[2] = { 0, 0 };
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == SIM_CONSUMER)
            has[p->procs[i].group] = 1;
    char groups[256] = "";
    size_t n = 0;
    for (int g = 0; g < 2; g++) {
        if (!has[g])
            continue;
        int w = snprintf(groups + n, sizeof(groups) - n,
                         " OR NOT EXISTS (SELECT 1 FROM inbox_messages i"
                         " WHERE i.message_id = o.id AND i.consumer_name = '%s')",
                         group_names[g]);
        if (w > 0 && (size_t)w < sizeof(groups) - n)
            n += (size_t)w;
    }
    char bound[128] = "";
    if (ms > 0)
        snprintf(bound, sizeof(bound), " OR clock_timestamp() - (SELECT max(occurred_at)"
                 " FROM outbox_messages) > interval '%d milliseconds'", ms);
    snprintf(out, outlen,
             "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM outbox_messages o"
             " WHERE o.dead_lettered_at IS NULL AND (o.published_at IS NULL%s))%s"
             " THEN 1 ELSE 0 END", groups, bound);
}

static cJSON *step(cJSON *steps, const char *verb)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "do", verb);
    cJSON_AddItemToArray(steps, s);
    return s;
}

/* What rendering carries from one action to the next. */
struct render_ctx {
    const struct sim_plan *p;
    cJSON *steps;
    struct rstate st[SIM_MAX_PROCS];
    int batch;         /* payments batches rendered so far */
    int batch_clean;   /* the last batch met an API without faults */
    int reuses;        /* reused-key requests rendered so far */
    /* A fault that makes the API answer errors or nothing (its PostgreSQL
     * link down, swallowing bytes, partitioned, or cut at a byte count) was
     * set: 2 until a payments batch has met it, then 1 until the next batch
     * clears it. */
    int api_link_faulted;
    int starts[SIM_MAX_PROCS]; /* starts rendered so far, per process */
};

static void render_pay(struct render_ctx *ctx, const struct sim_act *a)
{
    struct rstate *api = &ctx->st[0];
    cJSON *o;
    /* The API's faults meet one batch; the next one gets a fresh,
     * fault-free API (and so does any batch after a kill). */
    if (!api->up || (api->faulty && api->spent)) {
        o = step(ctx->steps, "restart");
        cJSON_AddStringToObject(o, "proc", "api");
        cJSON_AddStringToObject(o, "why", "a fresh API for the next batch");
        memset(api, 0, sizeof(*api));
        api->up = 1;
    }
    /* One batch meets a fault on the API's database link; the next one
     * gets the link back, so that some payments exist and the keys of a
     * clean batch hold committed ones. */
    int link_hit = ctx->api_link_faulted == 2;
    if (ctx->api_link_faulted == 1) {
        o = step(ctx->steps, "net");
        cJSON_AddStringToObject(o, "link", "api->pg");
        cJSON_AddBoolToObject(o, "clear", 1);
        cJSON_AddStringToObject(o, "why", "the API's database link back for the next batch");
    }
    ctx->api_link_faulted = link_hit;
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "b%d", ++ctx->batch);
    o = step(ctx->steps, "payments");
    cJSON_AddNumberToObject(o, "count", a->count);
    cJSON_AddStringToObject(o, "key_prefix", prefix);
    if (a->retries > 0)
        cJSON_AddNumberToObject(o, "retries", a->retries);
    if (a->authorize)
        cJSON_AddBoolToObject(o, "authorize", 1);
    if (a->capture)
        cJSON_AddBoolToObject(o, "capture", 1);
    api->spent = api->faulty;
    ctx->batch_clean = !api->faulty && !link_hit;
}

/* A request whose connection went silent waits out the database deadline
 * (PGX_DEFAULT_DEADLINE_MS, 5 s), then is settled on a new connection: a
 * bound with room for that and for a second silent connection. */
#define SIM_REUSE_TIMEOUT_MS 15000

static void render_reuse(struct render_ctx *ctx)
{
    /* Only after a batch the API served without faults, whose first key
     * therefore holds a committed payment, and to an API without faults:
     * anything else than 422 is then the API's mistake. */
    const struct rstate *api = &ctx->st[0];
    if (ctx->batch == 0 || !ctx->batch_clean || !api->up || api->faulty ||
        ctx->api_link_faulted)
        return;
    char rname[32], key[32];
    snprintf(rname, sizeof(rname), "reuse-%d", ++ctx->reuses);
    snprintf(key, sizeof(key), "b%d-1", ctx->batch);
    cJSON *o = step(ctx->steps, "http");
    cJSON_AddStringToObject(o, "name", rname);
    cJSON_AddStringToObject(o, "method", "POST");
    cJSON_AddStringToObject(o, "path", "/payments");
    cJSON_AddStringToObject(o, "key", key);
    cJSON *body = cJSON_AddObjectToObject(o, "body");
    cJSON_AddStringToObject(body, "amount", "77.77");
    cJSON_AddStringToObject(body, "currency", "EUR");
    cJSON_AddNumberToObject(o, "expect_status", 422);
    /* A fault on api->pg may have swallowed the API's connection: it then
     * answers once its database deadline has passed and a new connection
     * settled the request, later than the step's default 5 s. */
    cJSON_AddNumberToObject(o, "timeout_ms", SIM_REUSE_TIMEOUT_MS);
    cJSON_AddStringToObject(o, "why", "the same key with another body must be refused");
}

/* An anchor: a wait for the moment the next step must follow, which goes
 * on if that moment never comes.  The caller adds the condition's fields. */
static cJSON *render_anchor_ms(struct render_ctx *ctx, const char *until, int timeout_ms,
                               const char *why)
{
    cJSON *o = step(ctx->steps, "wait");
    cJSON_AddStringToObject(o, "until", until);
    cJSON_AddNumberToObject(o, "timeout_ms", timeout_ms);
    cJSON_AddStringToObject(o, "on_timeout", "continue");
    cJSON_AddStringToObject(o, "why", why);
    return o;
}

static cJSON *render_anchor(struct render_ctx *ctx, const char *until, const char *why)
{
    return render_anchor_ms(ctx, until, SIM_ANCHOR_MS, why);
}

static void render_settle(struct render_ctx *ctx, const struct sim_act *a)
{
    char sql[1024];
    if (a->caught_up) {
        /* Bounded by the wait's own timeout, not by the age of the newest
         * event: an API whose clock is behind writes events that look old
         * at once. */
        settle_sql(ctx->p, 0, sql, sizeof(sql));
        cJSON *o = render_anchor_ms(ctx, "sql", a->ms, "until the pipeline caught up, in "
                                                       "every replay");
        cJSON_AddStringToObject(o, "sql", sql);
        return;
    }
    settle_sql(ctx->p, a->ms, sql, sizeof(sql));
    cJSON *o = step(ctx->steps, "wait");
    cJSON_AddStringToObject(o, "until", "sql");
    cJSON_AddStringToObject(o, "sql", sql);
    cJSON_AddNumberToObject(o, "timeout_ms", a->ms + 10000);
    char why[96];
    snprintf(why, sizeof(why), "let the pipeline work: until it caught up, "
             "at most %d ms after the newest event", a->ms);
    cJSON_AddStringToObject(o, "why", why);
}

/* A wait for the run's first dead letter, which goes on without one. */
static void render_dead_letter_anchor(struct render_ctx *ctx, const char *why)
{
    cJSON *o = render_anchor(ctx, "dead_lettered", why);
    cJSON_AddNumberToObject(o, "count", 1);
}

/* Before a poison window closes: wait until no event is pending, each one
 * the window refuses dead-lettered and each one it lets through published.
 * Closed at the first dead letter, the window would let the refused events
 * still between attempts through, and which ones those are (so whether a
 * later version waits on a dead-lettered creation) would be a matter of
 * timing that a replay need not repeat.  The same wait before it opens:
 * the events of the batch before it are published first, so the window
 * refuses the events of its own batch, and not, in one replay but not the
 * next, whichever earlier ones a relay had not reached yet. */
static void render_nothing_pending_anchor(struct render_ctx *ctx, const char *why)
{
    cJSON *o = render_anchor(ctx, "sql", why);
    cJSON_AddStringToObject(o, "sql", "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM outbox_messages"
                                      " WHERE published_at IS NULL AND dead_lettered_at IS NULL)"
                                      " THEN 1 ELSE 0 END");
}

/* Before a requeue: wait until every later version of a dead-lettered
 * event is parked (or applied) by every consumer group.  A requeue that
 * lands while a consumer still waits out the gap lets the version apply
 * in order and leaves no parked version behind; whether one was parked
 * would then be a matter of timing, and a replay could go either way.
 * Only when every consumer parks gaps within the run (else the wait would
 * be the consumer's default of 30 s). */
static void render_gap_park_anchor(struct render_ctx *ctx)
{
    const struct sim_plan *p = ctx->p;
    int has[2] = { 0, 0 }, park_ms = 0;
    for (int i = 0; i < p->nprocs; i++) {
        if (p->procs[i].kind != SIM_CONSUMER)
            continue;
        if (p->procs[i].gap_park_ms <= 0)
            return;
        has[p->procs[i].group] = 1;
        if (p->procs[i].gap_park_ms > park_ms)
            park_ms = p->procs[i].gap_park_ms;
    }
    char groups[64] = "", sql[1024];
    size_t n = 0;
    for (int g = 0; g < 2; g++) {
        if (!has[g])
            continue;
        int w = snprintf(groups + n, sizeof(groups) - n, "%s('%s')", n > 0 ? ", " : "",
                         group_names[g]);
        if (w > 0 && (size_t)w < sizeof(groups) - n)
            n += (size_t)w;
    }
    if (n == 0)
        return;
    snprintf(sql, sizeof(sql),
             "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM outbox_messages o"
             " JOIN outbox_messages s ON s.aggregate_id = o.aggregate_id"
             " AND s.aggregate_version = o.aggregate_version + 1"
             " CROSS JOIN (VALUES %s) AS g(name)"
             " WHERE o.dead_lettered_at IS NOT NULL AND s.dead_lettered_at IS NULL"
             " AND NOT EXISTS (SELECT 1 FROM consumer_dead_letters d"
             " WHERE d.consumer_name = g.name AND d.message_id = s.id::text)"
             " AND NOT EXISTS (SELECT 1 FROM inbox_messages i"
             " WHERE i.consumer_name = g.name AND i.message_id = s.id))"
             " THEN 1 ELSE 0 END", groups);
    cJSON *o = render_anchor_ms(ctx, "sql", park_ms + 1500, "every version after a dead "
                                "letter parked first, then the requeue, in every replay");
    cJSON_AddStringToObject(o, "sql", sql);
}

/* Before the follow-up of a park: wait for the park itself.  Without it
 * the follow-up lands before or after the park as timing has it, and a
 * replay of the seed may take the other order. */
static void render_park_anchor(struct render_ctx *ctx, const struct sim_act *a,
                               const struct rstate *s, const char *name)
{
    if (!a->after_park || s->paused || s->parks < 1 || s->park_point == NULL)
        return;
    cJSON *o = render_anchor(ctx, "parked", "the park first, then what follows it, in every replay");
    cJSON_AddStringToObject(o, "proc", name);
    cJSON_AddStringToObject(o, "point", s->park_point);
}

/* A runbook command.  No exit status is asked (the caller may add one): a
 * database fault may be on; what the command did is judged from the
 * history it leaves. */
static cJSON *render_outboxctl(struct render_ctx *ctx, const char *const *argv, const char *why)
{
    cJSON *o = step(ctx->steps, "outboxctl");
    cJSON *args = cJSON_AddArrayToObject(o, "args");
    for (int i = 0; argv[i] != NULL; i++)
        cJSON_AddItemToArray(args, cJSON_CreateString(argv[i]));
    cJSON_AddStringToObject(o, "why", why);
    return o;
}

/* The process verbs; s is the state of the process called name.  Kill,
 * pause and resume are left out when the runner's step could fail. */
static void render_kill(struct render_ctx *ctx, const struct sim_act *a, struct rstate *s,
                        const char *name)
{
    if (!s->up || s->crashy)
        return;
    render_park_anchor(ctx, a, s, name);
    cJSON *o = step(ctx->steps, "kill");
    cJSON_AddStringToObject(o, "proc", name);
    s->up = 0;
    s->paused = 0;
}

static void render_pause(struct render_ctx *ctx, const struct sim_act *a, struct rstate *s,
                         const char *name)
{
    if (!s->up || s->crashy || s->paused || ctx->p->procs[a->proc].kind == SIM_API)
        return;
    cJSON *o = step(ctx->steps, "pause");
    cJSON_AddStringToObject(o, "proc", name);
    s->paused = 1;
}

static void render_resume(struct render_ctx *ctx, const struct sim_act *a, struct rstate *s,
                          const char *name)
{
    /* The runner's resume waits until the process runs; one that stops
     * itself again at once (an unfired park fault) would make the step
     * fail.  So: resume our own pause only when no park can follow, and a
     * park only when it is the only one (spent once fired). */
    if (!s->up || s->crashy || !(s->paused ? s->parks == 0 : s->parks == 1))
        return;
    render_park_anchor(ctx, a, s, name);
    const struct sim_proc *x = &ctx->p->procs[a->proc];
    if (!s->paused && x->kind == SIM_RELAY && s->park_point != NULL &&
        strncmp(s->park_point, "relay/", 6) == 0) {
        /* A relay parked inside its loop holds a claim: it stays parked
         * past that claim's lease, so the others may take its rows before
         * it goes on (a stale mark, a late publish).  Woken at once, it
         * would meet them or not as the timing of its park had it, and
         * a replay of the seed would not fail as the run did. */
        cJSON *h = step(ctx->steps, "sleep");
        cJSON_AddNumberToObject(h, "ms", x->lease_ms + 500);
        cJSON_AddStringToObject(h, "why", "the parked relay's lease runs out and the others "
                                          "may take its rows, in every replay");
        /* And they have done it: taken over, published and marked.  The
         * lease's end alone leaves a race between their mark and its own,
         * which a busy machine decides one way or the other. */
        render_nothing_pending_anchor(ctx, "the others published and marked the parked "
                                           "relay's rows before it goes on, in every replay");
    }
    cJSON *o = step(ctx->steps, "resume");
    cJSON_AddStringToObject(o, "proc", name);
    s->paused = 0;
}

/* k, the action's index, is the incarnation its faults were armed for. */
static void render_restart(struct render_ctx *ctx, const struct sim_act *a, int k,
                           struct rstate *s, const char *name)
{
    char spec[1024];
    int crashy, parks;
    const char *park_point;
    int nf = fault_spec(ctx->p, a->proc, k, spec, sizeof(spec), &crashy, &parks, &park_point);
    if (a->after_crash && s->up && s->crashy && !s->paused) {
        /* Whether the restart meets a live process or a dead one would
         * otherwise be a matter of timing. */
        cJSON *w = render_anchor(ctx, "exited", "its crash fault fired first, then the "
                                                "restart, in every replay");
        cJSON_AddStringToObject(w, "proc", name);
    }
    cJSON *o = step(ctx->steps, "restart");
    cJSON_AddStringToObject(o, "proc", name);
    if (nf > 0)
        cJSON_AddStringToObject(o, "faults", spec);
    memset(s, 0, sizeof(*s));
    s->up = 1;
    s->crashy = crashy;
    s->parks = parks;
    s->park_point = park_point;
    s->faulty = nf > 0;
    ctx->starts[a->proc]++;
    if (a->await_start) {
        cJSON *w = render_anchor(ctx, "event", "started (a consumer: subscribed) before what "
                                               "follows, in every replay");
        cJSON_AddStringToObject(w, "proc", name);
        cJSON_AddStringToObject(w, "event", "start");
        cJSON_AddNumberToObject(w, "count", ctx->starts[a->proc]);
    }
}

/* After the first payments batch: the park of sim_first_parker's relay, then
 * the start of the peers held back for it, each with its first faults. */
static void release_held(struct render_ctx *ctx)
{
    const struct sim_plan *p = ctx->p;
    int lead = sim_first_parker(p);
    if (lead < 0)
        return;
    char name[32];
    const struct rstate *ls = &ctx->st[lead];
    if (ls->up && ls->park_point != NULL) {
        sim_proc_name(p, lead, name, sizeof(name));
        cJSON *o = render_anchor(ctx, "parked", "the parked relay holds the first event, then "
                                                "its peers start, in every replay");
        cJSON_AddStringToObject(o, "proc", name);
        cJSON_AddStringToObject(o, "point", ls->park_point);
    }
    for (int i = 0; i < p->nprocs; i++) {
        if (!sim_held_back(p, i))
            continue;
        struct sim_act a;
        sim_act_init(&a, SIM_RESTART, i);
        sim_proc_name(p, i, name, sizeof(name));
        render_restart(ctx, &a, -1, &ctx->st[i], name);
    }
}

static void render_broker(struct render_ctx *ctx, const struct sim_act *a)
{
    cJSON *c = cJSON_CreateObject();
    if (a->outage >= 0)
        cJSON_AddStringToObject(c, "outage", a->outage == SIM_OUTAGE_REFUSE ? "refuse"
                                             : a->outage == SIM_OUTAGE_HANG ? "hang"
                                                                            : "off");
    if (a->duplicate >= 0)
        cJSON_AddBoolToObject(c, "duplicate", a->duplicate);
    if (a->drop > 0)
        cJSON_AddNumberToObject(c, "drop_before_confirm", a->drop);
    if (a->max_payload >= 0)
        cJSON_AddNumberToObject(c, "max_payload_bytes", a->max_payload);
    if (c->child == NULL) {
        cJSON_Delete(c);
        return;
    }
    cJSON *o = step(ctx->steps, "broker");
    cJSON_AddItemToObject(o, "control", c);
}

const char *const sim_db_actions[] = { "crash", "restart", "terminate", "freeze",
                                       "hold_commits", "lock", "refuse", "sever" };
const char *const sim_lock_tables[SIM_LOCK_TABLES] = { "outbox_messages", "payments",
                                                       "ledger_entries", "inbox_messages" };

const struct sim_refusal sim_refusals[SIM_REFUSALS] = {
    { "payments", "insert", "40001", 1, NULL },          /* the API's creation, at COMMIT */
    { "outbox_messages", "insert", "40P01", 0, NULL },   /* the API's event, a deadlock's victim */
    { "idempotency_records", "insert", "40001", 1, NULL },
    { "payments", "update", "40001", 1, NULL },          /* a transition, at COMMIT */
    { "outbox_messages", "update", "40001", 0, NULL },   /* a relay's claim or mark */
    { "outbox_messages", "update", "53100", 1, NULL },   /* a relay's COMMIT, the disk full */
    { "inbox_messages", "insert", "40P01", 0, NULL },    /* a consumer's marker */
    { "ledger_entries", "insert", "40001", 1, NULL },    /* accounting's COMMIT */
    { "notifications", "insert", "53100", 1, NULL },     /* notifications' COMMIT, the disk full */
};

const struct sim_refusal sim_severs[SIM_SEVERS] = {
    { "payments", "insert", NULL, 1, NULL },       /* the API's COMMIT: ambiguous, rolled back */
    { "outbox_messages", "insert", NULL, 0, NULL },/* the API's event, before its COMMIT */
    { "outbox_messages", "update", NULL, 0, "published_at" }, /* a relay's mark, often piped */
    { "outbox_messages", "update", NULL, 1, "published_at" }, /* the COMMIT of a mark */
    { "outbox_messages", "update", NULL, 1, "lock_id" },      /* the COMMIT of a claim */
    { "inbox_messages", "insert", NULL, 0, NULL }, /* a consumer's marker */
    { "ledger_entries", "insert", NULL, 1, NULL }, /* accounting's COMMIT */
};

static void render_db(struct render_ctx *ctx, const struct sim_act *a)
{
    cJSON *o = step(ctx->steps, "db");
    cJSON_AddStringToObject(o, "action", sim_db_actions[a->db]);
    if (a->db == SIM_DB_CRASH)
        cJSON_AddNumberToObject(o, "down_ms", a->ms);
    else if (a->db == SIM_DB_FREEZE || a->db == SIM_DB_HOLD_COMMITS || a->db == SIM_DB_LOCK)
        cJSON_AddNumberToObject(o, "ms", a->ms);
    if (a->db == SIM_DB_LOCK)
        cJSON_AddStringToObject(o, "table", sim_lock_tables[a->net_a]);
    if (a->db == SIM_DB_REFUSE || a->db == SIM_DB_SEVER) {
        const struct sim_refusal *rf = a->db == SIM_DB_REFUSE ? &sim_refusals[a->net_a]
                                                              : &sim_severs[a->net_a];
        cJSON_AddStringToObject(o, "table", rf->table);
        cJSON_AddStringToObject(o, "on", rf->on);
        if (rf->of != NULL) {
            cJSON *of = cJSON_AddArrayToObject(o, "of");
            cJSON_AddItemToArray(of, cJSON_CreateString(rf->of));
        }
        if (rf->sqlstate != NULL)
            cJSON_AddStringToObject(o, "sqlstate", rf->sqlstate);
        cJSON_AddStringToObject(o, "at", rf->at_commit ? "commit" : "statement");
        cJSON_AddNumberToObject(o, "times", a->count);
        /* Drawn blind: no payment or delivery may come its way after it. */
        cJSON_AddFalseToObject(o, "must_fire");
    }
    if (a->db == SIM_DB_TERMINATE && a->proc >= 0) {
        char name[32];
        sim_proc_name(ctx->p, a->proc, name, sizeof(name));
        cJSON_AddStringToObject(o, "proc", name);
    }
}

const char *const sim_net_names[] = { "latency", "blackhole", "reset", "bandwidth",
                                         "slicer", "cut", "partition", "down",
                                         "limit_data" };

static void render_net(struct render_ctx *ctx, const struct sim_act *a, const char *name)
{
    static const char *const cuts[] = { "commit", "confirm", "ack" };
    const struct sim_proc *x = &ctx->p->procs[a->proc];
    if (a->net == SIM_NET_LATENCY && a->net_broker && x->kind == SIM_RELAY &&
        a->net_a >= x->lease_ms) {
        /* A link slower than the relay's handshake bound keeps a relay
         * that is not connected yet from connecting: the fault is meant
         * for its publishes, so it comes after the connection. */
        cJSON *w = render_anchor(ctx, "event", "the relay reached the broker, then its link slows");
        cJSON_AddStringToObject(w, "proc", name);
        cJSON_AddStringToObject(w, "event", "connect");
        cJSON *where = cJSON_AddObjectToObject(w, "where");
        cJSON_AddStringToObject(where, "target", "broker");
    }
    render_park_anchor(ctx, a, &ctx->st[a->proc], name);
    cJSON *o = step(ctx->steps, "net");
    char link[48];
    snprintf(link, sizeof(link), "%s->%s", name, a->net_broker ? "broker" : "pg");
    cJSON_AddStringToObject(o, "link", link);
    cJSON_AddStringToObject(o, "fault", sim_net_names[a->net]);
    switch (a->net) {
    case SIM_NET_LATENCY:
        cJSON_AddNumberToObject(o, "latency_ms", a->net_a);
        cJSON_AddNumberToObject(o, "jitter_ms", a->net_b);
        break;
    case SIM_NET_BANDWIDTH:
        cJSON_AddNumberToObject(o, "rate_kbps", a->net_a);
        break;
    case SIM_NET_SLICER:
        cJSON_AddNumberToObject(o, "slice_bytes", a->net_a);
        cJSON_AddNumberToObject(o, "slice_delay_ms", a->net_b);
        break;
    case SIM_NET_CUT:
        cJSON_AddStringToObject(o, "cut_after", cuts[ctx->p->procs[a->proc].kind]);
        cJSON_AddStringToObject(o, "then", a->net_a ? "reset" : "blackhole");
        break;
    case SIM_NET_LIMIT_DATA:
        cJSON_AddNumberToObject(o, "limit_bytes", a->net_a);
        break;
    default:
        break;
    }
    if (a->ms > 0)
        cJSON_AddNumberToObject(o, "ms", a->ms);
    if (ctx->p->procs[a->proc].kind == SIM_API && !a->net_broker &&
        (a->net == SIM_NET_DOWN || a->net == SIM_NET_BLACKHOLE || a->net == SIM_NET_PARTITION ||
         a->net == SIM_NET_LIMIT_DATA))
        ctx->api_link_faulted = 2;
}

/* The plan's actions as runner steps, one verb each, walking the process
 * state machine described at the top of this file. */
static void render_steps(const struct sim_plan *p, cJSON *steps)
{
    struct render_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.p = p;
    ctx.steps = steps;
    char spec[1024], name[32];
    for (int i = 0; i < p->nprocs; i++) {
        struct rstate *s = &ctx.st[i];
        s->up = p->procs[i].autostart && !sim_held_back(p, i);
        s->faulty = fault_spec(p, i, -1, spec, sizeof(spec), &s->crashy, &s->parks,
                               &s->park_point) > 0;
        ctx.starts[i] = s->up;
    }
    for (int k = 0; k < p->nacts; k++) {
        const struct sim_act *a = &p->acts[k];
        struct rstate *s = a->proc >= 0 ? &ctx.st[a->proc] : NULL;
        if (a->proc >= 0)
            sim_proc_name(p, a->proc, name, sizeof(name));
        switch (a->kind) {
        case SIM_PAY:
            render_pay(&ctx, a);
            if (ctx.batch == 1)
                release_held(&ctx);
            break;
        case SIM_REUSE:
            render_reuse(&ctx);
            break;
        case SIM_SETTLE:
            render_settle(&ctx, a);
            break;
        case SIM_KILL:
            render_kill(&ctx, a, s, name);
            break;
        case SIM_PAUSE:
            render_pause(&ctx, a, s, name);
            break;
        case SIM_RESUME:
            render_resume(&ctx, a, s, name);
            break;
        case SIM_RESTART:
            render_restart(&ctx, a, k, s, name);
            break;
        case SIM_BROKER:
            /* The close of a poison window, after its first dead letter
             * (see add_nemesis). */
            if (a->max_payload == 0) {
                render_dead_letter_anchor(&ctx,
                                          "a dead letter first, then the poison window closes");
                render_nothing_pending_anchor(&ctx, "every event the window refuses "
                                              "dead-lettered before it closes, in every replay");
            } else if (a->max_payload > 0) {
                render_nothing_pending_anchor(&ctx, "every earlier event published before the "
                                              "poison window opens, in every replay");
            }
            render_broker(&ctx, a);
            break;
        case SIM_DB:
            render_db(&ctx, a);
            break;
        case SIM_BROKER_CLOSE: {
            cJSON *o = step(ctx.steps, "broker");
            cJSON_AddItemToObject(o, "control", cJSON_CreateObject());
            cJSON_AddTrueToObject(cJSON_GetObjectItemCaseSensitive(o, "control"),
                                  "close_connections");
            break;
        }
        case SIM_BROKER_CRASH: {
            cJSON *o = step(ctx.steps, "broker_crash");
            cJSON_AddNumberToObject(o, "down_ms", a->ms);
            break;
        }
        case SIM_NET:
            render_net(&ctx, a, name);
            break;
        case SIM_CLEANUP: {
            char older[32];
            snprintf(older, sizeof(older), "%dms", a->ms);
            const char *argv[] = { "cleanup", "--published-older-than", older, NULL };
            render_outboxctl(&ctx, argv, "the runbook's retention, mid-schedule");
            break;
        }
        case SIM_CLEANUP_INBOX: {
            char older[32];
            snprintf(older, sizeof(older), "%dms", a->ms);
            const char *argv[] = { "cleanup-inbox", "--older-than", older, NULL };
            cJSON *o = render_outboxctl(&ctx, argv, "an operator's inbox retention, shorter "
                                                    "than the redelivery horizon");
            /* Refused before any connection: the same answer under any
             * fault of the database. */
            cJSON_AddNumberToObject(o, "expect_exit", 1);
            cJSON_AddStringToObject(o, "expect_output", "refusing");
            break;
        }
        case SIM_REQUEUE: {
            /* After a dead letter, in every replay, when the schedule
             * makes one at all. */
            render_dead_letter_anchor(&ctx, "a dead letter first, then its requeue");
            render_gap_park_anchor(&ctx);
            const char *argv[] = { "requeue", "--all", NULL };
            render_outboxctl(&ctx, argv, "the runbook's recovery: every dead letter again");
            break;
        }
        }
    }
}

cJSON *sim_render(const struct sim_plan *p, const char *name, const char *title)
{
    char buf[1024], tbuf[256];
    cJSON *root = cJSON_CreateObject();
    if (root == NULL)
        return NULL;
    int nrel = 0, ncons = 0;
    for (int i = 0; i < p->nprocs; i++) {
        nrel += p->procs[i].kind == SIM_RELAY;
        ncons += p->procs[i].kind == SIM_CONSUMER;
    }
    cJSON_AddStringToObject(root, "name", name);
    if (title == NULL) {
        snprintf(tbuf, sizeof(tbuf), "Randomized run %llu of seed %llu: %d relay%s, %d "
                 "consumer%s, %d fault%s, %d action%s",
                 (unsigned long long)p->run, (unsigned long long)p->seed, nrel,
                 nrel == 1 ? "" : "s", ncons, ncons == 1 ? "" : "s", p->nfaults,
                 p->nfaults == 1 ? "" : "s", p->nacts, p->nacts == 1 ? "" : "s");
        title = tbuf;
    }
    cJSON_AddStringToObject(root, "title", title);
    cJSON_AddStringToObject(root, "crash_window",
                            p->nfaults > 0 ? p->faults[0].point : "sim/nemesis");
    snprintf(buf, sizeof(buf), "Generated by crashwindow sim from seed %llu, run %llu "
             "(replay: crashwindow sim --replay %llu:%llu).",
             (unsigned long long)p->seed, (unsigned long long)p->run,
             (unsigned long long)p->seed, (unsigned long long)p->run);
    cJSON_AddStringToObject(root, "description", buf);

    cJSON *procs = cJSON_AddObjectToObject(root, "processes");
    for (int i = 0; i < p->nprocs; i++) {
        const struct sim_proc *x = &p->procs[i];
        char pname[32];
        sim_proc_name(p, i, pname, sizeof(pname));
        cJSON *o = cJSON_AddObjectToObject(procs, pname);
        static const char *const kinds[] = { "api", "relay", "consumer" };
        cJSON_AddStringToObject(o, "kind", kinds[x->kind]);
        if (x->kind == SIM_RELAY)
            cJSON_AddItemToObject(o, "args", relay_args(x));
        else if (x->kind == SIM_CONSUMER)
            cJSON_AddItemToObject(o, "args", consumer_args(x));
        /* A relay held back gets its first faults from the step that
         * starts it. */
        int crashy, parks, held = sim_held_back(p, i);
        if (!held && fault_spec(p, i, -1, buf, sizeof(buf), &crashy, &parks, NULL) > 0)
            cJSON_AddStringToObject(o, "faults", buf);
        if (!x->autostart || held)
            cJSON_AddBoolToObject(o, "autostart", 0);
        if (x->db_deadline_ms > 0)
            cJSON_AddNumberToObject(o, "db_deadline_ms", x->db_deadline_ms);
        if (x->clock_offset_s != 0 || (x->clock_rate_pct != 0 && x->clock_rate_pct != 100)) {
            cJSON *c = cJSON_AddObjectToObject(o, "clock");
            cJSON_AddNumberToObject(c, "offset_s", x->clock_offset_s);
            if (x->clock_rate_pct != 0 && x->clock_rate_pct != 100)
                cJSON_AddNumberToObject(c, "rate", x->clock_rate_pct / 100.0);
        }
    }
    cJSON *broker = cJSON_AddObjectToObject(root, "broker");
    cJSON_AddNumberToObject(broker, "visibility_timeout_ms", p->visibility_ms);
    if (p->duplicate)
        cJSON_AddBoolToObject(broker, "duplicate", 1);
    if (p->reorder)
        cJSON_AddBoolToObject(broker, "reorder", 1);
    if (p->delay_ms > 0)
        cJSON_AddNumberToObject(broker, "delay_ms", p->delay_ms);
    if (p->durable_broker)
        cJSON_AddBoolToObject(broker, "durable", 1);

    render_steps(p, cJSON_AddArrayToObject(root, "steps"));

    cJSON *heal = cJSON_AddObjectToObject(root, "heal");
    /* Convergence needs at most a lease, a backoff cap, a visibility timeout
     * and a gap park (1.5 + 1 + 2 + 3 s); a lost event never converges, and
     * each failing run pays the whole timeout. */
    cJSON_AddNumberToObject(heal, "timeout_ms", 12000);
    cJSON_AddNumberToObject(root, "timeout_ms", 90000);
    /* Swarm faults armed on a late hit may lie beyond what the run
     * reaches; that is no failure of a generated schedule. */
    cJSON_AddBoolToObject(root, "faults_optional", 1);
    /* Listed for their vacuity check: every run creates payments, so these
     * always have something to check.  effect_once is not listed: a run
     * whose broker refuses every publish (a payload limit below every
     * event) dead-letters them all and has no effect to examine.  The
     * checker runs every invariant anyway, and any violation fails the run. */
    cJSON *inv = cJSON_AddArrayToObject(root, "invariants");
    cJSON_AddItemToArray(inv, cJSON_CreateString("payment_one_creation_event"));
    cJSON_AddItemToArray(inv, cJSON_CreateString("nothing_lost"));
    /* No expectation about parking: a version parked behind a relay dead
     * letter is classified dead-lettered by the checker, and any other
     * parked event is a failure no expectation may excuse. */
    return root;
}
