/* runner_broker_crash.c -- the "broker_crash" step: the broker killed
 * with SIGKILL, down for down_ms, then started again on what it stored
 * (the fake broker's SQLite file with "durable", nothing without; a
 * RabbitMQ node restarts on its data, runner_rabbitmq_node.c).  Logged as
 * an outage like a database fault's, so its recovery time is measured the
 * same way (runner_dbfault.c). */
#include "runner_internal.h"
#include "cwlog.h"

int runner_step_broker_crash(struct sctx *s, const struct sc_step *st)
{
    struct proc *b = &s->broker;
    if (runner_rabbit(s->run)) {
        s->fault_started_us = cw_now_us();
        if (runner_rabbit_crash(s, st->down_ms) < 0)
            return -1;
        runner_outage_event(s, "broker", "crash", "rabbitmq node, quorum queues");
        return 0;
    }
    if (!proc_poll(b))
        return runner_fail(s, "broker_crash: the broker is not running");
    s->fault_started_us = cw_now_us();
    runner_rev_proc(s, "kill", "broker", b->pid, "signal", "SIGKILL");
    proc_kill(b);
    s->count.kills++;
    runner_hold(st->down_ms);
    if (runner_start_broker(s) < 0)
        return -1;
    runner_outage_event(s, "broker", "crash",
                        s->sc->broker_durable ? "durable store" : "in-memory store");
    return 0;
}
