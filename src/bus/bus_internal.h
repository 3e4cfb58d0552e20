/* bus_internal.h -- what bus.c (the dispatcher) and the broker
 * implementations share.  Private to src/bus.
 *
 * Every connection starts with a struct bus_conn whose ops table is the
 * implementation's; bus.c checks the arguments common to all brokers and
 * calls through the table.  Each implementation casts the bus_conn back to
 * its own struct (whose first member is the bus_conn). */
#ifndef CW_BUS_INTERNAL_H
#define CW_BUS_INTERNAL_H

#include "bus.h"

#include <stdarg.h>

struct bus_ops {
    void (*close)(bus_conn *c);
    int (*fd)(bus_conn *c);
    int (*publish_send)(bus_conn *c, const struct bus_message *m, char *err, size_t errlen);
    int (*publish_confirm)(bus_conn *c, char *err, size_t errlen);
    int (*unconfirmed)(bus_conn *c);  /* publishes sent whose confirm was not read */
    int (*subscribe)(bus_conn *c, const char *topic, const char *group, int prefetch,
                     char *err, size_t errlen);
    int (*next_delivery)(bus_conn *c, int wait_ms, struct bus_delivery **out,
                         char *err, size_t errlen);
    int (*ack)(bus_conn *c, uint64_t tag, char *err, size_t errlen);
    int (*nack)(bus_conn *c, uint64_t tag, int requeue, int delay_ms, char *err, size_t errlen);
};

struct bus_conn {
    const struct bus_ops *ops;
};

/* The fake broker (bus_fakebroker.c): addr is a Unix socket path. */
bus_conn *bus_fake_connect(const char *addr, const char *client_name, int timeout_ms,
                           char *err, size_t errlen);

/* RabbitMQ (bus_rabbitmq.c): addr is an amqp:// URL (bus.h). */
#define BUS_RMQ_DEFAULT_EXCHANGE "crashwindow"

struct bus_rmq_url {
    char host[256];
    int port;
    char user[128];
    char password[128];
    char vhost[128];
    char exchange[128];
    int passive;             /* declare=passive: check, never declare */
    int heartbeat_s;         /* heartbeat=S (0..3600); -1 when the URL has none */
};

/* Parses amqp://USER:PASS@HOST:PORT/VHOST[?exchange=NAME&declare=yes|passive&heartbeat=S]
 * (librabbitmq's parser for the URL, ours for the parameters).  BUS_OK, or
 * BUS_PROTOCOL with a message that never repeats the password. */
int bus_rmq_parse_url(const char *url, struct bus_rmq_url *u, char *err, size_t errlen);

/* subscriber: heartbeats on unless the URL says otherwise (bus.h). */
bus_conn *bus_rabbitmq_connect(const char *url, const char *client_name, int timeout_ms,
                               int subscriber, char *err, size_t errlen);
int bus_rabbitmq_declare_group(const char *url, const char *topic, const char *group,
                               int timeout_ms, char *err, size_t errlen);

/* Writes the formatted message into err (when there is room) and returns
 * status: the one error helper of the bus and its implementations. */
int bus_set_err(char *err, size_t errlen, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
