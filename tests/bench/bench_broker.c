/* bench_broker.c -- load generator for the fake broker, through the very
 * client the relay and the consumers use (src/bus/bus.h, bus_fakebroker.c).
 *
 *   bench_broker publish SOCKET COUNT SIZE WINDOW
 *       publishes COUNT messages with SIZE-byte payloads, keeping up to
 *       WINDOW publishes unconfirmed (1 = no pipelining); prints
 *       "publish count=N window=W seconds=S rate=R" (confirmed publishes/s)
 *   bench_broker consume SOCKET COUNT PREFETCH [GROUP]
 *       subscribes to "payments" and acks COUNT deliveries; prints
 *       "consume count=N prefetch=P seconds=S rate=R" (delivered+acked/s)
 *
 * Exit status 0, or 1 with a message when a call fails (so scripts/bench-
 * broker and the tests can tell a broken client from a slow one).  Built by
 * scripts/bench-broker against the build tree's libcwcore. */
#include "bus.h"
#include "cwlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
    fprintf(stderr, "usage: bench_broker publish SOCKET COUNT SIZE WINDOW\n"
                    "       bench_broker consume SOCKET COUNT PREFETCH [GROUP]\n");
    return 2;
}

static long arg_long(const char *s, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "bench_broker: '%s' is not a number in %ld..%ld\n", s, lo, hi);
        exit(2);
    }
    return v;
}

static int run_publish(const char *sock, long count, long size, long window)
{
    char err[512];
    bus_conn *c = bus_connect(sock, "bench-publisher", 10000, err, sizeof(err));
    if (c == NULL) {
        fprintf(stderr, "bench_broker: %s\n", err);
        return 1;
    }
    /* A JSON payload of the requested size: {"EventId":"...","pad":"xxx..."} */
    char *payload = malloc((size_t)size + 1);
    char id[64];
    if (payload == NULL)
        abort();
    struct bus_message m = {
        .topic = "payments",
        .type = "PaymentCreated",
        .message_id = id,
        .traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        .aggregate_version = 1,
        .schema_version = 1,
        .occurred_at = "2026-11-29T21:00:00Z",
        .payload = payload,
    };
    int64_t t0 = cw_mono_ms();
    long sent = 0, confirmed = 0;
    while (confirmed < count) {
        while (sent < count && sent - confirmed < window) {
            snprintf(id, sizeof(id), "00000000-0000-4000-8000-%012ld", sent);
            int n = snprintf(payload, (size_t)size + 1, "{\"EventId\":\"%s\",\"pad\":\"", id);
            if (n < size) {
                memset(payload + n, 'x', (size_t)(size - n));
                payload[size - 2] = '"';
                payload[size - 1] = '}';
                payload[size] = '\0';
            }
            m.partition_key = id;
            if (bus_publish_send(c, &m, err, sizeof(err)) < 0) {
                fprintf(stderr, "bench_broker: publish %ld: %s\n", sent, err);
                return 1;
            }
            sent++;
        }
        if (bus_publish_confirm(c, err, sizeof(err)) < 0) {
            fprintf(stderr, "bench_broker: confirm %ld: %s\n", confirmed, err);
            return 1;
        }
        confirmed++;
    }
    double secs = (double)(cw_mono_ms() - t0) / 1000.0;
    printf("publish count=%ld window=%ld seconds=%.3f rate=%.0f\n", count, window, secs,
           secs > 0 ? (double)count / secs : 0.0);
    free(payload);
    bus_close(c);
    return 0;
}

static int run_consume(const char *sock, long count, long prefetch, const char *group)
{
    char err[512];
    bus_conn *c = bus_connect(sock, "bench-consumer", 10000, err, sizeof(err));
    if (c == NULL) {
        fprintf(stderr, "bench_broker: %s\n", err);
        return 1;
    }
    if (bus_subscribe(c, "payments", group, (int)prefetch, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench_broker: subscribe: %s\n", err);
        return 1;
    }
    int64_t t0 = cw_mono_ms();
    long done = 0;
    while (done < count) {
        struct bus_delivery *d;
        int rc = bus_next_delivery(c, 10000, &d, err, sizeof(err));
        if (rc < 0) {
            fprintf(stderr, "bench_broker: after %ld deliveries: %s\n", done, err);
            return 1;
        }
        rc = bus_ack(c, d->tag, err, sizeof(err));
        bus_delivery_free(d);
        if (rc < 0) {
            fprintf(stderr, "bench_broker: ack: %s\n", err);
            return 1;
        }
        done++;
    }
    double secs = (double)(cw_mono_ms() - t0) / 1000.0;
    printf("consume count=%ld prefetch=%ld seconds=%.3f rate=%.0f\n", count, prefetch, secs,
           secs > 0 ? (double)count / secs : 0.0);
    bus_close(c);
    return 0;
}

int main(int argc, char **argv)
{
    cwlog_open(NULL, "bench_broker");
    if (argc >= 6 && strcmp(argv[1], "publish") == 0)
        return run_publish(argv[2], arg_long(argv[3], 1, 100000000), arg_long(argv[4], 64, 1 << 20),
                           arg_long(argv[5], 1, 100000));
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "consume") == 0)
        return run_consume(argv[2], arg_long(argv[3], 1, 100000000),
                           arg_long(argv[4], 1, 10000), argc == 6 ? argv[5] : "bench");
    return usage();
}
