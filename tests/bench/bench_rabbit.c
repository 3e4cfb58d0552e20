/* bench_rabbit.c -- RabbitMQ's own confirmed-publish ceiling, for
 * scripts/bench-rabbitmq: librabbitmq alone, no database, no bus layer.
 *
 *   bench_rabbit declare URL EXCHANGE GROUP    the exchange and the group's
 *                                              quorum queue, as bus_rabbitmq
 *                                              declares them
 *   bench_rabbit publish URL EXCHANGE COUNT BYTES WINDOW
 *       COUNT persistent mandatory publishes of BYTES bytes to EXCHANGE with
 *       routing key payments.PaymentCreated, in windows of WINDOW: send the
 *       window, then read its confirms (basic.ack, multiple honoured) from
 *       the frame loop -- the relay's pattern with its batch as the window.
 *       Prints "COUNT SECONDS CPU_MS", CPU_MS its own user and system time.
 *   bench_rabbit delete URL QUEUE               deletes a queue and what it holds
 * Exits 1 on any error (a nack or a return included): a ceiling measured
 * with failures would not be one.
 *
 * Like for like: each message carries what bus_rabbitmq.c's send_message
 * gives a relay's publish -- message_id (a UUID), type, app_id, content
 * type and the eight headers, with values of the relay's lengths -- since
 * RabbitMQ parses and stores every property and a bare body would measure a
 * lighter message.  The window is written corked, as bus_rabbitmq.c does,
 * so that the ceiling stays a ceiling: both send full segments. */
#include "bus.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_rabbit: %s\n", what);
    exit(1);
}

static amqp_connection_state_t open_conn(const char *url_in)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s", url_in);
    struct amqp_connection_info ci;
    if (amqp_parse_url(url, &ci) != AMQP_STATUS_OK)
        die("bad URL");
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s = amqp_tcp_socket_new(c);
    if (s == NULL || amqp_socket_open(s, ci.host, ci.port) != AMQP_STATUS_OK)
        die("cannot connect");
    if (amqp_login(c, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, ci.user, ci.password)
            .reply_type != AMQP_RESPONSE_NORMAL)
        die("login refused");
    amqp_channel_open(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        die("channel.open failed");
    return c;
}

static amqp_table_entry_t str_entry(const char *k, const char *v)
{
    amqp_table_entry_t e = { amqp_cstring_bytes(k),
                             { AMQP_FIELD_KIND_UTF8, { .bytes = amqp_cstring_bytes(v) } } };
    return e;
}

static amqp_table_entry_t int_entry(const char *k, long long v)
{
    amqp_table_entry_t e = { amqp_cstring_bytes(k), { AMQP_FIELD_KIND_I64, { .i64 = v } } };
    return e;
}

static void set_cork(amqp_connection_state_t c, int on)
{
#ifdef TCP_CORK
    setsockopt(amqp_get_sockfd(c), IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
#else
    (void)c;
    (void)on;
#endif
}

static int publish(const char *url, const char *exchange, long count, int bytes, int window)
{
    amqp_connection_state_t c = open_conn(url);
    amqp_confirm_select(c, 1);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        die("confirm.select failed");
    char *body = malloc((size_t)bytes + 1);
    if (body == NULL)
        die("out of memory");
    memset(body, 'x', (size_t)bytes);
    body[0] = '{';
    body[bytes - 1] = '}';
    body[bytes] = '\0';
    /* Values of the lengths a relay sends: UUIDs, a W3C traceparent, the
     * claim's lease end in microseconds, occurred_at as the claim formats it. */
    amqp_table_entry_t h[8] = {
        str_entry("topic", "payments"),
        int_entry("aggregate_version", 1),
        int_entry("schema_version", 1),
        str_entry("partition_key", "6f1c2b9e-3d4a-4f5b-8c6d-7e8f9a0b1c2d"),
        str_entry("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        str_entry("occurred_at", "2024-05-01T12:34:56.789012Z"),
        str_entry("claim_token", "0d9e8f7a-6b5c-4d3e-9f1a-2b3c4d5e6f70"),
        int_entry("not_after_us", 1714566896789012LL),
    };
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
               AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_TYPE_FLAG | AMQP_BASIC_HEADERS_FLAG |
               AMQP_BASIC_APP_ID_FLAG;
    p.delivery_mode = 2;
    p.content_type = amqp_cstring_bytes("application/json");
    p.type = amqp_cstring_bytes("PaymentCreated");
    p.app_id = amqp_cstring_bytes("bench-rabbit");
    p.headers.num_entries = 8;
    p.headers.entries = h;
    char id[64];
    uint64_t sent = 0, acked = 0;
    double t0 = now_s();
    while (acked < (uint64_t)count) {
        set_cork(c, 1);
        while (sent < (uint64_t)count && sent - acked < (uint64_t)window) {
            snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012llx", (unsigned long long)sent);
            p.message_id = amqp_cstring_bytes(id);
            if (amqp_basic_publish(c, 1, amqp_cstring_bytes(exchange),
                                   amqp_cstring_bytes("payments.PaymentCreated"), 1, 0, &p,
                                   amqp_cstring_bytes(body)) != AMQP_STATUS_OK)
                die("publish failed");
            sent++;
        }
        /* The window is out: read confirms until all of it is settled. */
        set_cork(c, 0);
        while (acked < sent) {
            amqp_frame_t f;
            amqp_maybe_release_buffers(c);
            if (amqp_simple_wait_frame(c, &f) != AMQP_STATUS_OK)
                die("connection lost");
            if (f.frame_type != AMQP_FRAME_METHOD)
                continue;
            if (f.payload.method.id == AMQP_BASIC_ACK_METHOD) {
                const amqp_basic_ack_t *a = f.payload.method.decoded;
                acked = a->multiple ? a->delivery_tag : acked + 1;
            } else if (f.payload.method.id == AMQP_BASIC_NACK_METHOD ||
                       f.payload.method.id == AMQP_BASIC_RETURN_METHOD) {
                die("the broker refused a publish (nack or return)");
            }
        }
    }
    double t1 = now_s();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    printf("%ld %.3f %.0f\n", count, t1 - t0, cpu_ms);
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    free(body);
    return 0;
}

/* Between measurements: a queue left full would make the next run's
 * broker slower than the first's. */
static int delete_queue(const char *url, const char *queue)
{
    amqp_connection_state_t c = open_conn(url);
    amqp_queue_delete(c, 1, amqp_cstring_bytes(queue), 0, 0);
    if (amqp_get_rpc_reply(c).reply_type != AMQP_RESPONSE_NORMAL)
        die("queue.delete failed");
    amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "declare") == 0) {
        char url[1200], err[512];
        snprintf(url, sizeof(url), "%s?exchange=%s", argv[2], argv[3]);
        if (bus_declare_group(url, "payments", argv[4], 10000, err, sizeof(err)) != BUS_OK)
            die(err);
        return 0;
    }
    if (argc == 7 && strcmp(argv[1], "publish") == 0) {
        long count = atol(argv[4]);
        int bytes = atoi(argv[5]), window = atoi(argv[6]);
        if (count < 1 || bytes < 2 || bytes > 1000000 || window < 1 || window > 100000)
            die("publish URL EXCHANGE COUNT BYTES(2..1000000) WINDOW(1..100000)");
        return publish(argv[2], argv[3], count, bytes, window);
    }
    if (argc == 4 && strcmp(argv[1], "delete") == 0)
        return delete_queue(argv[2], argv[3]);
    fprintf(stderr, "usage: bench_rabbit declare URL EXCHANGE GROUP\n"
                    "       bench_rabbit publish URL EXCHANGE COUNT BYTES WINDOW\n"
                    "       bench_rabbit delete URL QUEUE\n");
    return 2;
}
