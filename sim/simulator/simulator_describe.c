/* simulator_describe.c -- a plan in one line (each run's progress line)
 * and its size (what every shrinking edit lowers); see simulator.h. */
#include "simulator.h"
#include "simulator_internal.h"

#include <stdarg.h>
#include <stdio.h>

struct sbuf {
    char *p;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3)))
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (w < 0)
        return;
    b->len += (size_t)w;
    if (b->len >= b->cap)
        b->len = b->cap - 1;
}

void sim_describe(const struct sim_plan *p, char *out, size_t outlen)
{
    struct sbuf b = { out, 0, outlen };
    char name[32];
    if (outlen == 0)
        return;
    out[0] = '\0';
    for (int i = 0; i < p->nprocs; i++) {
        sim_proc_name(p, i, name, sizeof(name));
        sb_add(&b, "%s%s%s", i ? " " : "", name,
               !p->procs[i].autostart ? "(late)" : sim_held_back(p, i) ? "(held)" : "");
    }
    if (p->duplicate || p->reorder || p->delay_ms)
        sb_add(&b, " | broker%s%s", p->duplicate ? " dup" : "", p->reorder ? " reorder" : "");
    if (p->delay_ms)
        sb_add(&b, " delay%d", p->delay_ms);
    sb_add(&b, " | faults");
    if (p->nfaults == 0)
        sb_add(&b, " none");
    for (int i = 0; i < p->nfaults; i++) {
        const struct sim_fault *f = &p->faults[i];
        sim_proc_name(p, f->proc, name, sizeof(name));
        sb_add(&b, " %s%s:%s=%s", name, f->incarnation >= 0 ? "'" : "", f->point,
               sim_action_names[f->action]);
        if (f->action == SIM_STALL)
            sb_add(&b, ":%d", f->stall_ms);
        sb_add(&b, "@%d%s", f->hit, f->every ? "+" : "");
    }
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].clock_offset_s != 0) {
            sim_proc_name(p, i, name, sizeof(name));
            sb_add(&b, " | clock %s %+d s x%d%%", name, p->procs[i].clock_offset_s,
                   p->procs[i].clock_rate_pct);
        }
    for (int i = 0; i < p->nprocs; i++)
        if (p->procs[i].db_deadline_ms > 0) {
            sim_proc_name(p, i, name, sizeof(name));
            sb_add(&b, " | deadline %s %d ms", name, p->procs[i].db_deadline_ms);
        }
    sb_add(&b, " | steps");
    for (int k = 0; k < p->nacts; k++) {
        const struct sim_act *a = &p->acts[k];
        if (a->proc >= 0)
            sim_proc_name(p, a->proc, name, sizeof(name));
        switch (a->kind) {
        case SIM_PAY:
            sb_add(&b, " pay(%d%s%s", a->count, a->authorize ? ",auth" : "",
                   a->capture ? ",capt" : "");
            if (a->retries)
                sb_add(&b, ",retry%d", a->retries);
            sb_add(&b, ")");
            break;
        case SIM_SETTLE:
            sb_add(&b, " settle(%s%d)", a->caught_up ? "caught-up," : "", a->ms);
            break;
        case SIM_KILL:
            sb_add(&b, " kill(%s)", name);
            break;
        case SIM_PAUSE:
            sb_add(&b, " pause(%s)", name);
            break;
        case SIM_RESUME:
            sb_add(&b, " resume(%s)", name);
            break;
        case SIM_RESTART:
            sb_add(&b, " restart(%s)", name);
            break;
        case SIM_BROKER:
            sb_add(&b, " broker(");
            if (a->outage >= 0)
                sb_add(&b, "outage=%s", a->outage == SIM_OUTAGE_REFUSE ? "refuse"
                                        : a->outage == SIM_OUTAGE_HANG ? "hang" : "off");
            if (a->duplicate >= 0)
                sb_add(&b, "dup=%s", a->duplicate ? "on" : "off");
            if (a->drop > 0)
                sb_add(&b, "drop=%d", a->drop);
            if (a->max_payload >= 0)
                sb_add(&b, "max_payload=%d", a->max_payload);
            sb_add(&b, ")");
            break;
        case SIM_REUSE:
            sb_add(&b, " reuse-key");
            break;
        case SIM_DB:
            sb_add(&b, " db(%s", sim_db_actions[a->db]);
            if (a->db == SIM_DB_LOCK)
                sb_add(&b, ",%s", sim_lock_tables[a->net_a]);
            if (a->db == SIM_DB_REFUSE)
                sb_add(&b, ",%s %s%s %s x%d", sim_refusals[a->net_a].on,
                       sim_refusals[a->net_a].table,
                       sim_refusals[a->net_a].at_commit ? " at commit" : "",
                       sim_refusals[a->net_a].sqlstate, a->count);
            if (a->db == SIM_DB_SEVER)
                sb_add(&b, ",%s%s%s %s%s x%d", sim_severs[a->net_a].on,
                       sim_severs[a->net_a].of ? " of " : "",
                       sim_severs[a->net_a].of ? sim_severs[a->net_a].of : "",
                       sim_severs[a->net_a].table,
                       sim_severs[a->net_a].at_commit ? " at commit" : "", a->count);
            if (a->db == SIM_DB_CRASH || a->db == SIM_DB_FREEZE || a->db == SIM_DB_HOLD_COMMITS ||
                a->db == SIM_DB_LOCK)
                sb_add(&b, ",%d ms", a->ms);
            if (a->db == SIM_DB_TERMINATE && a->proc >= 0)
                sb_add(&b, ",%s", name);
            sb_add(&b, ")");
            break;
        case SIM_BROKER_CRASH:
            sb_add(&b, " broker-crash(%d ms)", a->ms);
            break;
        case SIM_BROKER_CLOSE:
            sb_add(&b, " broker-close");
            break;
        case SIM_CLEANUP:
            sb_add(&b, " cleanup(%d ms)", a->ms);
            break;
        case SIM_CLEANUP_INBOX:
            sb_add(&b, " cleanup-inbox(%d ms)", a->ms);
            break;
        case SIM_REQUEUE:
            sb_add(&b, " requeue-all");
            break;
        case SIM_NET:
            sb_add(&b, " net(%s->%s,%s", name, a->net_broker ? "broker" : "pg",
                   sim_net_names[a->net]);
            if (a->net == SIM_NET_LATENCY || a->net == SIM_NET_SLICER)
                sb_add(&b, ",%d/%d", a->net_a, a->net_b);
            else if (a->net == SIM_NET_BANDWIDTH)
                sb_add(&b, ",%d kB/s", a->net_a);
            else if (a->net == SIM_NET_CUT)
                sb_add(&b, ",then %s", a->net_a ? "reset" : "blackhole");
            else if (a->net == SIM_NET_LIMIT_DATA)
                sb_add(&b, ",%d bytes", a->net_a);
            if (a->ms > 0)
                sb_add(&b, ",%d ms", a->ms);
            sb_add(&b, ")");
            break;
        }
    }
}

long sim_plan_size(const struct sim_plan *p)
{
    long n = p->nprocs + p->nfaults + p->nacts;
    n += (p->duplicate != 0) + (p->reorder != 0) + (p->delay_ms != 0);
    for (int i = 0; i < p->nfaults; i++)
        n += (p->faults[i].hit - 1) + p->faults[i].every;
    for (int k = 0; k < p->nacts; k++) {
        const struct sim_act *a = &p->acts[k];
        if (a->kind == SIM_PAY)
            n += a->count + a->retries + a->authorize + a->capture;
    }
    return n;
}
