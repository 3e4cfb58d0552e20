/* runner_dbfault.c -- the database and the broker as fault targets: a
 * scenario's own primary with a streaming standby, the "db" and
 * "broker_crash" steps, and how long the pipeline took to recover.
 *
 * Most scenarios share the run's throwaway cluster, each in a database of
 * its own; a "db" step then crashes, restarts or freezes that shared server,
 * which is harmless because scenarios run one at a time.  A scenario with
 * "database": {"standby": true} gets a primary and a standby of its own
 * instead: a failover leaves the old primary dead, which no later scenario
 * may inherit.  Its processes and the runner itself connect with a
 * multi-host connection string and target_session_attrs=read-write, so they
 * find the new primary the way a production client would.
 *
 * Recovery time is measured from the end of each database or broker fault
 * to the first event a consumer applied afterwards (its "apply" event): a
 * figure for the report, never a verdict, since it is the consumer's own
 * word about its own timing. */
#include "runner_internal.h"
#include "cwlog.h"
#include "evlog.h"
#include "pgfault.h"
#include "pgx.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int runner_step_broker_crash(struct sctx *s, const struct sc_step *st)
{
    struct proc *b = &s->broker;
    if (runner_rabbit(s->run)) {
        s->fault_started_us = cw_now_us();
        if (runner_rabbit_crash(s, st->down_ms) < 0)
            return -1;
        fault_event(s, "broker", "crash", "rabbitmq node, quorum queues");
        return 0;
    }
    if (!proc_poll(b))
        return runner_fail(s, "broker_crash: the broker is not running");
    s->fault_started_us = cw_now_us();
    runner_rev_proc(s, "kill", "broker", b->pid, "signal", "SIGKILL");
    proc_kill(b);
    s->kills++;
    hold(st->down_ms);
    if (runner_start_broker(s) < 0)
        return -1;
    fault_event(s, "broker", "crash", s->sc->broker_durable ? "durable store" : "in-memory store");
    return 0;
}
