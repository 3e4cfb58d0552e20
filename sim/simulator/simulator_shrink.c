/* simulator_shrink.c -- the one-edit-smaller variants of a plan; see
 * simulator.h.
 *
 * Shrinking is greedy delta debugging over the plan, not over the rendered
 * JSON: an edit is "drop relay-2", "drop the third action", "fire that
 * fault on its first hit", and the renderer makes a runnable scenario of
 * whatever remains.  The variants are enumerated by index in a fixed order,
 * the edits that remove most first (a process takes its faults and actions
 * with it), so that the driver's greedy loop -- keep an edit when the run
 * still fails the same way, else try the next index -- spends its budget
 * where it pays.  Every edit strictly lowers sim_plan_size(), so the loop
 * ends. */
#include "simulator.h"

#include <stdio.h>
#include <string.h>

/* Removes action a; faults armed by it (a restart) go with it. */
static void remove_act(struct sim_plan *p, int a)
{
    int nf = 0;
    for (int i = 0; i < p->nfaults; i++) {
        struct sim_fault f = p->faults[i];
        if (f.incarnation == a)
            continue;
        if (f.incarnation > a)
            f.incarnation--;
        p->faults[nf++] = f;
    }
    p->nfaults = nf;
    memmove(&p->acts[a], &p->acts[a + 1], (size_t)(p->nacts - a - 1) * sizeof(p->acts[0]));
    p->nacts--;
}

static void remove_fault(struct sim_plan *p, int i)
{
    memmove(&p->faults[i], &p->faults[i + 1],
            (size_t)(p->nfaults - i - 1) * sizeof(p->faults[0]));
    p->nfaults--;
}

static int acts_on_proc(enum sim_act_kind k)
{
    return k == SIM_KILL || k == SIM_PAUSE || k == SIM_RESUME || k == SIM_RESTART ||
           k == SIM_NET || k == SIM_DB;
}

/* Removes process j with its faults and the actions aimed at it. */
static void remove_proc(struct sim_plan *p, int j)
{
    for (int a = p->nacts - 1; a >= 0; a--)
        if (acts_on_proc(p->acts[a].kind) && p->acts[a].proc == j)
            remove_act(p, a);
    for (int i = p->nfaults - 1; i >= 0; i--)
        if (p->faults[i].proc == j)
            remove_fault(p, i);
    memmove(&p->procs[j], &p->procs[j + 1], (size_t)(p->nprocs - j - 1) * sizeof(p->procs[0]));
    p->nprocs--;
    for (int i = 0; i < p->nfaults; i++)
        if (p->faults[i].proc > j)
            p->faults[i].proc--;
    for (int a = 0; a < p->nacts; a++)
        if (acts_on_proc(p->acts[a].kind) && p->acts[a].proc > j)
            p->acts[a].proc--;
}

/* May process j go?  The API stays, so do the last relay and the last
 * accounting consumer (the invariants need a pipeline). */
static int proc_droppable(const struct sim_plan *p, int j)
{
    const struct sim_proc *x = &p->procs[j];
    if (x->kind == SIM_API)
        return 0;
    int same = 0;
    for (int i = 0; i < p->nprocs; i++)
        same += p->procs[i].kind == x->kind && p->procs[i].group == x->group;
    if (x->kind == SIM_CONSUMER && x->group == 1)
        return 1;
    return same > 1;
}

/* Payments batches the plan must keep: with faults in the API's first
 * incarnation the first batch may create nothing, and a run without
 * payments checks nothing. */
static int min_batches(const struct sim_plan *p)
{
    for (int i = 0; i < p->nfaults; i++)
        if (p->faults[i].proc == 0 && p->faults[i].incarnation == -1)
            return 2;
    return 1;
}

static const char *act_name(enum sim_act_kind k)
{
    static const char *const names[] = { "pay", "settle", "kill", "pause", "resume",
                                         "restart", "broker", "reuse", "db", "broker_crash",
                                         "net", "cleanup", "requeue", "cleanup_inbox" };
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

int sim_shrink_variant(const struct sim_plan *in, int k, struct sim_plan *out,
                       char *what, size_t whatlen)
{
    int idx = 0;
    *out = *in;
    /* 1. fewer processes */
    for (int j = 0; j < in->nprocs; j++) {
        if (!proc_droppable(in, j) || idx++ != k)
            continue;
        snprintf(what, whatlen, "drop process %d (%s)", j,
                 in->procs[j].kind == SIM_RELAY ? "a relay" : "a consumer");
        remove_proc(out, j);
        return 1;
    }
    /* 2. drop a nemesis or settle action */
    for (int a = 0; a < in->nacts; a++) {
        if (in->acts[a].kind == SIM_PAY || idx++ != k)
            continue;
        snprintf(what, whatlen, "drop action %d (%s)", a, act_name(in->acts[a].kind));
        remove_act(out, a);
        return 1;
    }
    /* 3. drop a fault */
    for (int i = 0; i < in->nfaults; i++) {
        if (idx++ != k)
            continue;
        snprintf(what, whatlen, "drop fault %s", in->faults[i].point);
        remove_fault(out, i);
        return 1;
    }
    /* 4. drop a payments batch */
    int npay = 0;
    for (int a = 0; a < in->nacts; a++)
        npay += in->acts[a].kind == SIM_PAY;
    for (int a = 0; a < in->nacts && npay > min_batches(in); a++) {
        if (in->acts[a].kind != SIM_PAY || idx++ != k)
            continue;
        snprintf(what, whatlen, "drop payments batch at action %d", a);
        remove_act(out, a);
        return 1;
    }
    /* 5. broker switches at start */
    if (in->duplicate && idx++ == k) {
        snprintf(what, whatlen, "broker: no duplicates");
        out->duplicate = 0;
        return 1;
    }
    if (in->reorder && idx++ == k) {
        snprintf(what, whatlen, "broker: no reorder");
        out->reorder = 0;
        return 1;
    }
    if (in->delay_ms && idx++ == k) {
        snprintf(what, whatlen, "broker: no delay");
        out->delay_ms = 0;
        return 1;
    }
    /* 6. smaller batches */
    for (int a = 0; a < in->nacts; a++) {
        const struct sim_act *x = &in->acts[a];
        struct sim_act *y = &out->acts[a];
        if (x->kind != SIM_PAY)
            continue;
        if (x->count > 1 && idx++ == k) {
            y->count = x->count / 2;
            snprintf(what, whatlen, "batch at action %d: %d payments", a, y->count);
            return 1;
        }
        if (x->retries > 0 && idx++ == k) {
            y->retries = 0;
            snprintf(what, whatlen, "batch at action %d: no retries", a);
            return 1;
        }
        if (x->capture && idx++ == k) {
            y->capture = 0;
            snprintf(what, whatlen, "batch at action %d: no capture", a);
            return 1;
        }
        if (x->authorize && idx++ == k) {
            y->authorize = 0;
            y->capture = 0;
            snprintf(what, whatlen, "batch at action %d: no authorize", a);
            return 1;
        }
    }
    /* 7. earlier hits, one-shot faults */
    for (int i = 0; i < in->nfaults; i++) {
        const struct sim_fault *f = &in->faults[i];
        if (f->hit > 2 && idx++ == k) {
            out->faults[i].hit = 1;
            snprintf(what, whatlen, "fault %s on hit 1", f->point);
            return 1;
        }
        if (f->hit > 1 && idx++ == k) {
            out->faults[i].hit = f->hit - 1;
            snprintf(what, whatlen, "fault %s on hit %d", f->point, f->hit - 1);
            return 1;
        }
        if (f->every && idx++ == k) {
            out->faults[i].every = 0;
            snprintf(what, whatlen, "fault %s fires once", f->point);
            return 1;
        }
    }
    return 0;
}
