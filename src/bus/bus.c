/* bus.c -- picks the broker implementation from the address and checks
 * what every implementation would check the same way.
 *
 * An address that starts with amqp:// is a RabbitMQ URL (bus_rabbitmq.c);
 * anything else is the fake broker's Unix socket path (bus_fakebroker.c),
 * which stays the default so that existing command lines keep working. */
#include "bus_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

int bus_set_err(char *err, size_t errlen, int status, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return status;
}

int bus_is_amqp_url(const char *addr)
{
    return addr != NULL && strncmp(addr, "amqp://", 7) == 0;
}

static int refuse_tls(const char *addr, char *err, size_t errlen)
{
    if (addr == NULL || strncmp(addr, "amqps://", 8) != 0)
        return BUS_OK;
    return bus_set_err(err, errlen, BUS_PROTOCOL, "amqps:// (TLS) broker URLs are not "
                       "supported; use amqp:// on a trusted link");
}

int bus_check_address(const char *addr, char *err, size_t errlen)
{
    struct sockaddr_un sun;
    if (addr == NULL || addr[0] == '\0')
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker address is empty");
    if (refuse_tls(addr, err, errlen) < 0)
        return BUS_PROTOCOL;
    if (bus_is_amqp_url(addr)) {
        struct bus_rmq_url u;
        int rc = bus_rmq_parse_url(addr, &u, err, errlen);
        explicit_bzero(&u, sizeof(u)); /* it holds the password */
        return rc < 0 ? rc : BUS_OK;
    }
    if (strstr(addr, "://") != NULL)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker address is neither an amqp:// "
                           "URL nor a Unix socket path");
    if (strlen(addr) >= sizeof(sun.sun_path))
        return bus_set_err(err, errlen, BUS_PROTOCOL, "broker socket path is longer than "
                           "%zu bytes", sizeof(sun.sun_path) - 1);
    return BUS_OK;
}

static bus_conn *connect_as(const char *addr, const char *client_name, int timeout_ms,
                            int subscriber, char *err, size_t errlen)
{
    if (refuse_tls(addr, err, errlen) < 0)
        return NULL;
    if (bus_is_amqp_url(addr))
        return bus_rabbitmq_connect(addr, client_name, timeout_ms, subscriber, err, errlen);
    /* The fake broker's heartbeats are asked for at bus_subscribe. */
    return bus_fake_connect(addr, client_name, timeout_ms, err, errlen);
}

bus_conn *bus_connect(const char *addr, const char *client_name, int timeout_ms,
                      char *err, size_t errlen)
{
    return connect_as(addr, client_name, timeout_ms, 0, err, errlen);
}

bus_conn *bus_connect_subscriber(const char *addr, const char *client_name, int timeout_ms,
                                 char *err, size_t errlen)
{
    return connect_as(addr, client_name, timeout_ms, 1, err, errlen);
}

int bus_declare_group(const char *addr, const char *topic, const char *group, int timeout_ms,
                      char *err, size_t errlen)
{
    if (!bus_is_amqp_url(addr))
        return BUS_OK;
    return bus_rabbitmq_declare_group(addr, topic, group, timeout_ms, err, errlen);
}

void bus_close(bus_conn *c)
{
    if (c != NULL)
        c->ops->close(c);
}

int bus_fd(bus_conn *c)
{
    return c != NULL ? c->ops->fd(c) : -1;
}

int bus_publish_send(bus_conn *c, const struct bus_message *m, char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->publish_send(c, m, err, errlen);
}

int bus_publish_confirm(bus_conn *c, char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->publish_confirm(c, err, errlen);
}

int bus_publish(bus_conn *c, const struct bus_message *m, char *err, size_t errlen)
{
    if (c != NULL && c->ops->unconfirmed(c) > 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "bus_publish with %d pipelined confirms still unread",
                     c->ops->unconfirmed(c));
        return BUS_PROTOCOL;
    }
    int rc = bus_publish_send(c, m, err, errlen);
    if (rc < 0)
        return rc;
    return bus_publish_confirm(c, err, errlen);
}

int bus_subscribe(bus_conn *c, const char *topic, const char *group, int prefetch,
                  char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->subscribe(c, topic, group, prefetch, err, errlen);
}

int bus_next_delivery(bus_conn *c, int wait_ms, struct bus_delivery **out,
                      char *err, size_t errlen)
{
    if (out != NULL)
        *out = NULL;
    if (out == NULL)
        return bus_set_err(err, errlen, BUS_PROTOCOL, "bus_next_delivery needs an out pointer");
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->next_delivery(c, wait_ms, out, err, errlen);
}

void bus_delivery_free(struct bus_delivery *d)
{
    if (d == NULL)
        return;
    free(d->topic);
    free(d->message_id);
    free(d->type);
    free(d->partition_key);
    free(d->traceparent);
    free(d->payload);
    free(d);
}

int bus_ack(bus_conn *c, uint64_t tag, char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->ack(c, tag, err, errlen);
}

int bus_nack(bus_conn *c, uint64_t tag, int requeue, int delay_ms, char *err, size_t errlen)
{
    if (c == NULL)
        return bus_set_err(err, errlen, BUS_DISCONNECTED, "no broker connection");
    return c->ops->nack(c, tag, requeue, delay_ms, err, errlen);
}
