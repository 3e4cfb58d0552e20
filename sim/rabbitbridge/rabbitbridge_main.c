/* rabbitbridge_main.c -- rabbit-bridge: what the runner needs from a real
 * RabbitMQ node, in the form the fake broker gives it.
 *
 *   rabbit-bridge --url AMQP_URL --exchange X --socket PATH --events FILE
 *                 [--group TOPIC:GROUP]... [--watch QUEUE:GROUP]...
 *                 [--message-id-field FIELD]
 *
 * 1. Topology: declares X and every group's queue (bus_declare_group),
 *    before any relay publishes, as a deployment provisions it.  A target
 *    (someone else's pipeline) declares its own: --watch names each of its
 *    queues and the consumer group reading it, which the bridge never
 *    declares, and --message-id-field says which top-level field of a JSON
 *    body holds the message id when the message_id property is empty.
 * 2. The broker log: RabbitMQ's firehose (on from boot in the nodes of
 *    scripts/rabbit-node) copies every publish and every delivery to
 *    amq.rabbitmq.trace.  A durable classic queue firehose.X bound there with
 *    "publish.X", "deliver.X.#" and "publish." (the default exchange, which
 *    carries the consumers' delayed requeues) feeds this process, which
 *    writes each as one line of the fake broker's log format (fakebroker.h,
 *    LOG ENTRIES): publish (message_id, type, partition_key,
 *    aggregate_version, payload_sha256, client = the publisher's app_id,
 *    status stored, or refused when no queue took it), deliver (group,
 *    message_id, redelivered, delivery_count) and nack (group, message_id,
 *    requeue, delay_ms: a delayed requeue).  A trace message is acked only
 *    after its line is written, so one redelivered after a node crash (its
 *    ack lost with the node) was logged already and is not logged twice.  The queue is classic, not quorum: after a kill -9
 *    a quorum queue takes a while to elect its leader again, and the trace
 *    copies RabbitMQ routes to it meanwhile (unconfirmed) were seen to
 *    vanish; a classic queue takes them as soon as the node is up.  What
 *    a crash loses of it (copies not yet read) is recovered below from the
 *    deliveries.  What the firehose cannot see: basic.nack of a publish the
 *    queue refused (RabbitMQ traces it as routed; the relay never marks it),
 *    acks, and redeliveries that have not happened yet.
 * 3. The control socket (its own thread and AMQP connection, so that it
 *    answers while the firehose side waits for a restarting node): the fake
 *    broker's protocol, in the part the runner uses.  hello; stats, whose
 *    groups show "ready" (the group's queue) and "delayed" (its retry
 *    queue) from passive queue.declare ("unacked" is not visible over AMQP
 *    and reads 0: the heal's database check covers a message applied but
 *    not yet acked), and a "(firehose)" entry with the trace messages not
 *    yet in the log; stats first waits until the firehose side has twice
 *    found nothing more to read, so the log holds what reached us before
 *    the request; control with reset (nothing to reset); any fault switch
 *    is an error naming it: those scenarios need the fake broker.
 * The firehose side reconnects when the node goes away (broker_crash kills
 * it) and logs a "disconnect" line with the reason. */
#include "bus.h"
#include "cliutil.h"
#include "cwlog.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_GROUPS 16
/* The firehose connection's bound: a quorum queue's declare right after a
 * node restart may wait for its leader for a few seconds. */
#define TIMEOUT_MS 5000
/* The control thread's own connection: short, because the runner's control
 * calls give up after 3 s and are asked again. */
#define CTL_TIMEOUT_MS 1000
#define PUMP_BATCH 200
#define PUMP_WAIT_MS 50

struct opts {
    const char *url, *exchange, *socket_path, *events;
    char topic[MAX_GROUPS][64], group[MAX_GROUPS][64];
    int ngroups;
    /* A target's own queues (--watch QUEUE:GROUP): its consumers declare
     * them; the bridge only names their deliveries and counts what waits. */
    char watch_queue[MAX_GROUPS][128], watch_group[MAX_GROUPS][64];
    int nwatch;
    /* Where a target's messages carry their id when not in the message_id
     * property: a top-level field of a JSON body, or NULL. */
    const char *id_field;
};

struct bridge {
    struct opts o;
    char full_url[1200];
    char host[256], user[128], password[128], vhost[128];
    int port;
    amqp_connection_state_t conn;   /* the firehose consumer (main thread); NULL while down */
    amqp_connection_state_t ctl;    /* the control thread's, for passive declares */
    atomic_int connected;           /* conn is up */
    atomic_long idle_gen;           /* firehose waits that ended with nothing more to read */
    int catching_up;                /* reading a backlog after a reconnect */
    int reconnects;
    int listen_fd;
    long lines;
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void usage(FILE *f, int whole)
{
    fprintf(f, "usage: rabbit-bridge --url AMQP_URL --exchange NAME --socket PATH "
               "--events FILE [--group TOPIC:GROUP]... [--watch QUEUE:GROUP]...\n"
               "                     [--message-id-field FIELD]\n");
    if (!whole)
        return;
    fprintf(f,
            "a RabbitMQ node made to look like the fake broker (the runner starts it)\n"
            "  --url AMQP_URL           amqp://USER:PASS@HOST:PORT/VHOST of the node\n"
            "  --exchange NAME          the exchange the relays publish to\n"
            "  --socket PATH            the Unix socket it answers the fake broker's\n"
            "                           control protocol on\n"
            "  --events FILE            the broker log it writes (the fake broker's format)\n"
            "  --group TOPIC:GROUP      declare GROUP's queue for TOPIC (repeatable)\n"
            "  --watch QUEUE:GROUP      a target's own QUEUE, read by consumer group GROUP,\n"
            "                           logged but never declared (repeatable)\n"
            "  --message-id-field FIELD the top-level JSON field of a body holding the\n"
            "                           message id when the message_id property is empty\n"
            "Exit: 0 after SIGTERM, 1 could not start, 2 bad usage.\n");
}

/* --watch QUEUE:GROUP, at most MAX_GROUPS of them. */
static int take_watch(const char *v, void *ctx, char *err, size_t errlen)
{
    struct opts *o = ctx;
    const char *colon = strrchr(v, ':');
    if (colon == NULL || colon == v || colon[1] == '\0' || o->nwatch == MAX_GROUPS ||
        (size_t)(colon - v) >= 128 || strlen(colon + 1) >= 64) {
        snprintf(err, errlen, "--watch takes QUEUE:GROUP (at most %d)", MAX_GROUPS);
        return -1;
    }
    snprintf(o->watch_queue[o->nwatch], 128, "%.*s", (int)(colon - v), v);
    snprintf(o->watch_group[o->nwatch], 64, "%s", colon + 1);
    o->nwatch++;
    return 0;
}

/* --group TOPIC:GROUP, at most MAX_GROUPS of them. */
static int take_group(const char *v, void *ctx, char *err, size_t errlen)
{
    struct opts *o = ctx;
    const char *colon = strchr(v, ':');
    if (colon == NULL || colon == v || colon[1] == '\0' || o->ngroups == MAX_GROUPS ||
        (size_t)(colon - v) >= 64 || strlen(colon + 1) >= 64) {
        snprintf(err, errlen, "--group takes TOPIC:GROUP (at most %d)", MAX_GROUPS);
        return -1;
    }
    snprintf(o->topic[o->ngroups], 64, "%.*s", (int)(colon - v), v);
    snprintf(o->group[o->ngroups], 64, "%s", colon + 1);
    o->ngroups++;
    return 0;
}

/* 0, 1 after --help (usage printed), -1 on bad usage (said). */
static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    const struct cw_opt opts[] = {
        CW_OPT_STRING("--url", &o->url),
        CW_OPT_STRING("--exchange", &o->exchange),
        CW_OPT_STRING("--socket", &o->socket_path),
        CW_OPT_STRING("--events", &o->events),
        CW_OPT_CALL("--group", take_group, o),
        CW_OPT_CALL("--watch", take_watch, o),
        CW_OPT_STRING("--message-id-field", &o->id_field),
    };
    /* Every argument is an option with a value (--help and -h aside); a last one alone is
     * refused for its missing value before its name is looked at. */
    const struct cw_opts_style style = {
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .value_first = 1,
        .unknown = "unknown option %s",
        .missing = "%s needs a value",
    };
    char err[8192]; /* the offending argument in full, as it always was */
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc, argv, NULL, err, sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout, 1);
        return 1;
    }
    if (rc != CW_OPTS_OK) {
        fprintf(stderr, "rabbit-bridge: %s\n", err);
        return -1;
    }
    if (o->url == NULL || o->exchange == NULL || o->socket_path == NULL || o->events == NULL ||
        strncmp(o->url, "amqp://", 7) != 0 || strchr(o->url, '?') != NULL) {
        usage(stderr, 0);
        return -1;
    }
    return 0;
}

static int split_url(struct bridge *b)
{
    char buf[1100];
    snprintf(buf, sizeof(buf), "%s", b->o.url);
    struct amqp_connection_info ci;
    if (amqp_parse_url(buf, &ci) != AMQP_STATUS_OK)
        return -1;
    snprintf(b->host, sizeof(b->host), "%s", ci.host);
    snprintf(b->user, sizeof(b->user), "%s", ci.user);
    snprintf(b->password, sizeof(b->password), "%s", ci.password);
    snprintf(b->vhost, sizeof(b->vhost), "%s", ci.vhost);
    b->port = ci.port;
    snprintf(b->full_url, sizeof(b->full_url), "%s?exchange=%s", b->o.url, b->o.exchange);
    return 0;
}

/* ---- the AMQP side ------------------------------------------------------ */

static int rpc_ok(amqp_connection_state_t c, const char *what, char *err, size_t errlen)
{
    amqp_rpc_reply_t r = amqp_get_rpc_reply(c);
    if (r.reply_type == AMQP_RESPONSE_NORMAL)
        return 0;
    if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION)
        snprintf(err, errlen, "%s: %s", what, amqp_error_string2(r.library_error));
    else
        snprintf(err, errlen, "%s: refused by the broker", what);
    return -1;
}

static void disconnect(struct bridge *b, const char *why)
{
    if (b->conn == NULL)
        return;
    atomic_store(&b->connected, 0);
    amqp_destroy_connection(b->conn);
    b->conn = NULL;
    cwlog_simple("disconnect", "reason", why);
}

/* Connects, declares the topology and the firehose queue, and starts
 * consuming it on channel 1 (channel 2 is for passive declares, whose
 * failure closes their channel).  0, or -1 with err. */
static int connect_node(struct bridge *b, char *err, size_t errlen)
{
    for (int i = 0; i < b->o.ngroups; i++)
        if (bus_declare_group(b->full_url, b->o.topic[i], b->o.group[i], TIMEOUT_MS, err,
                              errlen) != BUS_OK)
            return -1;
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    struct timeval tv = { TIMEOUT_MS / 1000, (TIMEOUT_MS % 1000) * 1000 };
    if (s == NULL || amqp_socket_open_noblock(s, b->host, b->port, &tv) != AMQP_STATUS_OK) {
        snprintf(err, errlen, "could not connect to %s:%d", b->host, b->port);
        amqp_destroy_connection(c);
        return -1;
    }
    amqp_set_rpc_timeout(c, &tv);
    amqp_set_handshake_timeout(c, &tv);
    amqp_rpc_reply_t r = amqp_login(c, b->vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, b->user,
                                    b->password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        snprintf(err, errlen, "login refused");
        amqp_destroy_connection(c);
        return -1;
    }
    char q[200];
    /* Classic: see the file's head.  Not "X.firehose": its own deliveries
     * are traced too, and a name that
     * matched "deliver.X.#" would feed the firehose with itself forever. */
    snprintf(q, sizeof(q), "firehose.%s", b->o.exchange);
    amqp_channel_open(c, 1);
    int ok = rpc_ok(c, "channel.open", err, errlen) == 0;
    amqp_table_entry_t qa = { amqp_cstring_bytes("x-queue-type"),
                              { AMQP_FIELD_KIND_UTF8, { .bytes = amqp_cstring_bytes("classic") } } };
    amqp_table_t qargs = { 1, &qa };
    if (ok) {
        amqp_queue_declare(c, 1, amqp_cstring_bytes(q), 0, 1, 0, 0, qargs);
        ok = rpc_ok(c, "declaring the firehose queue", err, errlen) == 0;
    }
    /* Our queues are named after the exchange; a target's watched queues
     * may be named anything, each bound by its own name. */
    char keys[3 + MAX_GROUPS][200];
    int nkeys = 3;
    snprintf(keys[0], sizeof(keys[0]), "publish.%s", b->o.exchange);
    snprintf(keys[1], sizeof(keys[1]), "deliver.%s.#", b->o.exchange);
    snprintf(keys[2], sizeof(keys[2]), "publish.");
    for (int i = 0; i < b->o.nwatch; i++)
        snprintf(keys[nkeys++], sizeof(keys[0]), "deliver.%s", b->o.watch_queue[i]);
    for (int i = 0; i < nkeys && ok; i++) {
        amqp_queue_bind(c, 1, amqp_cstring_bytes(q), amqp_cstring_bytes("amq.rabbitmq.trace"),
                        amqp_cstring_bytes(keys[i]), amqp_empty_table);
        ok = rpc_ok(c, "binding the firehose queue", err, errlen) == 0;
    }
    if (ok) {
        amqp_basic_qos(c, 1, 0, 500, 0);
        ok = rpc_ok(c, "basic.qos", err, errlen) == 0;
    }
    if (ok) {
        amqp_basic_consume(c, 1, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0, 0,
                           amqp_empty_table);
        ok = rpc_ok(c, "consuming the firehose queue", err, errlen) == 0;
    }
    if (!ok) {
        amqp_destroy_connection(c);
        return -1;
    }
    b->conn = c;
    b->catching_up = b->reconnects++ > 0;
    atomic_store(&b->connected, 1);
    cwlog_simple("connect", "target", "rabbitmq");
    return 0;
}

static const amqp_field_value_t *tget(const amqp_table_t *t, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; t != NULL && i < t->num_entries; i++)
        if (t->entries[i].key.len == kl && memcmp(t->entries[i].key.bytes, key, kl) == 0)
            return &t->entries[i].value;
    return NULL;
}

static const amqp_table_t *tget_table(const amqp_table_t *t, const char *key)
{
    const amqp_field_value_t *v = tget(t, key);
    return v != NULL && v->kind == AMQP_FIELD_KIND_TABLE ? &v->value.table : NULL;
}

/* A string field into out ("" when absent). */
static void tget_str(const amqp_table_t *t, const char *key, char *out, size_t n)
{
    const amqp_field_value_t *v = tget(t, key);
    out[0] = '\0';
    if (v != NULL && (v->kind == AMQP_FIELD_KIND_UTF8 || v->kind == AMQP_FIELD_KIND_BYTES))
        snprintf(out, n, "%.*s", (int)v->value.bytes.len, (const char *)v->value.bytes.bytes);
}

static int tget_int(const amqp_table_t *t, const char *key, long long *out)
{
    const amqp_field_value_t *v = tget(t, key);
    if (v == NULL)
        return 0;
    switch (v->kind) {
    case AMQP_FIELD_KIND_I8: *out = v->value.i8; return 1;
    case AMQP_FIELD_KIND_U8: *out = v->value.u8; return 1;
    case AMQP_FIELD_KIND_I16: *out = v->value.i16; return 1;
    case AMQP_FIELD_KIND_U16: *out = v->value.u16; return 1;
    case AMQP_FIELD_KIND_I32: *out = v->value.i32; return 1;
    case AMQP_FIELD_KIND_U32: *out = v->value.u32; return 1;
    case AMQP_FIELD_KIND_I64: *out = v->value.i64; return 1;
    case AMQP_FIELD_KIND_U64: *out = (long long)v->value.u64; return 1;
    case AMQP_FIELD_KIND_BOOLEAN: *out = v->value.boolean; return 1;
    default: return 0;
    }
}

/* The number of entries of an array field (routed_queues), -1 when absent. */
static int tget_array_len(const amqp_table_t *t, const char *key)
{
    const amqp_field_value_t *v = tget(t, key);
    if (v == NULL || v->kind != AMQP_FIELD_KIND_ARRAY)
        return -1;
    return v->value.array.num_entries;
}

static void sha256_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    out[0] = '\0';
    if (EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return;
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The group of queue "X.T.G" (and of its retry queue "X.T.G.retry"), or
 * NULL when the queue is not one of ours. */
static const char *group_of(const struct bridge *b, const char *queue, int *retry)
{
    for (int i = 0; i < b->o.nwatch; i++) {
        if (strcmp(queue, b->o.watch_queue[i]) == 0) {
            *retry = 0;
            return b->o.watch_group[i];
        }
    }
    for (int i = 0; i < b->o.ngroups; i++) {
        char q[256];
        snprintf(q, sizeof(q), "%s.%s.%s", b->o.exchange, b->o.topic[i], b->o.group[i]);
        size_t n = strlen(q);
        if (strncmp(queue, q, n) != 0)
            continue;
        if (queue[n] == '\0') {
            *retry = 0;
            return b->o.group[i];
        }
        if (strcmp(queue + n, ".retry") == 0) {
            *retry = 1;
            return b->o.group[i];
        }
    }
    return NULL;
}

/* ---- message ids with a publish line ------------------------------------ */

struct idset {
    char **slot;
    size_t cap, n;
};

static size_t id_hash(const char *s)
{
    size_t h = 5381;
    for (; *s != '\0'; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* 1 when id was in the set; adds it either way. */
static int idset_add(struct idset *set, const char *id)
{
    if (set->n * 2 >= set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 1024;
        char **slot = calloc(cap, sizeof(*slot));
        if (slot == NULL)
            abort();
        for (size_t i = 0; i < set->cap; i++) {
            if (set->slot[i] == NULL)
                continue;
            size_t j = id_hash(set->slot[i]) & (cap - 1);
            while (slot[j] != NULL)
                j = (j + 1) & (cap - 1);
            slot[j] = set->slot[i];
        }
        free(set->slot);
        set->slot = slot;
        set->cap = cap;
    }
    size_t j = id_hash(id) & (set->cap - 1);
    while (set->slot[j] != NULL) {
        if (strcmp(set->slot[j], id) == 0)
            return 1;
        j = (j + 1) & (set->cap - 1);
    }
    set->slot[j] = strdup(id);
    if (set->slot[j] == NULL)
        abort();
    set->n++;
    return 0;
}

static struct idset published_ids;

static void add_publish_fields(cJSON *ev, const amqp_envelope_t *env, const char *app,
                               const char *id, const char *type, const char *key,
                               const amqp_table_t *mh)
{
    char sha[65];
    long long v = 0;
    sha256_hex(env->message.body.bytes, env->message.body.len, sha);
    cJSON_AddStringToObject(ev, "client", app);
    cJSON_AddStringToObject(ev, "message_id", id);
    cJSON_AddStringToObject(ev, "type", type);
    if (key[0] != '\0')
        cJSON_AddStringToObject(ev, "partition_key", key);
    if (tget_int(mh, "aggregate_version", &v))
        cJSON_AddNumberToObject(ev, "aggregate_version", (double)v);
    cJSON_AddStringToObject(ev, "payload_sha256", sha);
}

/* A top-level string (or integer) field of a JSON message body into out,
 * or "" when the body is not JSON or lacks it: a target that carries its
 * message ids in the body (--message-id-field). */
static void body_field(const amqp_envelope_t *env, const char *field, char *out, size_t outlen)
{
    out[0] = '\0';
    cJSON *j = cJSON_ParseWithLength(env->message.body.bytes, env->message.body.len);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, field);
    if (cJSON_IsString(v))
        snprintf(out, outlen, "%s", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(out, outlen, "%.0f", v->valuedouble);
    cJSON_Delete(j);
}

/* The claim token a relay's message carries (its header claim_token), and
 * ts_late when this line's ts_us is no bound of when the broker stored it. */
static void add_token(cJSON *ev, const amqp_table_t *mh, int late)
{
    char token[64];
    tget_str(mh, "claim_token", token, sizeof(token));
    if (token[0] == '\0')
        return;
    cJSON_AddStringToObject(ev, "claim_token", token);
    if (late)
        cJSON_AddBoolToObject(ev, "ts_late", 1);
}

/* One firehose message as one broker log line (or none, when it is not
 * about this bridge's exchange).
 *
 * A publish's trace is not confirmed: at a kill -9 of the node the message
 * itself may be committed (and confirmed to the relay) while its trace copy
 * is not.  When a message is delivered whose publish was never logged, the
 * broker evidently stored it: a publish line is written first, marked
 * "inferred_from":"deliver", with the delivered body's hash -- what the
 * broker holds, not what a witness saw published. */
static void log_trace(struct bridge *b, const amqp_envelope_t *env)
{
    char rk[300];
    snprintf(rk, sizeof(rk), "%.*s", (int)env->routing_key.len,
             (const char *)env->routing_key.bytes);
    const amqp_basic_properties_t *tp = &env->message.properties;
    const amqp_table_t *th = (tp->_flags & AMQP_BASIC_HEADERS_FLAG) ? &tp->headers : NULL;
    const amqp_table_t *props = tget_table(th, "properties");
    const amqp_table_t *mh = tget_table(props, "headers");
    char id[160], type[128], app[80], key[160], first_rk[300] = "", exp[32];
    tget_str(props, "message_id", id, sizeof(id));
    if (id[0] == '\0' && b->o.id_field != NULL)
        body_field(env, b->o.id_field, id, sizeof(id));
    tget_str(props, "type", type, sizeof(type));
    tget_str(props, "app_id", app, sizeof(app));
    tget_str(props, "expiration", exp, sizeof(exp));
    tget_str(mh, "partition_key", key, sizeof(key));
    const amqp_field_value_t *rks = tget(th, "routing_keys");
    if (rks != NULL && rks->kind == AMQP_FIELD_KIND_ARRAY && rks->value.array.num_entries > 0) {
        const amqp_field_value_t *e = &rks->value.array.entries[0];
        if (e->kind == AMQP_FIELD_KIND_UTF8 || e->kind == AMQP_FIELD_KIND_BYTES)
            snprintf(first_rk, sizeof(first_rk), "%.*s", (int)e->value.bytes.len,
                     (const char *)e->value.bytes.bytes);
    }
    cJSON *ev = NULL;
    char pub[200];
    snprintf(pub, sizeof(pub), "publish.%s", b->o.exchange);
    int retry = 0;
    if (strcmp(rk, pub) == 0) {
        ev = cwlog_begin("publish");
        add_publish_fields(ev, env, app, id, type, key, mh);
        cJSON_AddStringToObject(ev, "routing_key", first_rk);
        /* No queue took it: the publisher got basic.return, not a store. */
        int routed = tget_array_len(th, "routed_queues");
        cJSON_AddStringToObject(ev, "status", routed == 0 ? "refused" : "stored");
        /* The firehose carries no arrival time: this line's ts_us, when the
         * trace reached us, is an upper bound of it, and publish_within_lease
         * holds the token to it.  Within milliseconds while we keep up; a
         * backlog read after a reconnect is seconds late: its lines keep
         * their token, marked ts_late, and are held to their claim only. */
        add_token(ev, mh, b->catching_up);
        if (routed != 0)
            idset_add(&published_ids, id);
    } else if (strcmp(rk, "publish.") == 0) {
        const char *g = group_of(b, first_rk, &retry);
        if (g == NULL || !retry)
            return;
        ev = cwlog_begin("nack");
        cJSON_AddStringToObject(ev, "group", g);
        cJSON_AddStringToObject(ev, "message_id", id);
        cJSON_AddBoolToObject(ev, "requeue", 1);
        cJSON_AddNumberToObject(ev, "delay_ms", atof(exp));
    } else if (strncmp(rk, "deliver.", 8) == 0) {
        const char *g = group_of(b, rk + 8, &retry);
        if (g == NULL || retry)
            return;
        if (id[0] != '\0' && !idset_add(&published_ids, id)) {
            cJSON *p = cwlog_begin("publish");
            add_publish_fields(p, env, app, id, type, key, mh);
            cJSON_AddStringToObject(p, "status", "stored");
            cJSON_AddStringToObject(p, "inferred_from", "deliver");
            add_token(p, mh, 1); /* its publish went unseen: when, nobody knows */
            cJSON_AddStringToObject(p, "topic", b->o.ngroups > 0 ? b->o.topic[0] : "");
            cwlog_emit(p);
            b->lines++;
        }
        ev = cwlog_begin("deliver");
        long long redelivered = 0, xdc = 0, cwdc = 1;
        tget_int(th, "redelivered", &redelivered);
        tget_int(mh, "x-delivery-count", &xdc);
        tget_int(mh, "cw-delivery-count", &cwdc);
        cJSON_AddStringToObject(ev, "group", g);
        cJSON_AddStringToObject(ev, "message_id", id);
        if (key[0] != '\0')
            cJSON_AddStringToObject(ev, "partition_key", key);
        cJSON_AddBoolToObject(ev, "redelivered", redelivered != 0 || xdc + cwdc > 1);
        cJSON_AddNumberToObject(ev, "delivery_count", (double)(xdc + cwdc));
    } else {
        return;
    }
    cJSON_AddStringToObject(ev, "topic", b->o.ngroups > 0 ? b->o.topic[0] : "");
    cwlog_emit(ev);
    b->lines++;
}

/* Reads firehose messages for up to wait_ms: how many it logged, or -1
 * when the connection broke. */
static int pump_trace(struct bridge *b, int wait_ms)
{
    struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
    int logged = 0;
    for (int n = 0; n < PUMP_BATCH; n++) {
        amqp_envelope_t env;
        amqp_maybe_release_buffers(b->conn);
        amqp_rpc_reply_t r = amqp_consume_message(b->conn, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            /* A redelivered trace message was delivered to this process
             * before and logged then (a line is written before its ack is
             * sent; only the ack was lost, with the node): logging it again
             * would invent a second publish. */
            if (!env.redelivered) {
                log_trace(b, &env);
                logged++;
            }
            uint64_t tag = env.delivery_tag;
            amqp_destroy_envelope(&env);
            if (amqp_basic_ack(b->conn, 1, tag, 0) != AMQP_STATUS_OK) {
                disconnect(b, "ack failed");
                return -1;
            }
            tv.tv_sec = 0;
            tv.tv_usec = 0;
            continue;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_TIMEOUT) {
            b->catching_up = 0;
            atomic_fetch_add(&b->idle_gen, 1);
            return logged;
        }
        if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
            r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            /* A frame that is not a delivery: a close means we are done. */
            amqp_frame_t f;
            if (amqp_simple_wait_frame_noblock(b->conn, &f, &tv) == AMQP_STATUS_OK &&
                f.frame_type == AMQP_FRAME_METHOD &&
                (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
                 f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
                disconnect(b, "closed by the broker");
                return -1;
            }
            continue;
        }
        disconnect(b, r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION
                          ? amqp_error_string2(r.library_error)
                          : "broker error");
        return -1;
    }
    return logged;
}

/* ---- the control socket --------------------------------------------------- */

static void ctl_drop(struct bridge *b)
{
    if (b->ctl != NULL)
        amqp_destroy_connection(b->ctl);
    b->ctl = NULL;
}

/* The control thread's connection, opened when needed.  0 or -1. */
static int ctl_open(struct bridge *b)
{
    if (b->ctl != NULL)
        return 0;
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    struct timeval tv = { CTL_TIMEOUT_MS / 1000, (CTL_TIMEOUT_MS % 1000) * 1000 };
    if (s == NULL || amqp_socket_open_noblock(s, b->host, b->port, &tv) != AMQP_STATUS_OK) {
        amqp_destroy_connection(c);
        return -1;
    }
    amqp_set_rpc_timeout(c, &tv);
    amqp_set_handshake_timeout(c, &tv);
    amqp_rpc_reply_t r = amqp_login(c, b->vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, b->user,
                                    b->password);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        amqp_destroy_connection(c);
        return -1;
    }
    amqp_channel_open(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL) {
        amqp_destroy_connection(c);
        return -1;
    }
    b->ctl = c;
    return 0;
}

/* Messages ready in queue q (a passive declare on the control thread's
 * connection), or -1. */
static long queue_ready(struct bridge *b, const char *q)
{
    if (ctl_open(b) < 0)
        return -1;
    amqp_maybe_release_buffers(b->ctl);
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(b->ctl, 1, amqp_cstring_bytes(q), 1, 0,
                                                     0, 0, amqp_empty_table);
    if (ok == NULL) {
        /* The failed declare closed the channel (or the connection). */
        ctl_drop(b);
        return -1;
    }
    return (long)ok->message_count;
}

static cJSON *stats_reply(struct bridge *b)
{
    /* The log catches up with what the firehose already handed us: two
     * firehose waits must end with nothing more to read after this
     * request came (each waits PUMP_WAIT_MS), so nothing that was on its
     * way to us is left out. */
    long g0 = atomic_load(&b->idle_gen);
    int64_t deadline = cw_mono_ms() + 1500;
    while (atomic_load(&b->idle_gen) < g0 + 2) {
        if (!atomic_load(&b->connected) || cw_mono_ms() >= deadline)
            return NULL;
        struct timespec ts = { 0, 5 * 1000000L };
        nanosleep(&ts, NULL);
    }
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", "stats");
    cJSON_AddStringToObject(r, "broker", "rabbitmq");
    cJSON *groups = cJSON_AddObjectToObject(r, "groups");
    for (int i = 0; i < b->o.ngroups; i++) {
        char q[256], rq[270];
        snprintf(q, sizeof(q), "%s.%s.%s", b->o.exchange, b->o.topic[i], b->o.group[i]);
        snprintf(rq, sizeof(rq), "%s.retry", q);
        long ready = queue_ready(b, q);
        long delayed = ready < 0 ? -1 : queue_ready(b, rq);
        if (ready < 0 || delayed < 0) {
            cJSON_Delete(r);
            return NULL;
        }
        cJSON *g = cJSON_AddObjectToObject(groups, b->o.group[i]);
        cJSON_AddStringToObject(g, "topic", b->o.topic[i]);
        cJSON_AddNumberToObject(g, "ready", (double)ready);
        cJSON_AddNumberToObject(g, "delayed", (double)delayed);
        cJSON_AddNumberToObject(g, "unacked", 0);
    }
    for (int i = 0; i < b->o.nwatch; i++) {
        /* A target's queue may not be declared yet: nothing waits in it. */
        long ready = queue_ready(b, b->o.watch_queue[i]);
        cJSON *g = cJSON_AddObjectToObject(groups, b->o.watch_group[i]);
        cJSON_AddStringToObject(g, "queue", b->o.watch_queue[i]);
        cJSON_AddNumberToObject(g, "ready", ready < 0 ? 0 : (double)ready);
        cJSON_AddNumberToObject(g, "delayed", 0);
        cJSON_AddNumberToObject(g, "unacked", 0);
    }
    /* Trace messages not yet in the log: the checker must not read it
     * before they are, so they count as in flight. */
    char fq[200];
    snprintf(fq, sizeof(fq), "firehose.%s", b->o.exchange);
    long backlog = queue_ready(b, fq);
    if (backlog < 0) {
        cJSON_Delete(r);
        return NULL;
    }
    cJSON *g = cJSON_AddObjectToObject(groups, "(firehose)");
    cJSON_AddNumberToObject(g, "ready", (double)backlog);

    return r;
}

static cJSON *error_reply(const char *request, const char *text)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "op", "error");
    if (request != NULL)
        cJSON_AddStringToObject(r, "request", request);
    cJSON_AddStringToObject(r, "error", text);
    return r;
}

static cJSON *answer(struct bridge *b, const char *line)
{
    cJSON *f = cJSON_Parse(line);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(f, "op");
    cJSON *r = NULL;
    if (!cJSON_IsString(op)) {
        r = error_reply(NULL, "frame is not a JSON object with an op");
    } else if (strcmp(op->valuestring, "hello") == 0) {
        r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "op", "hello_ok");
        cJSON_AddStringToObject(r, "broker", "rabbitmq");
    } else if (strcmp(op->valuestring, "stats") == 0) {
        r = stats_reply(b);
        if (r == NULL)
            r = error_reply("stats", "not connected to the RabbitMQ node");
    } else if (strcmp(op->valuestring, "control") == 0) {
        const cJSON *it;
        cJSON_ArrayForEach(it, f) {
            if (strcmp(it->string, "op") == 0 || (strcmp(it->string, "reset") == 0))
                continue;
            char text[160];
            snprintf(text, sizeof(text), "RabbitMQ has no '%s' switch (a fake broker control)",
                     it->string);
            r = error_reply("control", text);
            break;
        }
        if (r == NULL) {
            r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "op", "control_ok");
        }
    } else {
        r = error_reply(op->valuestring, "rabbit-bridge answers hello, stats and control only");
    }
    cJSON_Delete(f);
    return r;
}

/* One control client: one line in, one line out, bounded in time. */
static void serve_client(struct bridge *b, int fd)
{
    char line[65536];
    size_t n = 0;
    int64_t deadline = cw_mono_ms() + 2000;
    while (n < sizeof(line) - 1) {
        struct pollfd p = { fd, POLLIN, 0 };
        int left = (int)(deadline - cw_mono_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t r = read(fd, line + n, sizeof(line) - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (memchr(line, '\n', n) != NULL)
            break;
    }
    line[n] = '\0';
    if (memchr(line, '\n', n) == NULL) {
        close(fd);
        return;
    }
    cJSON *reply = answer(b, line);
    char *text = cJSON_PrintUnformatted(reply);
    cJSON_Delete(reply);
    if (text != NULL) {
        size_t tl = strlen(text);
        text[tl] = '\n';
        ssize_t w = send(fd, text, tl + 1, MSG_NOSIGNAL);
        (void)w;
        cJSON_free(text);
    }
    close(fd);
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path))
        return -1;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void serve_control(struct bridge *b, int wait_ms)
{
    struct pollfd p = { b->listen_fd, POLLIN, 0 };
    if (poll(&p, 1, wait_ms) <= 0)
        return;
    int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        serve_client(b, fd);
}

static void *control_thread(void *arg)
{
    struct bridge *b = arg;
    while (!stop_flag)
        serve_control(b, 100);
    ctl_drop(b);
    return NULL;
}

int main(int argc, char **argv)
{
    struct bridge b;
    memset(&b, 0, sizeof(b));
    int pr = parse_args(argc, argv, &b.o);
    if (pr != 0)
        return pr < 0 ? 2 : 0;
    if (split_url(&b) < 0) {
        fprintf(stderr, "rabbit-bridge: malformed --url\n");
        return 2;
    }
    if (cwlog_open(b.o.events, "broker") < 0) {
        fprintf(stderr, "rabbit-bridge: cannot open %s: %s\n", b.o.events, strerror(errno));
        return 1;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);
    char err[512];
    /* The node is up when the runner starts us: fail fast if it is not, so
     * the runner reports why. */
    if (connect_node(&b, err, sizeof(err)) < 0) {
        fprintf(stderr, "rabbit-bridge: %s\n", err);
        return 1;
    }
    b.listen_fd = listen_on(b.o.socket_path);
    if (b.listen_fd < 0) {
        fprintf(stderr, "rabbit-bridge: cannot listen on %s: %s\n", b.o.socket_path,
                strerror(errno));
        return 1;
    }
    cwlog_simple("start", "broker", "rabbitmq");
    pthread_t ctl_thread;
    if (pthread_create(&ctl_thread, NULL, control_thread, &b) != 0) {
        fprintf(stderr, "rabbit-bridge: cannot start the control thread\n");
        return 1;
    }
    int64_t next_try = 0;
    char last_err[512] = "";
    while (!stop_flag) {
        if (b.conn == NULL && cw_mono_ms() >= next_try) {
            if (connect_node(&b, err, sizeof(err)) < 0) {
                next_try = cw_mono_ms() + 200;
                /* Said once per distinct reason, not every 200 ms. */
                if (strcmp(err, last_err) != 0)
                    cwlog_warn("reconnecting to the RabbitMQ node: %s", err);
                snprintf(last_err, sizeof(last_err), "%s", err);
            } else {
                last_err[0] = '\0';
            }
        }
        if (b.conn != NULL) {
            pump_trace(&b, PUMP_WAIT_MS);
        } else {
            struct timespec ts = { 0, 20 * 1000000L };
            nanosleep(&ts, NULL);
        }
    }
    pthread_join(ctl_thread, NULL);
    /* Drain what the firehose still holds for us, bounded. */
    int64_t end = cw_mono_ms() + 1000;
    while (b.conn != NULL && cw_mono_ms() < end && pump_trace(&b, 50) > 0) {
    }
    cwlog_simple("shutdown", "lines", "");
    disconnect(&b, "shutdown");
    close(b.listen_fd);
    unlink(b.o.socket_path);
    return 0;
}
