/* runner_rabbitmq_node.c -- `crashwindow run --broker rabbitmq`: the scenarios
 * against a real RabbitMQ node instead of the fake broker.
 *
 * One throwaway node per run (scripts/rabbit-node, firehose on); each
 * scenario gets its own exchange (and with it its own queues and firehose
 * queue), so scenarios never see each other's messages without a node
 * restart between them.  The scenario's "broker" process is rabbit-bridge
 * (sim/rabbitbridge): it provisions the groups' queues, writes the broker log
 * from the firehose and answers the stats and reset frames the heal uses,
 * so the rest of the runner and the checker are the same for both brokers.
 *
 * What a real broker cannot do is skipped with its reason, never faked:
 * fault switches of the fake broker (outage, duplicate delivery, reorder,
 * payload limits, visibility timeouts) and the in-memory store whose loss
 * a hazard scenario proves.  broker_crash is real: kill -9 of the node,
 * then a restart on its data (quorum queues keep what they confirmed).
 * Before a scenario that crashes the node, the node's queue registry is
 * flushed once its queues are declared (scripts/rabbit-node sync says why:
 * RabbitMQ 3.10 saves it every few minutes, and a queue declared seconds
 * before a kill -9 comes back unregistered and empty). */
#include "runner_internal.h"
#include "target.h"
#include "cwlog.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int runner_rabbit(const struct runner *r)
{
    return r->o->broker != NULL && strcmp(r->o->broker, "rabbitmq") == 0;
}

const char *runner_rabbit_setup_skip(const struct scenario *sc, char *why, size_t whylen)
{
    const cJSON *sw = NULL;
    if (sc->broker_control != NULL)
        for (sw = sc->broker_control->child; sw != NULL && sc_broker_is_setting(sw->string);)
            sw = sw->next;
    if (sw != NULL) {
        snprintf(why, whylen, "needs the fake broker's '%s' switch", sw->string);
        return why;
    }
    for (int i = 0; i < sc->nexpect; i++) {
        const struct sc_expect *x = &sc->expect[i];
        if (strcmp(x->check, "publishes_refused") == 0 &&
            ((x->has_min && x->min > 0) || (x->has_equals && x->equals > 0))) {
            snprintf(why, whylen, "expects refused publishes (the fake broker's lease fence "
                     "or outage); RabbitMQ refuses none");
            return why;
        }
    }
    /* A visibility timeout no shorter than the whole scenario never fires
     * in it: redelivery on connection loss only, as RabbitMQ does. */
    if (sc->visibility_timeout_ms > 0 && sc->visibility_timeout_ms < sc->timeout_ms &&
        !sc->broker_durable) {
        snprintf(why, whylen, "needs the fake broker's visibility timeout (RabbitMQ "
                 "redelivers on connection loss only)");
        return why;
    }
    return NULL;
}

const char *runner_rabbit_step_skip(const struct scenario *sc, const struct sc_step *st,
                                    char *why, size_t whylen)
{
    if (st->verb == V_BROKER && !runner_rabbit_can_control(st->control)) {
        snprintf(why, whylen, "a broker step sets a fake-broker switch");
        return why;
    }
    if (st->verb == V_NET && st->net_peer == NP_BROKER && st->net.kind == NP_CUT) {
        snprintf(why, whylen, "a protocol cut on a broker link (the fault proxy reads the fake "
                 "broker's lines, not AMQP frames)");
        return why;
    }
    if (st->verb == V_NET && st->net_peer == NP_BROKER && st->net.kind == NP_LATENCY &&
        st->proc >= 0 && sc->procs[st->proc].kind == SC_RELAY &&
        st->net.latency_ms + st->net.jitter_ms >= sc->procs[st->proc].lease_ms) {
        snprintf(why, whylen, "a relay's broker link slower than its lease: only the fake "
                 "broker refuses a publish that arrives after its lease (RabbitMQ stores it)");
        return why;
    }
    if (st->verb == V_BROKER_CRASH && !sc->broker_durable) {
        snprintf(why, whylen, "proves the loss of an in-memory broker store; RabbitMQ's "
                 "quorum queues are durable");
        return why;
    }
    return NULL;
}

const char *runner_rabbit_skip(const struct scenario *sc, char *why, size_t whylen)
{
    if (runner_rabbit_setup_skip(sc, why, whylen) != NULL)
        return why;
    for (int i = 0; i < sc->nsteps; i++)
        if (runner_rabbit_step_skip(sc, &sc->steps[i], why, whylen) != NULL)
            return why;
    return NULL;
}

const char *runner_fake_skip(const struct scenario *sc, char *why, size_t whylen)
{
    for (int i = 0; i < sc->nsteps; i++) {
        const struct sc_step *st = &sc->steps[i];
        if (st->verb == V_NET && st->net_peer == NP_BROKER && st->net.kind == NP_PARTITION) {
            snprintf(why, whylen, "a kernel partition of a broker link needs RabbitMQ's TCP "
                     "link (--broker rabbitmq); the fake broker's links are Unix sockets");
            return why;
        }
        if (st->verb == V_NET && st->net_peer == NP_BROKER && st->net.kind == NP_WINDOW) {
            snprintf(why, whylen, "a window at an AMQP frame needs RabbitMQ (--broker "
                     "rabbitmq); the fake broker's links carry its own lines");
            return why;
        }
    }
    return NULL;
}

int runner_rabbit_start(struct runner *r)
{
    /* A node the caller started and keeps (`crashwindow mutants --target`
     * runs many short runs on one): its URL only. */
    r->rabbit_shared = r->o->rabbit_dir != NULL;
    if (r->rabbit_shared)
        cw_fmt(r->rabbit_dir, sizeof(r->rabbit_dir), "%s", r->o->rabbit_dir);
    else
        cw_fmt(r->rabbit_dir, sizeof(r->rabbit_dir), "%s/rabbit", r->tmp);
    char *argv[] = { r->rabbit_script, (char *)(r->rabbit_shared ? "url" : "start"),
                     r->rabbit_dir, NULL };
    char out[4096];
    int64_t t0 = cw_mono_ms();
    int rc = proc_run_capture(argv, NULL, 120000, out, sizeof(out));
    char *url = strstr(out, "amqp://");
    if (rc != 0 || url == NULL) {
        fprintf(stderr, "crashwindow: could not %s a RabbitMQ node: %.600s\n",
                r->rabbit_shared ? "reach" : "start", out);
        r->rabbit_dir[0] = '\0';
        return -1;
    }
    url[strcspn(url, "\r\n")] = '\0';
    cw_fmt(r->rabbit_url, sizeof(r->rabbit_url), "%s", url);
    if (!r->rabbit_shared)
        printf("rabbitmq node ready in %.1f s\n", (double)(cw_mono_ms() - t0) / 1000.0);
    fflush(stdout);
    return 0;
}

void runner_rabbit_stop(struct runner *r)
{
    if (r->rabbit_dir[0] == '\0' || r->rabbit_shared) {
        r->rabbit_dir[0] = '\0';
        return;
    }
    if (r->o->keep) {
        printf("--keep: the RabbitMQ node stays up (%s); stop it with: %s stop %s\n",
               r->rabbit_url, r->rabbit_script, r->rabbit_dir);
        return;
    }
    char *argv[] = { r->rabbit_script, (char *)"stop", r->rabbit_dir, NULL };
    char out[1024];
    if (proc_run_capture(argv, NULL, 120000, out, sizeof(out)) != 0)
        fprintf(stderr, "crashwindow: stopping the RabbitMQ node: %.300s\n", out);
    r->rabbit_dir[0] = '\0';
}

void runner_rabbit_address(struct sctx *s)
{
    struct runner *r = s->run;
    if (r->target != NULL) {
        /* A target names its own exchange; the node is reset between its
         * scenarios instead (runner_rabbit_reset). */
        cw_fmt(s->rabbitmq.exchange, sizeof(s->rabbitmq.exchange), "%s", r->target->exchange);
        cw_fmt(s->broker_addr, sizeof(s->broker_addr), "%s", r->rabbit_url);
        return;
    }
    cw_fmt(s->rabbitmq.exchange, sizeof(s->rabbitmq.exchange), "cw%d-s%d", (int)getpid(), r->nsc);
    cw_fmt(s->broker_addr, sizeof(s->broker_addr), "%s?exchange=%s", r->rabbit_url,
        s->rabbitmq.exchange);
}

int runner_rabbit_bridge_argv(struct sctx *s, char **argv, int max)
{
    struct runner *r = s->run;
    int n = 0;
    argv[n++] = r->exe_bridge;
    argv[n++] = (char *)"--url";
    argv[n++] = r->rabbit_url;
    argv[n++] = (char *)"--exchange";
    argv[n++] = s->rabbitmq.exchange;
    argv[n++] = (char *)"--socket";
    argv[n++] = s->broker_sock;
    argv[n++] = (char *)"--events";
    argv[n++] = s->broker.events_path;
    const struct target *t = r->target;
    for (int i = 0; t != NULL && i < t->nqueues && n + 5 < max; i++) {
        cw_fmt(s->rabbitmq.groups[i], sizeof(s->rabbitmq.groups[i]), "%s:%s", t->queue_name[i],
            t->queue_group[i]);
        argv[n++] = (char *)"--watch";
        argv[n++] = s->rabbitmq.groups[i];
    }
    if (t != NULL && t->message_id_field != NULL && n + 3 < max) {
        argv[n++] = (char *)"--message-id-field";
        argv[n++] = (char *)t->message_id_field;
    }
    for (int i = 0; t == NULL && i < s->sc->nprocs && n + 3 < max; i++) {
        const struct sc_proc *sp = &s->sc->procs[i];
        if (sp->kind != SC_CONSUMER)
            continue;
        const char *topic = "payments";
        for (int j = 0; j < sp->nargs; j++)
            if (strcmp(sp->arg_key[j], "topic") == 0 && sp->arg_val[j] != NULL)
                topic = sp->arg_val[j];
        cw_fmt(s->rabbitmq.groups[i], sizeof(s->rabbitmq.groups[i]), "%s:%s", topic,
            sp->group ? sp->group : sp->consumer_name);
        argv[n++] = (char *)"--group";
        argv[n++] = s->rabbitmq.groups[i];
    }
    argv[n] = NULL;
    return n;
}

int runner_rabbit_reset(struct sctx *s)
{
    struct runner *r = s->run;
    char out[1024];
    char *argv[] = { r->rabbit_script, (char *)"reset", r->rabbit_dir, NULL };
    if (proc_run_capture(argv, NULL, 60000, out, sizeof(out)) != 0)
        return runner_fail(s, "rabbit-node reset: %s", out);
    return 0;
}

int runner_rabbit_settle(struct sctx *s)
{
    struct runner *r = s->run;
    int crashes = 0;
    for (int i = 0; i < s->sc->nsteps; i++)
        crashes |= s->sc->steps[i].verb == V_BROKER_CRASH;
    if (!crashes)
        return 0;
    char out[1024];
    char *argv[] = { r->rabbit_script, (char *)"sync", r->rabbit_dir, NULL };
    if (proc_run_capture(argv, NULL, 60000, out, sizeof(out)) != 0)
        return runner_fail(s, "could not flush the RabbitMQ node's queue registry: %.300s", out);
    return 0;
}

int runner_rabbit_can_control(const cJSON *control)
{
    const cJSON *only = control != NULL ? control->child : NULL;
    return only != NULL && only->next == NULL && strcmp(only->string, "close_connections") == 0
        && cJSON_IsTrue(only);
}

int runner_rabbit_close_connections(struct sctx *s)
{
    struct runner *r = s->run;
    char out[2048];
    char *argv[] = { r->rabbit_script, (char *)"ctl", r->rabbit_dir,
                     (char *)"close_all_connections", (char *)"crashwindow: the broker closes "
                     "every connection", NULL };
    if (proc_run_capture(argv, NULL, 60000, out, sizeof(out)) != 0)
        return runner_fail(s, "broker close_connections: rabbitmqctl failed: %.300s", out);
    return 0;
}

int runner_rabbit_crash(struct sctx *s, int down_ms)
{
    struct runner *r = s->run;
    char out[2048];
    char *crash[] = { r->rabbit_script, (char *)"crash", r->rabbit_dir, NULL };
    runner_rev_proc(s, "kill", "rabbitmq", 0, "signal", "SIGKILL");
    if (proc_run_capture(crash, NULL, 60000, out, sizeof(out)) != 0)
        return runner_fail(s, "broker_crash: could not kill the RabbitMQ node: %.300s", out);
    s->count.kills++;
    if (down_ms > 0)
        nap(down_ms);
    char *up[] = { r->rabbit_script, (char *)"up", r->rabbit_dir, NULL };
    if (proc_run_capture(up, NULL, 120000, out, sizeof(out)) != 0)
        return runner_fail(s, "broker_crash: the RabbitMQ node did not come back: %.300s", out);
    s->count.restarts++;
    runner_rev_proc(s, "restart", "rabbitmq", 0, "kind", "broker");
    return 0;
}
