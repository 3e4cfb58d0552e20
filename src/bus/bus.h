/* bus.h -- the publisher/subscriber interface between the pipeline and a broker.
 *
 * The relay publishes and the consumers subscribe through these functions
 * only, so the outbox/inbox pattern does not depend on one broker.  The
 * address picks the implementation (bus.c):
 *   - a Unix socket path: bus_fakebroker.c speaks the fake broker's newline-
 *     delimited JSON protocol (sim/fakebroker/fakebroker.h documents every
 *     frame);
 *   - amqp://USER:PASS@HOST:PORT/VHOST[?exchange=NAME&declare=passive&heartbeat=S]:
 *     bus_rabbitmq.c speaks AMQP 0-9-1 to RabbitMQ (librabbitmq) with
 *     publisher confirms, persistent mandatory publishes to a durable topic
 *     exchange (default "crashwindow"), one durable quorum queue per
 *     consumer group and manual acks.  With declare=passive the exchange and
 *     queues must exist already (a missing one is a clear error); by default
 *     they are declared.  bus_rabbitmq.c's header comment has the topology.
 *
 * Every call is bounded by the connection's timeout.  Errors are negative
 * codes; the human message goes to the caller's err buffer.  After
 * BUS_DISCONNECTED or BUS_TIMEOUT the connection is unusable: close it and
 * connect again (the broker redelivers whatever was not acknowledged). */
#ifndef CW_BUS_H
#define CW_BUS_H

#include <stddef.h>
#include <stdint.h>

enum bus_status {
    BUS_OK = 0,
    BUS_REFUSED = -1,      /* the broker answered no (outage, bad frame, unknown tag),
                              or a message cannot be sent as it is (the connection
                              stays usable) */
    BUS_TIMEOUT = -2,      /* no answer within the timeout */
    BUS_DISCONNECTED = -3, /* connection closed or broken */
    BUS_PROTOCOL = -4,     /* the peer sent something we cannot parse */
    BUS_NONE = -5          /* bus_next_delivery: nothing arrived in time */
};

typedef struct bus_conn bus_conn;

/* A message as published.  Strings are borrowed for the duration of the call. */
struct bus_message {
    const char *topic;           /* "payments" */
    const char *message_id;      /* the outbox row id: stable across republishes */
    const char *type;            /* event_type, e.g. "PaymentCreated" */
    const char *partition_key;   /* aggregate id; NULL for none */
    const char *traceparent;     /* W3C traceparent or NULL */
    long long aggregate_version;
    int schema_version;
    const char *occurred_at;     /* ISO 8601 text or NULL */
    const char *payload;         /* JSON text, sent and delivered byte for byte */
    const char *claim_token;     /* the claim's fencing token, or NULL */
    long long not_after_us;      /* the claim's lease end (database clock, us since
                                  * the epoch): a broker that can refuses a publish
                                  * arriving later; 0 for none */
};

/* A delivery as received; every string is owned by the delivery. */
struct bus_delivery {
    uint64_t tag;                /* delivery tag for bus_ack / bus_nack */
    char *topic;
    char *message_id;
    char *type;
    char *partition_key;         /* may be NULL */
    char *traceparent;           /* may be NULL */
    long long aggregate_version; /* 0 when the header is missing; a header that
                                    is not an integer in 0..2^53 makes the
                                    frame a protocol error (BUS_PROTOCOL) */
    int schema_version;          /* 0 when the header is missing */
    char *payload;               /* may be NULL when the frame had none */
    int redelivered;
    int delivery_count;          /* 1 on the first delivery */
};

/* Connects to the broker at addr (a Unix socket path or an amqp:// URL;
 * the password of a URL never appears in err), naming this client
 * (shows in the broker's log).  timeout_ms bounds every later call.
 * Returns NULL with a message in err on failure. */
bus_conn *bus_connect(const char *addr, const char *client_name, int timeout_ms,
                      char *err, size_t errlen);
void bus_close(bus_conn *c);

/* As bus_connect, for a connection that will subscribe.  A subscriber
 * waits for deliveries with nothing to send, so a link that dies without a
 * word (a half-open peer, a link that swallows bytes) would leave it
 * waiting, and its unacked deliveries unseen, for ever.  Its connection
 * therefore carries heartbeats, about every timeout_ms / 2, and is given up
 * after two silent intervals (BUS_TIMEOUT from the fake broker's client,
 * BUS_DISCONNECTED from librabbitmq's); the broker drops it likewise.
 * RabbitMQ negotiates heartbeats at login in whole seconds (at least 1; a
 * URL's heartbeat=S wins); the fake broker is asked at bus_subscribe.
 * Publishers use bus_connect: heartbeats stay off unless the URL asks, so a
 * relay busy with its database does not lose its broker connection. */
bus_conn *bus_connect_subscriber(const char *addr, const char *client_name, int timeout_ms,
                                 char *err, size_t errlen);

/* 1 when addr is an amqp:// URL (a RabbitMQ broker), else 0. */
int bus_is_amqp_url(const char *addr);

/* Checks a broker address without connecting: a well-formed amqp:// URL or
 * a Unix socket path that fits.  BUS_OK, or BUS_PROTOCOL with err naming
 * what is wrong (never quoting a password).  Programs call it at startup so
 * that a typo is an error there, not a reconnect loop that never ends. */
int bus_check_address(const char *addr, char *err, size_t errlen);

/* Makes sure consumer group `group` of topic receives every message of the
 * topic from now on, even before its first subscriber comes: with RabbitMQ
 * it declares the group's queue and its binding (what bus_subscribe would),
 * as a deployment provisions its topology before it starts publishing.  The
 * fake broker needs nothing (a group reads its topic from the start).
 * BUS_OK or a negative bus_status with err. */
int bus_declare_group(const char *addr, const char *topic, const char *group, int timeout_ms,
                      char *err, size_t errlen);

/* The socket, for poll() alongside other descriptors (e.g. a LISTEN socket).
 * Deliveries may already be buffered in the connection: call
 * bus_next_delivery(c, 0, ...) until BUS_NONE before polling this fd. */
int bus_fd(bus_conn *c);

/* Publishes one message and waits for its confirm (the broker confirms only
 * after it stored the message).  BUS_OK, or a negative bus_status. */
int bus_publish(bus_conn *c, const struct bus_message *m, char *err, size_t errlen);

/* Pipelining: send several publishes, then read their confirms in the same
 * order with bus_publish_confirm (one call per send).  Sends may be held in
 * the connection until the next call that waits on the broker (RabbitMQ:
 * written as full segments), so wait for confirms with bus_publish_confirm,
 * never by polling bus_fd. */
int bus_publish_send(bus_conn *c, const struct bus_message *m, char *err, size_t errlen);
int bus_publish_confirm(bus_conn *c, char *err, size_t errlen);

/* Subscribes to topic as a member of group, with at most prefetch unacked
 * deliveries in flight to this connection. */
int bus_subscribe(bus_conn *c, const char *topic, const char *group, int prefetch,
                  char *err, size_t errlen);

/* Waits up to wait_ms for the next delivery.  BUS_OK with *out set (free it
 * with bus_delivery_free), BUS_NONE when nothing came, or an error. */
int bus_next_delivery(bus_conn *c, int wait_ms, struct bus_delivery **out,
                      char *err, size_t errlen);
void bus_delivery_free(struct bus_delivery *d);

/* Acknowledges a delivery: the broker forgets it for this group. */
int bus_ack(bus_conn *c, uint64_t tag, char *err, size_t errlen);

/* Rejects a delivery; with requeue it comes back after delay_ms (flagged
 * redelivered), without it is dropped for this group and logged. */
int bus_nack(bus_conn *c, uint64_t tag, int requeue, int delay_ms,
             char *err, size_t errlen);

#endif
