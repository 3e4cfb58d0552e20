/* netproxy_main.c -- the fault proxy as a daemon, and its control client.
 *
 * A process of its own, not a thread of the runner, so that the links stay
 * up after the runner ends (--keep) and a fault can be set by hand:
 *
 *   netproxy --control SOCK --link NAME=pg,LISTEN,UPSTREAM [--link ...]
 *       serves the links; control frames on SOCK, one JSON line each:
 *         {"op":"links"}                    -> {"op":"links","links":[{name,bound}]}
 *         {"op":"set","link":L,"fault":...} -> {"op":"ok"}  (fields: netproxy.h)
 *         {"op":"clear","link":L}           -> {"op":"ok"}
 *         {"op":"stats"}                    -> {"op":"stats","links":{L:{...}}}
 *       errors: {"op":"error","error":"..."}.
 *   netproxy --control SOCK --send 'FRAME'
 *       sends one frame and prints the reply (exit 1 on an error reply).
 *
 * SIGTERM ends the daemon. */
#include "netproxy.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME 65536
#define MAX_CLI_LINKS 64

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

struct cli_link {
    char name[64];
    enum np_proto proto;
    char bound[160];
};

static struct cli_link links[MAX_CLI_LINKS];
static int nlinks;

static int unix_addr(const char *path, struct sockaddr_un *un)
{
    memset(un, 0, sizeof(*un));
    un->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(un->sun_path))
        return -1;
    strcpy(un->sun_path, path);
    return 0;
}

/* Reads one line (without its newline) within timeout_ms.  Its length, or -1. */
static long read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t n = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (n + 1 < cap) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = timeout_ms - ((t.tv_sec - t0.tv_sec) * 1000 +
                                  (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            return -1;
        ssize_t got = read(fd, buf + n, 1);
        if (got <= 0)
            return n > 0 ? (long)n : -1;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return (long)n;
}

static void reply(int fd, cJSON *frame)
{
    char *text = cJSON_PrintUnformatted(frame);
    if (text != NULL) {
        size_t n = strlen(text);
        text[n] = '\n';
        ssize_t w = write(fd, text, n + 1);
        (void)w; /* a client that went away gets nothing */
        text[n] = '\0';
    }
    cJSON_free(text);
    cJSON_Delete(frame);
}

static cJSON *error_frame(const char *msg)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "op", "error");
    cJSON_AddStringToObject(f, "error", msg);
    return f;
}

static cJSON *ok_frame(const char *op)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "op", op);
    return f;
}

static struct cli_link *find(const char *name)
{
    for (int i = 0; i < nlinks; i++)
        if (strcmp(links[i].name, name) == 0)
            return &links[i];
    return NULL;
}

/* The answer to one control frame. */
static cJSON *handle(netproxy *np, const char *text)
{
    cJSON *f = cJSON_Parse(text);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(f, "op");
    const cJSON *ln = cJSON_GetObjectItemCaseSensitive(f, "link");
    cJSON *out = NULL;
    char err[320];
    if (!cJSON_IsString(op)) {
        out = error_frame("frame is not a JSON object with an op");
    } else if (strcmp(op->valuestring, "links") == 0 || strcmp(op->valuestring, "stats") == 0) {
        int stats = strcmp(op->valuestring, "stats") == 0;
        out = ok_frame(op->valuestring);
        cJSON *arr = stats ? cJSON_AddObjectToObject(out, "links")
                           : cJSON_AddArrayToObject(out, "links");
        for (int i = 0; i < nlinks; i++) {
            cJSON *l = cJSON_CreateObject();
            struct np_stats st;
            if (stats && netproxy_stats(np, links[i].name, &st) == 0) {
                cJSON_AddNumberToObject(l, "accepted", (double)st.accepted);
                cJSON_AddNumberToObject(l, "bytes_up", (double)st.bytes_up);
                cJSON_AddNumberToObject(l, "bytes_down", (double)st.bytes_down);
                cJSON_AddNumberToObject(l, "cuts", (double)st.cuts);
                cJSON_AddNumberToObject(l, "resets", (double)st.resets);
                cJSON_AddItemToObject(arr, links[i].name, l);
            } else {
                cJSON_AddStringToObject(l, "name", links[i].name);
                cJSON_AddStringToObject(l, "proto", np_proto_name(links[i].proto));
                cJSON_AddStringToObject(l, "bound", links[i].bound);
                cJSON_AddItemToArray(arr, l);
            }
        }
    } else if (!cJSON_IsString(ln) || find(ln->valuestring) == NULL) {
        snprintf(err, sizeof(err), "link: %s", cJSON_IsString(ln) ? "no such link"
                                                                  : "missing");
        out = error_frame(err);
    } else if (strcmp(op->valuestring, "clear") == 0) {
        netproxy_clear(np, ln->valuestring);
        out = ok_frame("ok");
    } else if (strcmp(op->valuestring, "set") == 0) {
        struct np_fault flt;
        cJSON_DeleteItemFromObjectCaseSensitive(f, "op");
        if (np_fault_parse(f, find(ln->valuestring)->proto, &flt, err, sizeof(err)) < 0 ||
            netproxy_set(np, ln->valuestring, &flt, err, sizeof(err)) < 0)
            out = error_frame(err);
        else
            out = ok_frame("ok");
    } else {
        out = error_frame("unknown op (links, set, clear, stats)");
    }
    cJSON_Delete(f);
    return out;
}

static int serve(const char *control, netproxy *np)
{
    struct sockaddr_un un;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || unix_addr(control, &un) < 0) {
        fprintf(stderr, "netproxy: bad control socket %s\n", control);
        return 1;
    }
    unlink(control);
    if (bind(fd, (struct sockaddr *)&un, sizeof(un)) < 0 || listen(fd, 16) < 0) {
        fprintf(stderr, "netproxy: cannot listen on %s: %s\n", control, strerror(errno));
        return 1;
    }
    char *buf = malloc(MAX_FRAME);
    while (!stopping && buf != NULL) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, 200) <= 0)
            continue;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        if (read_line(c, buf, MAX_FRAME, 2000) >= 0)
            reply(c, handle(np, buf));
        close(c);
    }
    free(buf);
    close(fd);
    unlink(control);
    return 0;
}

/* NAME=PROTO,LISTEN,UPSTREAM */
static int add_link(netproxy *np, const char *spec)
{
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", spec);
    char *eq = strchr(copy, '=');
    char *c1 = eq ? strchr(eq + 1, ',') : NULL;
    char *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
    if (c2 == NULL || nlinks == MAX_CLI_LINKS) {
        fprintf(stderr, "netproxy: --link wants NAME=pg|broker,LISTEN,UPSTREAM: %s\n", spec);
        return -1;
    }
    *eq = *c1 = *c2 = '\0';
    struct cli_link *l = &links[nlinks];
    if (strlen(copy) >= sizeof(l->name)) {
        fprintf(stderr, "netproxy: link name too long: %.64s\n", copy);
        return -1;
    }
    memcpy(l->name, copy, strlen(copy) + 1);
    if (strcmp(eq + 1, "pg") != 0 && strcmp(eq + 1, "broker") != 0) {
        fprintf(stderr, "netproxy: %s: protocol must be pg or broker\n", l->name);
        return -1;
    }
    l->proto = strcmp(eq + 1, "pg") == 0 ? NP_PG : NP_BROKER;
    char err[256];
    if (netproxy_add_link(np, l->name, l->proto, c1 + 1, c2 + 1, l->bound, sizeof(l->bound),
                          err, sizeof(err)) < 0) {
        fprintf(stderr, "netproxy: %s\n", err);
        return -1;
    }
    nlinks++;
    return 0;
}

static int send_frame(const char *control, const char *frame)
{
    struct sockaddr_un un;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || unix_addr(control, &un) < 0 ||
        connect(fd, (struct sockaddr *)&un, sizeof(un)) < 0) {
        fprintf(stderr, "netproxy: cannot reach %s: %s\n", control, strerror(errno));
        return 1;
    }
    size_t n = strlen(frame);
    char buf[MAX_FRAME];
    if (write(fd, frame, n) != (ssize_t)n || write(fd, "\n", 1) != 1 ||
        read_line(fd, buf, sizeof(buf), 5000) < 0) {
        fprintf(stderr, "netproxy: no answer from %s\n", control);
        close(fd);
        return 1;
    }
    close(fd);
    printf("%s\n", buf);
    return strstr(buf, "\"op\":\"error\"") != NULL ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *control = NULL, *send = NULL;
    signal(SIGPIPE, SIG_IGN);
    char err[256];
    netproxy *np = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--control") == 0 && v != NULL) {
            control = v;
        } else if (strcmp(argv[i], "--send") == 0 && v != NULL) {
            send = v;
        } else if (strcmp(argv[i], "--link") == 0 && v != NULL) {
            if (np == NULL && (np = netproxy_new(err, sizeof(err))) == NULL) {
                fprintf(stderr, "netproxy: %s\n", err);
                return 1;
            }
            if (add_link(np, v) < 0) {
                netproxy_free(np);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: netproxy --control SOCK (--link NAME=pg|broker,LISTEN,"
                    "UPSTREAM ... | --send FRAME)\n");
            netproxy_free(np);
            return 2;
        }
        i++;
    }
    if (control == NULL) {
        fprintf(stderr, "netproxy: --control is required\n");
        netproxy_free(np);
        return 2;
    }
    if (send != NULL) {
        netproxy_free(np);
        return send_frame(control, send);
    }
    if (np == NULL && (np = netproxy_new(err, sizeof(err))) == NULL) {
        fprintf(stderr, "netproxy: %s\n", err);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int rc = serve(control, np);
    netproxy_free(np);
    return rc;
}
