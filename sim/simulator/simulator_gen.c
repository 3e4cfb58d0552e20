/* simulator_gen.c -- generation: run I of seed S as a plan; see simulator.h.
 *
 * Generation is swarm testing (Groce et al.): rather than switching every
 * fault on a little, each run switches a random few on hard -- some points
 * active with a chosen action and hit, some nemesis actions, some broker
 * switches -- so that runs differ from each other in kind, not only in
 * timing.  Every draw goes through one PRNG (simulator_prng.c) in a fixed
 * order; nothing else (clock, environment, hash order) influences the plan. */
#include "simulator.h"
#include "simulator_internal.h"

#include <stdio.h>
#include <string.h>

static int pick(struct sim_rng *r, const int *v, int n)
{
    return v[sim_rng_below(r, n)];
}
#define PICK(r, ...) pick((r), (const int[]){ __VA_ARGS__ }, \
                          (int)(sizeof((const int[]){ __VA_ARGS__ }) / sizeof(int)))

static int add_proc(struct sim_plan *p, enum sim_kind kind)
{
    if (p->nprocs == SIM_MAX_PROCS)
        return -1;
    struct sim_proc *x = &p->procs[p->nprocs];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->autostart = 1;
    return p->nprocs++;
}

/* An action of kind on proc, every broker switch left as it is (-1; drop 0). */
void sim_act_init(struct sim_act *a, enum sim_act_kind kind, int proc)
{
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->proc = proc;
    a->outage = -1;
    a->duplicate = -1;
    a->max_payload = -1;
}

static struct sim_act *add_act(struct sim_plan *p, enum sim_act_kind kind, int proc)
{
    if (p->nacts == SIM_MAX_ACTS)
        return NULL;
    struct sim_act *a = &p->acts[p->nacts++];
    sim_act_init(a, kind, proc);
    return a;
}

/* A random process of kind, or -1. */
static int random_of_kind(struct sim_rng *r, const struct sim_plan *p, int kind)
{
    int idx[SIM_MAX_PROCS], n = 0;
    for (int i = 0; i < p->nprocs; i++)
        if ((int)p->procs[i].kind == kind)
            idx[n++] = i;
    return n ? idx[sim_rng_below(r, n)] : -1;
}

/* A random relay or consumer. */
static int random_worker(struct sim_rng *r, const struct sim_plan *p)
{
    int idx[SIM_MAX_PROCS], n = 0;
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind != SIM_API)
            idx[n++] = i;
    return n ? idx[sim_rng_below(r, n)] : -1;
}

static int fault_taken(const struct sim_plan *p, int proc, int inc, const char *point)
{
    for (int i = 0; i < p->nfaults; i++)
        if (p->faults[i].proc == proc && p->faults[i].incarnation == inc &&
            strcmp(p->faults[i].point, point) == 0)
            return 1;
    return 0;
}

/* Whether another process shares proc's work: another relay, or another
 * consumer of its group. */
static int has_peers(const struct sim_plan *p, int proc)
{
    const struct sim_proc *x = &p->procs[proc];
    if (x->kind != SIM_RELAY && x->kind != SIM_CONSUMER)
        return 0;
    for (int j = 0; j < p->nprocs; j++)
        if (j != proc && p->procs[j].kind == x->kind &&
            (x->kind != SIM_CONSUMER || p->procs[j].group == x->group))
            return 1;
    return 0;
}

/* A relay that parks on its first pass while other relays share the work
 * parks on whichever event it won the race for: the first version of a
 * payment in one replay, the last in the next, and then no later version
 * waits behind the one it holds.  So its peers that would start with it
 * are held back until it has parked (see release_held): it claims the
 * run's first event in every replay.  The relay, or -1.  No draw. */
int sim_first_parker(const struct sim_plan *p)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct sim_fault *f = &p->faults[i];
        const struct sim_proc *x = &p->procs[f->proc];
        if (f->action == SIM_PARK && f->incarnation == -1 && f->hit == 1 &&
            x->kind == SIM_RELAY && x->autostart && has_peers(p, f->proc))
            return f->proc;
    }
    return -1;
}

/* Whether proc starts only once sim_first_parker's relay has parked. */
int sim_held_back(const struct sim_plan *p, int proc)
{
    int lead = sim_first_parker(p);
    return lead >= 0 && proc != lead && p->procs[proc].kind == SIM_RELAY &&
           p->procs[proc].autostart;
}

/* Arms point pt in incarnation inc of proc: a random allowed action, hit
 * and duration.  0, or -1 when nothing could be armed. */
static int add_fault(struct sim_rng *r, struct sim_plan *p, const struct sim_point *pt,
                     int proc, int inc)
{
    const struct sim_proc *sp = &p->procs[proc];
    unsigned allowed = pt->actions;
    /* A parked API would hold every request until its client timeout: the
     * run would crawl and prove nothing the relay and consumer parks do not. */
    if (sp->kind == SIM_API)
        allowed &= ~(1u << SIM_PARK);
    int choices[4], n = 0;
    for (int k = 0; k < 4; k++)
        if (allowed & (1u << k))
            choices[n++] = k;
    if (n == 0 || p->nfaults == SIM_MAX_FAULTS || fault_taken(p, proc, inc, pt->name))
        return -1;
    struct sim_fault *f = &p->faults[p->nfaults];
    memset(f, 0, sizeof(*f));
    f->proc = proc;
    f->incarnation = inc;
    snprintf(f->point, sizeof(f->point), "%s", pt->name);
    f->action = (enum sim_action)choices[sim_rng_below(r, n)];
    f->hit = sim_rng_range(r, 1, sp->kind == SIM_API ? 3 : 5);
    /* A relay, or a consumer, that shares the work with others parks on
     * its first pass: how many passes it gets depends on how they split
     * the batches, and a later one would be met in one replay and not in
     * the next.  (Drawn all the same, so no later draw moves.) */
    if (f->action == SIM_PARK && has_peers(p, proc))
        f->hit = 1;
    if (f->action == SIM_STALL) {
        if (strcmp(pt->name, "relay/lease_stall") == 0) {
            /* Long enough for the lease to run out: the interesting case. */
            f->stall_ms = sp->lease_ms + sim_rng_range(r, 100, 700);
        } else {
            f->stall_ms = sim_rng_range(r, 20, sp->kind == SIM_API ? 300 : 500);
            /* Between a confirm and its mark, the upper part of that range
             * becomes a stall 0.4-1.2 s past the lease: the mark then lands
             * when another relay may hold the row, the case its fence is
             * for, and a window that wide is met again on a replay.  Mapped
             * from the same draw, so no later draw moves. */
            if ((strcmp(pt->name, "relay/after_publish") == 0 ||
                 strcmp(pt->name, "relay/before_mark") == 0) && f->stall_ms >= 300)
                f->stall_ms = sp->lease_ms + 400 + (f->stall_ms - 300) * 4;
        }
    }
    if ((f->action == SIM_FAIL || f->action == SIM_STALL) && sim_rng_chance(r, 15))
        f->every = 1;
    p->nfaults++;
    return 0;
}

/* Arms one random point of proc's component in incarnation inc. */
static void add_random_fault(struct sim_rng *r, struct sim_plan *p,
                             const struct sim_catalogue *cat, int proc, int inc)
{
    int idx[SIM_MAX_POINTS], n = 0;
    for (int i = 0; i < cat->n; i++)
        if (sim_point_kind(cat->p[i].name) == (int)p->procs[proc].kind)
            idx[n++] = i;
    if (n > 0)
        add_fault(r, p, &cat->p[idx[sim_rng_below(r, n)]], proc, inc);
}

/* Follow-ups: actions promised for after the next payments batch (the
 * resume of a pause, the end of a broker outage, a restart after a kill). */
struct pending {
    int n;
    struct sim_act v[8];
};

static struct sim_act *later(struct pending *pd, enum sim_act_kind kind, int proc)
{
    if (pd->n == 8)
        return NULL;
    struct sim_act *a = &pd->v[pd->n++];
    sim_act_init(a, kind, proc);
    return a;
}

/* Whether a broker window (an outage or a poison window) opened earlier
 * still waits for its close. */
static int broker_window_open(const struct pending *pd)
{
    for (int i = 0; i < pd->n; i++)
        if (pd->v[i].kind == SIM_BROKER)
            return 1;
    return 0;
}

static void flush_later(struct sim_plan *p, struct pending *pd)
{
    for (int i = 0; i < pd->n && p->nacts < SIM_MAX_ACTS; i++)
        p->acts[p->nacts++] = pd->v[i];
    pd->n = 0;
}

/* A poison window's payload bound: every event is longer than the first,
 * only a PaymentCreated longer than the second (see gen_ops). */
#define SIM_POISON_ALL_BYTES 64
#define SIM_POISON_CREATED_BYTES 200

/* One nemesis action between payments batches. */
static void add_nemesis(struct sim_rng *r, struct sim_plan *p, const struct sim_catalogue *cat,
                        struct pending *pd)
{
    struct sim_act *a;
    if (p->procs[1].max_attempts <= 3 && sim_rng_chance(r, 50)) {
        /* A poison window: every payload is too large for the broker,
         * whose refusal quotes the payload; what the relays try until the
         * window closes reaches the attempt limit and is dead-lettered.
         * The window closes only after the first dead letter (an anchor,
         * rendered with the close), so that the refusals last the attempts
         * a dead letter needs in every replay, and a relay that never
         * dead-letters keeps retrying until the anchor's bound.  Never
         * inside another window: a second bound, or an outage, would
         * override a creations-only window (see gen_ops), and which events
         * were refused would then be a matter of timing. */
        if (broker_window_open(pd))
            return;
        a = add_act(p, SIM_BROKER, -1);
        if (a != NULL) {
            a->max_payload = SIM_POISON_ALL_BYTES;
            struct sim_act *off = later(pd, SIM_BROKER, -1);
            if (off != NULL)
                off->max_payload = 0;
        }
        return;
    }
    int roll = sim_rng_below(r, 100);
    int target = random_worker(r, p);
    if (roll < 28) {
        if (add_act(p, SIM_KILL, target) != NULL && sim_rng_chance(r, 60))
            later(pd, SIM_RESTART, target);
    } else if (roll < 46) {
        if (add_act(p, SIM_PAUSE, target) != NULL)
            later(pd, sim_rng_chance(r, 70) ? SIM_RESUME : SIM_KILL, target);
    } else if (roll < 66) {
        a = add_act(p, SIM_RESTART, target);
        if (a != NULL && sim_rng_chance(r, 45))
            add_random_fault(r, p, cat, target, p->nacts - 1);
    } else if (roll < 78) {
        if (broker_window_open(pd))
            return; /* one broker window at a time, as above */
        a = add_act(p, SIM_BROKER, -1);
        if (a != NULL) {
            a->outage = sim_rng_chance(r, 65) ? SIM_OUTAGE_REFUSE : SIM_OUTAGE_HANG;
            struct sim_act *off = later(pd, SIM_BROKER, -1);
            if (off != NULL)
                off->outage = SIM_OUTAGE_OFF; /* else the heal ends it */
        }
    } else if (roll < 90) {
        a = add_act(p, SIM_BROKER, -1);
        if (a == NULL)
            return;
        if (sim_rng_chance(r, 50)) {
            a->duplicate = sim_rng_chance(r, 60);
        } else {
            a->drop = sim_rng_range(r, 1, 2);
        }
    } else {
        add_act(p, SIM_RESTART, 0); /* a clean restart of the API between batches */
    }
}

/* Layout: the API, 1-3 relays, 1-2 accounting consumers, sometimes a
 * notifications group of 1-2, and the broker's switches.  Leases are short
 * so that they expire within a run; backoff is short so that retries
 * happen within one. */
static void gen_layout(struct sim_rng *r, struct sim_plan *p)
{
    add_proc(p, SIM_API);
    int nrelays = sim_rng_range(r, 1, 3);
    int lease = PICK(r, 500, 800, 1000, 1500);
    /* fifo lets a newer version of a payment overtake an older one that is
     * leased or backing off; per-aggregate holds it back.  Both are
     * supported modes, so both are exercised. */
    int per_aggregate = sim_rng_chance(r, 50);
    /* A low attempt limit makes dead letters (outages, poison windows).
     * Only with fifo: per-aggregate holds every later version of a payment
     * behind a dead-lettered one until an operator requeues it, which no
     * run does, so the pipeline would never converge. */
    int max_attempts = !per_aggregate && sim_rng_chance(r, 50) ? 3 : 12;
    for (int i = 0; i < nrelays; i++) {
        struct sim_proc *x = &p->procs[add_proc(p, SIM_RELAY)];
        x->lease_ms = lease;
        x->idle_ms = PICK(r, 50, 100);
        x->batch = PICK(r, 1, 2, 5, 10);
        x->backoff_base_ms = PICK(r, 20, 50, 100);
        x->backoff_cap_ms = PICK(r, 500, 1000);
        x->max_attempts = max_attempts;
        x->per_aggregate = per_aggregate;
        /* A later relay may join mid-run and take over expired leases. */
        x->autostart = i == 0 || !sim_rng_chance(r, 25);
    }
    int groups = sim_rng_chance(r, 35) ? 2 : 1;
    for (int g = 0; g < groups; g++) {
        int n = sim_rng_range(r, 1, 2);
        for (int i = 0; i < n; i++) {
            struct sim_proc *x = &p->procs[add_proc(p, SIM_CONSUMER)];
            x->group = g;
            x->prefetch = PICK(r, 1, 5, 10);
            x->cbatch = PICK(r, 1, 1, 3);
            x->retry_delay_ms = PICK(r, 50, 100, 200);
            x->gap_delay_ms = PICK(r, 50, 100);
            /* A version whose predecessor was dead-lettered waits for it
             * until the gap is parked: with dead letters about (attempt
             * limit 3) gaps are parked within the heal, else the consumer's
             * default (30 s) holds.  Drawn either way, so that the rest of
             * the plan does not depend on it. */
            int park = PICK(r, 1500, 3000);
            /* A gap is often a version whose predecessor a relay holds
             * until its lease runs out.  Parked at about the moment the
             * lease ends, the version would be parked in one replay and
             * applied in order in the next: a park time that close to
             * the lease is moved half a second before it (the same draw,
             * so no later draw moves). */
            if (park < lease + 500)
                park = lease - 500;
            x->gap_park_ms = max_attempts <= 3 ? park : 0;
        }
    }
    p->visibility_ms = PICK(r, 1000, 2000);
    p->duplicate = sim_rng_chance(r, 25);
    p->reorder = sim_rng_chance(r, 15);
    p->delay_ms = sim_rng_chance(r, 15) ? PICK(r, 50, 150, 300) : 0;
}

/* Faults armed at the first start: each catalogued point is active in this
 * run or not (swarm), on one process of its component. */
static void gen_first_faults(struct sim_rng *r, struct sim_plan *p,
                             const struct sim_catalogue *cat)
{
    for (int i = 0; i < cat->n; i++) {
        int kind = sim_point_kind(cat->p[i].name);
        if (kind < 0 || !sim_rng_chance(r, kind == SIM_API ? 20 : 30))
            continue;
        int target = random_of_kind(r, p, kind);
        if (target >= 0 && p->procs[target].autostart)
            add_fault(r, p, &cat->p[i], target, -1);
    }
}

/* A crash fault armed at the first start of the only relay, or of the only
 * consumer of a group, would leave the pipeline without it until the heal,
 * and every window the schedule opens meanwhile would meet no one: such a
 * process is restarted after the first batch, once its crash came (an
 * anchor, see render_restart).  No draw: the rest of the run's stream
 * stays as it was. */
static void revive_sole_crashers(struct sim_plan *p)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct sim_fault *f = &p->faults[i];
        if (f->action != SIM_CRASH || f->incarnation != -1)
            continue;
        const struct sim_proc *x = &p->procs[f->proc];
        if ((x->kind != SIM_RELAY && x->kind != SIM_CONSUMER) || has_peers(p, f->proc))
            continue;
        struct sim_act *a = add_act(p, SIM_RESTART, f->proc);
        if (a != NULL)
            a->after_crash = 1;
    }
}

/* Workload and nemesis, interleaved: payments batches, late joiners, the
 * follow-ups of parks and of the previous nemesis actions, new ones. */
static void gen_schedule(struct sim_rng *r, struct sim_plan *p, const struct sim_catalogue *cat)
{
    struct pending pd = { 0 };
    int nbatches = sim_rng_range(r, 2, 4);
    int join_at[SIM_MAX_PROCS];
    for (int i = 0; i < p->nprocs; i++)
        join_at[i] = p->procs[i].autostart ? -1 : sim_rng_range(r, 0, nbatches - 1);
    for (int b = 0; b < nbatches; b++) {
        struct sim_act *a = add_act(p, SIM_PAY, 0);
        if (a != NULL) {
            a->count = sim_rng_range(r, 2, 6);
            a->retries = sim_rng_chance(r, 30) ? sim_rng_range(r, 1, 2) : 0;
            a->authorize = sim_rng_chance(r, 55);
            a->capture = a->authorize && sim_rng_chance(r, 55);
        }
        if (sim_rng_chance(r, 20))
            add_act(p, SIM_REUSE, 0);
        flush_later(p, &pd);
        for (int i = 0; i < p->nprocs; i++)
            if (join_at[i] == b)
                add_act(p, SIM_RESTART, i);
        if (b == 0) {
            /* "park, then resume or kill" for the processes that may park. */
            for (int i = 0; i < p->nfaults; i++) {
                const struct sim_fault *f = &p->faults[i];
                if (f->action != SIM_PARK || f->incarnation != -1 || !sim_rng_chance(r, 60))
                    continue;
                struct sim_act *s = add_act(p, SIM_SETTLE, -1);
                if (s != NULL)
                    s->ms = sim_rng_range(r, 200, 600);
                s = add_act(p, sim_rng_chance(r, 65) ? SIM_RESUME : SIM_KILL, f->proc);
                if (s != NULL)
                    s->after_park = 1;
            }
            revive_sole_crashers(p);
        }
        int nn = sim_rng_range(r, 0, 2);
        for (int k = 0; k < nn; k++)
            add_nemesis(r, p, cat, &pd);
        if (sim_rng_chance(r, 50)) {
            struct sim_act *s = add_act(p, SIM_SETTLE, -1);
            if (s != NULL)
                s->ms = sim_rng_range(r, 200, 700);
        }
    }
    flush_later(p, &pd);
    if (sim_rng_chance(r, 50)) {
        struct sim_act *s = add_act(p, SIM_SETTLE, -1);
        if (s != NULL)
            s->ms = sim_rng_range(r, 300, 800);
    }
}

/* Inserts a at index at (room checked by the caller); a fault armed for an
 * incarnation at or after it moves with that incarnation's action. */
static void insert_act(struct sim_plan *p, int at, const struct sim_act *a)
{
    memmove(&p->acts[at + 1], &p->acts[at], sizeof(p->acts[0]) * (size_t)(p->nacts - at));
    p->acts[at] = *a;
    p->nacts++;
    for (int i = 0; i < p->nfaults; i++)
        if (p->faults[i].incarnation >= at)
            p->faults[i].incarnation++;
}

/* Database and broker faults, drawn from a stream of their own so that
 * adding them left every other part of every seed's plan as it was: at
 * most one per run, inserted after the first payments batch (the index of
 * every later action, and so every later incarnation, moves up by one). */
static void gen_infra(uint64_t seed, uint64_t run, struct sim_plan *p,
                      const struct sim_catalogue *cat)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x9e3779b97f4a7c15ULL, run);
    if (!cat->infra || !sim_rng_chance(r, 35) || p->nacts < 2 || p->nacts >= SIM_MAX_ACTS)
        return;
    int at = sim_rng_range(r, 1, p->nacts);
    struct sim_act a;
    sim_act_init(&a, SIM_DB, -1);
    int roll = sim_rng_below(r, 100);
    if (roll < 20) {
        a.kind = SIM_BROKER_CRASH;
        a.ms = PICK(r, 0, 100, 300);
        p->durable_broker = 1;
    } else {
        a.db = roll < 40 ? SIM_DB_CRASH : roll < 55 ? SIM_DB_RESTART
               : roll < 80 ? SIM_DB_TERMINATE : roll < 90 ? SIM_DB_FREEZE
               : SIM_DB_HOLD_COMMITS;
        if (a.db == SIM_DB_CRASH)
            a.ms = PICK(r, 0, 200, 500);
        else if (a.db == SIM_DB_FREEZE || a.db == SIM_DB_HOLD_COMMITS)
            a.ms = sim_rng_range(r, 300, 2000);
        else if (a.db == SIM_DB_TERMINATE && sim_rng_chance(r, 60))
            a.proc = sim_rng_range(r, 1, p->nprocs - 1);
    }
    insert_act(p, at, &a);
}

/* Where a fault drawn at point at goes so that it splits no sequence that
 * must stay whole: a partition aimed at a parked commit and the resume
 * right after it, or the ending that restarts the consumers behind silent
 * links (from the broker switch and relay restarts before it to its
 * caught-up settle).  Inside one, it goes just before it. */
static int whole_point(const struct sim_plan *p, int at)
{
    const struct sim_act *prev = at > 0 ? &p->acts[at - 1] : NULL;
    if (prev != NULL && prev->kind == SIM_NET && prev->net == SIM_NET_PARTITION && prev->after_park)
        return at - 1;
    int e = -1, end;
    for (int k = 0; k < p->nacts && e < 0; k++)
        if (p->acts[k].kind == SIM_RESTART && p->acts[k].await_start)
            e = k;
    if (e < 0)
        return at;
    while (e > 0 && ((p->acts[e - 1].kind == SIM_RESTART && !p->acts[e - 1].await_start) ||
                     p->acts[e - 1].kind == SIM_BROKER))
        e--;
    for (end = e; end < p->nacts && !(p->acts[end].kind == SIM_SETTLE && p->acts[end].caught_up);
         end++)
        ;
    return at > e && at <= end ? e : at;
}

/* A database fault drawn from a stream of its own (salt), pct times in a
 * hundred, at a point between two actions (*at, never inside a sequence
 * that must stay whole): 1 when drawn, with r ready for the fault's own
 * numbers. */
static int draw_db_act(uint64_t seed, uint64_t salt, uint64_t run, const struct sim_plan *p,
                       int pct, struct sim_rng *r, int *at)
{
    sim_rng_init(r, seed ^ salt, run);
    if (!sim_rng_chance(r, pct) || p->nacts < 2 || p->nacts >= SIM_MAX_ACTS)
        return 0;
    *at = whole_point(p, sim_rng_range(r, 1, p->nacts));
    return 1;
}

/* A migration's lock, from a stream of its own (as gen_infra's): sometimes
 * another session holds a table the pipeline writes ACCESS EXCLUSIVE for
 * up to four seconds, inserted between two actions.  Statements on it
 * wait, and those with a shorter lock or statement timeout (the API's 50
 * ms, a relay's or consumer's deadline) are refused on a live connection.
 * A lock is a client's session: it needs no cluster of the simulator's own. */
static void gen_lock(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng r;
    int at;
    if (!draw_db_act(seed, 0x27d4eb2f165667c5ULL, run, p, 15, &r, &at))
        return;
    struct sim_act a;
    sim_act_init(&a, SIM_DB, -1);
    a.db = SIM_DB_LOCK;
    a.net_a = sim_rng_below(&r, SIM_LOCK_TABLES);
    a.ms = sim_rng_range(&r, 500, 4000);
    insert_act(p, at, &a);
}

/* A fault at one of the pipeline's statements, from a stream of its own
 * (salt), pct times in a hundred: kind db, at one of nkinds places of its
 * catalogue, one to most times, from a point between two actions on. */
static void gen_statement_fault(uint64_t seed, uint64_t salt, uint64_t run, struct sim_plan *p,
                                int pct, enum sim_db db, int nkinds, int most)
{
    struct sim_rng r;
    int at;
    if (!draw_db_act(seed, salt, run, p, pct, &r, &at))
        return;
    struct sim_act a;
    sim_act_init(&a, SIM_DB, -1);
    a.db = db;
    a.net_a = sim_rng_below(&r, nkinds);
    a.count = sim_rng_range(&r, 1, most);
    insert_act(p, at, &a);
}

/* A refusal (as gen_infra's, a stream of its own): sometimes PostgreSQL
 * refuses one of the pipeline's statements, or the COMMIT after it, one to
 * three times: a serialization failure, a deadlock's victim or a full disk
 * on a live connection, which every program must retry or hand back
 * without losing or repeating anything.  Like a lock, it needs no cluster
 * of its own. */
static void gen_refuse(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    gen_statement_fault(seed, 0x5851f42d4c957f2dULL, run, p, 12, SIM_DB_REFUSE, SIM_REFUSALS, 3);
}

/* A severed session (a stream of its own): sometimes a process's backend
 * ends itself at one of the pipeline's statements or COMMITs, once or
 * twice -- a connection lost exactly where the outcome is hardest to know
 * (an ambiguous COMMIT the server rolled back, a mark in flight in a
 * pipeline).  Drawn after every other fault, so that no earlier draw of
 * any seed changes. */
static void gen_sever(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    gen_statement_fault(seed, 0xd6e8feb86659fd93ULL, run, p, 10, SIM_DB_SEVER, SIM_SEVERS, 2);
}

/* Network faults and clocks, from a stream of their own (as gen_infra's):
 * sometimes an API runs with a skewed or drifting clock, and at most one
 * net action per run, inserted between two actions. */
static void gen_net(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0xc2b2ae3d27d4eb4fULL, run);
    if (sim_rng_chance(r, 20)) {
        p->procs[0].clock_offset_s = sim_rng_range(r, -120, -30); /* behind: settles end early, never late */
        p->procs[0].clock_rate_pct = PICK(r, 50, 100, 100, 150, 200);
    }
    if (!sim_rng_chance(r, 30) || p->nacts < 2 || p->nacts >= SIM_MAX_ACTS)
        return;
    int at = sim_rng_range(r, 1, p->nacts);
    struct sim_act a;
    sim_act_init(&a, SIM_NET, sim_rng_below(r, p->nprocs));
    a.net = (enum sim_net)sim_rng_below(r, SIM_NET_CUT + 1);
    /* The API has no broker link; the draw is made all the same, so that
     * a seed's other choices stay what they were. */
    a.net_broker = sim_rng_chance(r, 50) && p->procs[a.proc].kind != SIM_API;
    a.ms = sim_rng_range(r, 300, 2000);
    switch (a.net) {
    case SIM_NET_LATENCY:
        a.net_a = sim_rng_range(r, 20, 400);
        a.net_b = sim_rng_range(r, 0, a.net_a / 2);
        break;
    case SIM_NET_BANDWIDTH:
        a.net_a = PICK(r, 16, 64, 256);
        break;
    case SIM_NET_SLICER:
        a.net_a = sim_rng_range(r, 1, 64);
        a.net_b = sim_rng_range(r, 0, 5);
        break;
    case SIM_NET_CUT: {
        /* the cut each kind of process meets: the API's COMMIT, a relay's
         * confirm, a consumer's ack */
        enum sim_kind k = p->procs[a.proc].kind;
        a.net_broker = k != SIM_API;
        a.net_a = sim_rng_chance(r, 50);
        a.ms = 0;
        break;
    }
    case SIM_NET_RESET:
        a.ms = 0;
        break;
    default:
        break;
    }
    insert_act(p, at, &a);
}

/* A consumer with no fault and no action of its own, started with the run
 * (the first such from a random one), or -1. */
static int quiet_consumer(struct sim_rng *r, const struct sim_plan *p)
{
    int from = sim_rng_below(r, p->nprocs);
    for (int n = 0; n < p->nprocs; n++) {
        int i = (from + n) % p->nprocs;
        int busy = p->procs[i].kind != SIM_CONSUMER || !p->procs[i].autostart;
        for (int f = 0; f < p->nfaults && !busy; f++)
            busy = p->faults[f].proc == i;
        for (int k = 0; k < p->nacts && !busy; k++)
            busy = p->acts[k].proc == i && p->acts[k].kind != SIM_NET &&
                   p->acts[k].kind != SIM_DB;
        if (!busy)
            return i;
    }
    return -1;
}

/* Scenario 34's window, made: a quiet consumer parks at its first
 * COMMIT (its inbox row written and locked), its PostgreSQL link is
 * partitioned for longer than its database deadline, and it is resumed
 * into the cut.  The kernel gives its socket up without a FIN ever reaching
 * the server, and only the server's own bound on an idle transaction frees
 * the row that every redelivery of the event needs.  Returns 0 when made. */
static int gen_silent_commit(struct sim_rng *r, struct sim_plan *p,
                             const struct sim_catalogue *cat)
{
    const char *point = "consumer/before_commit";
    int c = quiet_consumer(r, p), known = 0;
    for (int i = 0; i < cat->n; i++)
        known |= strcmp(cat->p[i].name, point) == 0 && (cat->p[i].actions & (1u << SIM_PARK));
    int first_pay = -1;
    for (int k = 0; k < p->nacts && first_pay < 0; k++)
        if (p->acts[k].kind == SIM_PAY)
            first_pay = k;
    if (c < 0 || !known || first_pay < 0 || p->nfaults == SIM_MAX_FAULTS ||
        p->nacts + 2 > SIM_MAX_ACTS)
        return -1;
    struct sim_fault *f = &p->faults[p->nfaults++];
    memset(f, 0, sizeof(*f));
    f->proc = c;
    f->incarnation = -1;
    snprintf(f->point, sizeof(f->point), "%s", point);
    f->action = SIM_PARK;
    f->hit = 1;
    struct sim_proc *x = &p->procs[c];
    x->db_deadline_ms = PICK(r, 800, 1000, 1500);
    struct sim_act a;
    sim_act_init(&a, SIM_RESUME, c);
    a.after_park = 1;
    insert_act(p, first_pay + 1, &a);
    sim_act_init(&a, SIM_NET, c);
    a.net = SIM_NET_PARTITION;
    a.after_park = 1;
    a.ms = x->db_deadline_ms + sim_rng_range(r, 1000, 2500);
    insert_act(p, first_pay + 1, &a);
    return 0;
}

/* The link faults gen_net does not draw, from a stream of their own (as
 * gen_infra's): a kernel partition of a process's PostgreSQL link (only
 * when the runs live in a network namespace of their own), a link down, a
 * byte limit.  A partition mostly outlasts its process's database
 * deadline, and then the kernel gives the silent socket up without a FIN
 * ever reaching the server; sometimes it is aimed at the window it exists
 * for (gen_silent_commit). */
static void gen_links(uint64_t seed, uint64_t run, struct sim_plan *p,
                      const struct sim_catalogue *cat)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x85ebca6b0b5ae4f1ULL, run);
    if (p->nacts < 2 || p->nacts >= SIM_MAX_ACTS)
        return;
    if (cat->partitions && sim_rng_chance(r, 15) && gen_silent_commit(r, p, cat) == 0)
        return;
    if (!sim_rng_chance(r, 25))
        return;
    struct sim_act a;
    sim_act_init(&a, SIM_NET, sim_rng_below(r, p->nprocs));
    int at = sim_rng_range(r, 1, p->nacts);
    int roll = sim_rng_below(r, 100);
    a.net = cat->partitions && roll < 40 ? SIM_NET_PARTITION
            : roll < 70 ? SIM_NET_DOWN : SIM_NET_LIMIT_DATA;
    a.net_broker = sim_rng_chance(r, 50) && p->procs[a.proc].kind != SIM_API;
    a.ms = sim_rng_range(r, 300, 2000);
    if (a.net == SIM_NET_PARTITION) {
        a.net_broker = 0; /* the proxy's kernel rule is for TCP links */
        struct sim_proc *x = &p->procs[a.proc];
        x->db_deadline_ms = PICK(r, 800, 1000, 1500);
        a.ms = sim_rng_chance(r, 70) ? x->db_deadline_ms + sim_rng_range(r, 500, 2500)
                                     : sim_rng_range(r, 100, x->db_deadline_ms / 2);
    } else if (a.net == SIM_NET_LIMIT_DATA) {
        a.net_a = PICK(r, 0, 64, 512, 4096, 65536);
    }
    insert_act(p, at, &a);
}

/* The relays' links to the broker slower than their lease, from a stream
 * of its own (as gen_infra's): sometimes, from before the first payments,
 * the publishes of every relay that starts with the run reach the broker
 * after the lease that covered them ended.  The broker must refuse each
 * (a publish carries its lease end) and publish_within_lease holds every
 * stored one to the claim history.  Every relay's, so that which relay
 * claims what does not decide whether a publish is late.  The latency
 * drawn elsewhere stays under the shortest lease. */
static void gen_slow_links(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x27d4eb2f165667c5ULL, run);
    if (!sim_rng_chance(r, 12))
        return;
    int ms = sim_rng_range(r, 2000, 4000), at = 0;
    for (int i = 0; i < p->nprocs && p->nacts < SIM_MAX_ACTS; i++) {
        if (p->procs[i].kind != SIM_RELAY || !p->procs[i].autostart)
            continue;
        struct sim_act a;
        sim_act_init(&a, SIM_NET, i);
        a.net = SIM_NET_LATENCY;
        a.net_broker = 1;
        a.net_a = p->procs[i].lease_ms + sim_rng_range(r, 300, 1000);
        a.net_b = 0;
        a.ms = ms;
        insert_act(p, at++, &a);
    }
}

/* The index of the first poison window's close at or after from, or -1. */
static int next_close(const struct sim_plan *p, int from)
{
    for (int k = from; k < p->nacts; k++)
        if (p->acts[k].kind == SIM_BROKER && p->acts[k].max_payload == 0)
            return k;
    return -1;
}

/* The runbook's operations, from a stream of their own (as gen_infra's):
 * sometimes the retention cleanup runs mid-schedule, with faults about, as
 * an operator's cron would, and where relays may dead-letter (an attempt
 * limit of 3) an operator sometimes requeues every dead letter, whatever
 * the broker is doing at that moment.  The history records what each one
 * removed or reset, and every invariant must still hold. */
static void gen_ops(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x165667b19e3779f9ULL, run);
    struct sim_act a;
    if (sim_rng_chance(r, 25) && p->nacts >= 2 && p->nacts < SIM_MAX_ACTS) {
        sim_act_init(&a, SIM_CLEANUP, -1);
        a.ms = PICK(r, 1, 200, 1000);
        insert_act(p, sim_rng_range(r, 1, p->nacts), &a);
    }
    /* An inbox retention far inside the redelivery horizon, which
     * outboxctl must refuse before it touches the database, whatever the
     * faults of the moment: were it obeyed, a message delivered again
     * after it would meet no marker (the consumers' version check may hide
     * that from the effects; the refusal is what is checked). */
    if (sim_rng_chance(r, 35) && p->nacts >= 2 && p->nacts < SIM_MAX_ACTS) {
        sim_act_init(&a, SIM_CLEANUP_INBOX, -1);
        a.ms = PICK(r, 1, 100, 500);
        insert_act(p, sim_rng_range(r, 1, p->nacts), &a);
    }
    /* Right after a poison window closes, when its dead letters are there
     * to requeue (the operator fixed the cause), most of the time; else,
     * now and then, anywhere. */
    int at = next_close(p, 0);
    at = at >= 0 ? at + 1 : -1;
    if (p->nprocs > 1 && p->procs[1].max_attempts <= 3 && sim_rng_chance(r, at >= 0 ? 90 : 30) &&
        p->nacts >= 2 && p->nacts < SIM_MAX_ACTS) {
        sim_act_init(&a, SIM_REQUEUE, -1);
        insert_act(p, at >= 0 ? at : sim_rng_range(r, 1, p->nacts), &a);
    }
    /* A poison window or a broker outage with no payments inside it hits
     * only what happens to be in flight when it opens, and whether anything
     * is (so whether a relay meets the refusal or the silence at all) is a
     * matter of timing that a replay need not repeat: such a window gets a
     * batch of its own. */
    for (int k = 0; k < p->nacts && p->nacts < SIM_MAX_ACTS; k++) {
        const struct sim_act *open = &p->acts[k];
        int poison = open->max_payload == SIM_POISON_ALL_BYTES;
        int outage = open->outage == SIM_OUTAGE_REFUSE || open->outage == SIM_OUTAGE_HANG;
        if (open->kind != SIM_BROKER || !(poison || outage))
            continue;
        int paid = 0;
        for (int j = k + 1; j < p->nacts && !paid; j++) {
            const struct sim_act *b = &p->acts[j];
            if (b->kind == SIM_BROKER &&
                ((poison && b->max_payload == 0) || (outage && b->outage >= 0)))
                break;
            paid = b->kind == SIM_PAY;
        }
        if (paid)
            continue;
        sim_act_init(&a, SIM_PAY, 0);
        a.count = sim_rng_range(r, 2, 4);
        a.authorize = 1;
        a.capture = sim_rng_chance(r, 50);
        insert_act(p, k + 1, &a);
    }
    /* Half the poison windows refuse creations only: a PaymentCreated
     * payload carries the amount and is the only one longer than
     * SIM_POISON_CREATED_BYTES (about 213 bytes to a later version's 194),
     * so a payment's later versions reach the consumers while its creation
     * is dead-lettered.  They wait out the gap and are parked; the requeue
     * that follows brings the creation, and each parked version must then
     * be applied in its predecessor's transaction. */
    for (int k = 0; k < p->nacts; k++) {
        if (p->acts[k].kind != SIM_BROKER || p->acts[k].max_payload != SIM_POISON_ALL_BYTES ||
            !sim_rng_chance(r, 50))
            continue;
        p->acts[k].max_payload = SIM_POISON_CREATED_BYTES;
        /* Creations alone have no later version to park: the window's
         * first batch authorizes what it creates. */
        for (int j = k + 1; j < p->nacts; j++) {
            struct sim_act *b = &p->acts[j];
            if (b->kind == SIM_BROKER && b->max_payload == 0)
                break;
            if (b->kind == SIM_PAY) {
                b->authorize = 1;
                break;
            }
        }
    }
    /* Such a window proves nothing without the requeue that brings the
     * creations back: one follows its close when none does yet (no draw,
     * so the rest of the stream stays as it was). */
    for (int k = 0; k < p->nacts && p->nacts < SIM_MAX_ACTS; k++) {
        if (p->acts[k].kind != SIM_BROKER || p->acts[k].max_payload != SIM_POISON_CREATED_BYTES)
            continue;
        int close = next_close(p, k + 1), requeued = 0;
        for (int j = close + 1; close >= 0 && j < p->nacts && !requeued; j++)
            requeued = p->acts[j].kind == SIM_REQUEUE;
        if (close < 0 || requeued)
            continue;
        sim_act_init(&a, SIM_REQUEUE, -1);
        insert_act(p, close + 1, &a);
    }
}

/* A stale mark, from a stream of its own (as gen_infra's): with two relays
 * or more, sometimes the schedule ends with every relay restarted and all
 * but one paused, a payments batch that the one left claims, publishes and
 * then stalls on before its first mark for longer than its lease, and the
 * others resumed.  One of them takes the rows over when the lease ends,
 * publishes and marks them; the stalled relay's mark comes after that.
 * The fence (the claim's token, published_at IS NULL) must make it change
 * nothing, and no_two_live_leases reads from the claim history whether it
 * did.  Each relay restarted and paused by the plan, so that which relay
 * claims the batch, and whether another one is there to take it over, is
 * not a matter of timing. */
static void gen_stale_mark(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0xc2b2ae3d27d4eb4fULL, run);
    if (!sim_rng_chance(r, 25))
        return;
    int relays[SIM_MAX_PROCS], n = 0;
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == SIM_RELAY)
            relays[n++] = i;
    if (n < 2 || p->nacts + 3 * n + 1 > SIM_MAX_ACTS || p->nfaults == SIM_MAX_FAULTS)
        return;
    int stalled = relays[sim_rng_below(r, n)];
    for (int k = 0; k < n; k++) {
        if (relays[k] == stalled)
            continue;
        add_act(p, SIM_RESTART, relays[k]);
        add_act(p, SIM_PAUSE, relays[k]);
    }
    struct sim_fault *f = &p->faults[p->nfaults++];
    memset(f, 0, sizeof(*f));
    f->proc = stalled;
    f->incarnation = p->nacts;
    snprintf(f->point, sizeof(f->point), "relay/before_mark");
    f->action = SIM_STALL;
    f->stall_ms = p->procs[stalled].lease_ms + 1000;
    f->hit = 1;
    add_act(p, SIM_RESTART, stalled);
    struct sim_act *a = add_act(p, SIM_PAY, 0);
    a->count = sim_rng_range(r, 1, 3);
    a->authorize = sim_rng_chance(r, 50);
    for (int k = 0; k < n; k++)
        if (relays[k] != stalled)
            add_act(p, SIM_RESUME, relays[k]);
    a = add_act(p, SIM_SETTLE, -1);
    a->ms = p->procs[stalled].lease_ms + 2000;
}

/* One action of kind act for every process of kind, in process order. */
static void add_each(struct sim_plan *p, enum sim_kind kind, enum sim_act_kind act)
{
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == kind)
            add_act(p, act, i);
}

/* A net fault on the broker link of every process of kind (for a cut:
 * then blackhole). */
static void add_broker_net_each(struct sim_plan *p, enum sim_kind kind, enum sim_net net)
{
    for (int i = 0; i < p->nprocs; i++) {
        if (p->procs[i].kind != kind)
            continue;
        struct sim_act *a = add_act(p, SIM_NET, i);
        a->net = net;
        a->net_broker = 1;
    }
}

/* Silent consumer links at the end, from a stream of their own (as
 * gen_infra's): sometimes the broker takes every publish again (an outage
 * or a poison window still on is ended), every relay and every consumer is
 * restarted (up, consumers subscribed, no fault armed), each consumer's
 * broker link is cut at its first ACK and then swallows every byte without
 * closing (a half-open connection), and a payments batch goes through.
 * Round robin gives each consumer of a group a delivery of the batch, so
 * each one's ACK is lost and its connection goes silent for good.  Heartbeats (every half --bus-timeout-ms) make both
 * ends give such a connection up within two intervals, and the broker
 * redelivers what it held to the consumer's new connection.  A subscriber
 * without heartbeats waits for ever, and so does the broker: what it sent
 * into the silence, and every redelivery of it at the visibility timeout,
 * goes to a connection nobody reads, and the heal never converges.  Without
 * this ending that mistake passes whenever one consumer of the group kept
 * a live connection and the visibility timeout sent the lost deliveries
 * there. */
static void gen_silent_consumers(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x165667b19e3779f9ULL, run);
    if (!sim_rng_chance(r, 20))
        return;
    int consumers = 0, per_group[2] = { 0, 0 };
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].kind == SIM_CONSUMER) {
            consumers++;
            per_group[p->procs[i].group]++;
        }
    if (consumers == 0 || p->nacts + p->nprocs + consumers + 3 > SIM_MAX_ACTS)
        return;
    /* The broker's switches as the schedule leaves them: an outage or a
     * poison window still on is switched off. */
    int outage = SIM_OUTAGE_OFF, max_payload = 0;
    for (int k = 0; k < p->nacts; k++) {
        if (p->acts[k].kind != SIM_BROKER)
            continue;
        if (p->acts[k].outage >= 0)
            outage = p->acts[k].outage;
        if (p->acts[k].max_payload >= 0)
            max_payload = p->acts[k].max_payload;
    }
    struct sim_act *a;
    if (outage != SIM_OUTAGE_OFF || max_payload > 0) {
        a = add_act(p, SIM_BROKER, -1);
        if (outage != SIM_OUTAGE_OFF)
            a->outage = SIM_OUTAGE_OFF;
        if (max_payload > 0)
            a->max_payload = 0;
    }
    add_each(p, SIM_RELAY, SIM_RESTART);
    for (int i = 0; i < p->nprocs; i++) {
        if (p->procs[i].kind != SIM_CONSUMER)
            continue;
        /* Heartbeats every second: the silence is found in two. */
        p->procs[i].bus_timeout_ms = 2000;
        add_act(p, SIM_RESTART, i)->await_start = 1;
    }
    add_broker_net_each(p, SIM_CONSUMER, SIM_NET_CUT);
    /* A creation and an authorization each: at least two events per
     * payment for every group, one or more for each of its consumers. */
    int most = per_group[0] > per_group[1] ? per_group[0] : per_group[1];
    a = add_act(p, SIM_PAY, 0);
    a->count = sim_rng_range(r, most > 2 ? most : 2, 4);
    a->authorize = 1;
    /* Until every event is taken in, which is when the ACKs go out into
     * the cuts: the heal clears a cut that has not fired yet. */
    a = add_act(p, SIM_SETTLE, -1);
    a->ms = 5000;
    a->caught_up = 1;
}

/* Dead broker connections at the heal, from a stream of their own (as
 * gen_infra's): sometimes the schedule ends with the pipeline caught up,
 * every running relay paused, every relay's broker connection reset, then
 * a payments batch.  The heal resumes the relays after it has recorded
 * that every fault is off, so each meets its dead connection on the first
 * publish it makes with every fault off, and relay_recovers_after_heal
 * holds it to replacing that connection.  Without this window a relay
 * that keeps a dead connection passes: other relays, restarts and the
 * attempt limit finish its work for it. */
static void gen_dead_links(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x9e3779b97f4a7c15ULL, run);
    if (!sim_rng_chance(r, 30))
        return;
    int relays = 0;
    for (int i = 0; i < p->nprocs; i++)
        relays += p->procs[i].kind == SIM_RELAY;
    if (p->nacts + 2 + 2 * relays > SIM_MAX_ACTS)
        return;
    struct sim_act *a = add_act(p, SIM_SETTLE, -1);
    a->ms = sim_rng_range(r, 500, 1000);
    add_each(p, SIM_RELAY, SIM_PAUSE);
    add_broker_net_each(p, SIM_RELAY, SIM_NET_RESET);
    a = add_act(p, SIM_PAY, 0);
    a->count = sim_rng_range(r, 2, 4);
    a->authorize = 1;
    a->capture = sim_rng_chance(r, 50);
}

/* Clocks of the other processes, from a stream of their own: now and then
 * one relay or consumer runs with a wall clock that is off by up to two
 * minutes and may drift.  Leases, backoffs and heartbeats are measured on
 * the monotonic clock, which the runner leaves alone; what such a clock
 * skews is every time the process writes about itself, and the checker,
 * which orders by the database's and the broker's clocks, must not care. */
static void gen_clocks(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x9fb21c651e98df25ULL, run);
    if (!sim_rng_chance(r, 15) || p->nprocs < 2)
        return;
    struct sim_proc *x = &p->procs[sim_rng_range(r, 1, p->nprocs - 1)];
    if (x->kind == SIM_API)
        return;
    x->clock_offset_s = sim_rng_range(r, -120, 120);
    x->clock_rate_pct = PICK(r, 50, 100, 150, 200);
    if (x->clock_offset_s == 0)
        x->clock_offset_s = 1;
}

/* The broker dropping every connection (RabbitMQ's close_all_connections),
 * from a stream of its own: now and then once, between two actions. */
static void gen_broker_close(uint64_t seed, uint64_t run, struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed ^ 0x4cf5ad432745937fULL, run);
    if (!sim_rng_chance(r, 12) || p->nacts < 2 || p->nacts >= SIM_MAX_ACTS)
        return;
    struct sim_act a;
    sim_act_init(&a, SIM_BROKER_CLOSE, -1);
    /* Never between a park's follow-ups: they must come one after another. */
    int at = sim_rng_range(r, 1, p->nacts);
    while (at < p->nacts && p->acts[at].after_park)
        at++;
    insert_act(p, at, &a);
}

/* One PRNG drawn in a fixed order: layout, first faults, schedule.
 * Reordering the three calls would change the plan of every seed. */
void sim_generate(const struct sim_catalogue *cat, uint64_t seed, uint64_t run,
                  struct sim_plan *p)
{
    struct sim_rng rr, *r = &rr;
    sim_rng_init(r, seed, run);
    memset(p, 0, sizeof(*p));
    p->seed = seed;
    p->run = run;
    gen_layout(r, p);
    gen_first_faults(r, p, cat);
    gen_schedule(r, p, cat);
    gen_infra(seed, run, p, cat);
    gen_net(seed, run, p);
    gen_ops(seed, run, p);
    gen_slow_links(seed, run, p);
    gen_links(seed, run, p, cat);
    gen_broker_close(seed, run, p); /* inside the schedule, before the endings */
    gen_lock(seed, run, p);         /* the same */
    gen_stale_mark(seed, run, p);
    gen_silent_consumers(seed, run, p);
    gen_dead_links(seed, run, p);
    gen_clocks(seed, run, p);
    gen_refuse(seed, run, p);       /* after the rest: every earlier draw is as it was */
    gen_sever(seed, run, p);        /* the same */
}
