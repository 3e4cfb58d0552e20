/* netproxy_main.c -- the fault proxy as a daemon, and its control client.
 *
 * A process of its own, not a thread of the runner, so that the links stay
 * up after the runner ends (--keep) and a fault can be set by hand:
 *
 *   netproxy --control SOCK [--isolated-from NETNS] --link NAME=pg,LISTEN,UPSTREAM ...
 *       serves the links (NETNS: the namespace the run left, as
 *       /proc/self/ns/net named it; without it no partition is allowed); control frames on SOCK, one JSON line each:
 *         {"op":"links"}                    -> {"op":"links","links":[{name,bound}]}
 *         {"op":"set","link":L,"fault":...} -> {"op":"ok"}  (fields: netproxy.h;
 *                                              a window also takes "pid", the
 *                                              link's client process)
 *         {"op":"pid","link":L,"pid":N}     -> {"op":"ok"}  (the client restarted)
 *         {"op":"clear","link":L}           -> {"op":"ok"}
 *         {"op":"stats"}                    -> {"op":"stats","links":{L:{...}}}
 *                                              (counters, and "fired": each
 *                                              window's firing)
 *       errors: {"op":"error","error":"..."}.
 *   netproxy --control SOCK --send 'FRAME'
 *       sends one frame and prints the reply (exit 1 on an error reply).
 *
 * The partition fault is the kernel's, not the proxy's: an nftables chain
 * (table inet crashwindow, chain l<PORT>) drops the link's packets on its
 * port, so that neither end hears from the other, not even a TCP ACK.  It
 * is refused unless the daemon runs in a network namespace other than
 * init's: the host's own rules are never touched.
 *
 * SIGTERM ends the daemon.  It runs in a session of its own (setsid, as
 * pg_ctl gives the postmaster): with autogroup scheduling, Linux's default,
 * the processes of one session share one slice of the CPU, and a proxy in
 * the session of the processes it carries would queue behind them for every
 * byte it forwards, a delay no network adds.  A session of its own is not
 * enough: PostgreSQL's backends each have a session of their own too, so
 * the one proxy that carries every connection would get the CPU share of
 * one backend.  As root it therefore also weighs its session like nice -10
 * (/proc/self/autogroup): on a busy machine it forwards when bytes arrive,
 * as a network would, and it never needs more than a sliver of a core.
 * Measured by scripts/bench-proxy, payments-api through the proxy against
 * direct (scripts/bench-proxy 2 12 20000): 0.78-0.82 in the benchmark's
 * session, 0.90 in one of its own, 0.95 with that weight. */
#include "netproxy.h"
#include "cliutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NFT "/usr/sbin/nft"

#define MAX_FRAME 65536
/* A stats reply carries every kept firing of every link (NP_MAX_FIRINGS
 * each, about 100 bytes apiece): the runner's reader (brokerctl) takes
 * up to a MiB, and so does --send. */
#define MAX_REPLY (1024 * 1024)
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
    long long partition_until;   /* mono ms; 0: none; -1: until cleared */
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

/* The "pid" of a control frame, taken out of it: 0 when absent, -1 with
 * err when it is no process id. */
static int take_pid(cJSON *f, char *err, size_t errlen)
{
    cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(f, "pid");
    if (v == NULL)
        return 0;
    int pid = cJSON_IsNumber(v) && v->valuedouble > 1 && v->valuedouble < 1 << 22 &&
              v->valuedouble == (double)(int)v->valuedouble ? (int)v->valuedouble : -1;
    cJSON_Delete(v);
    if (pid < 0)
        snprintf(err, errlen, "pid: must be a process id (an integer above 1)");
    return pid;
}

/* Each firing of link's windows, for the stats frame. */
static cJSON *firings_json(netproxy *np, const char *link)
{
    struct np_firing fr[NP_MAX_FIRINGS];
    int n = netproxy_firings(np, link, fr, NP_MAX_FIRINGS);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        char ts[24];
        snprintf(ts, sizeof(ts), "%lld", fr[i].ts_us);
        cJSON_AddItemToObject(o, "ts_us", cJSON_CreateRaw(ts)); /* all its digits */
        cJSON_AddStringToObject(o, "frame", np_frame_name(fr[i].frame));
        cJSON_AddStringToObject(o, "action", np_action_name(fr[i].action));
        cJSON_AddNumberToObject(o, "pid", fr[i].pid);
        if (fr[i].signal_errno != 0)
            cJSON_AddStringToObject(o, "signal_error", strerror(fr[i].signal_errno));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static struct cli_link *find(const char *name)
{
    for (int i = 0; i < nlinks; i++)
        if (strcmp(links[i].name, name) == 0)
            return &links[i];
    return NULL;
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs nft with one command line, within 5 s.  0 or -1. */
static int nft(const char *command)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execl(NFT, "nft", command, (char *)NULL);
        _exit(127);
    }
    long long deadline = mono_ms() + 5000;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (mono_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The namespace the run left (--isolated-from, given by the runner when
 * it made one of its own), or "". */
static const char *isolated_from = "";

/* Whether this process's network namespace is the run's own: not the one
 * the run left, and not init's when init's can be read. */
static int own_netns(void)
{
    char mine[64], init[64];
    ssize_t a = readlink("/proc/self/ns/net", mine, sizeof(mine) - 1);
    if (a <= 0 || isolated_from[0] == '\0')
        return 0;
    mine[a] = '\0';
    ssize_t b = readlink("/proc/1/ns/net", init, sizeof(init) - 1);
    if (b > 0) {
        init[b] = '\0';
        if (strcmp(mine, init) == 0)
            return 0;
    }
    return strcmp(mine, isolated_from) != 0;
}

static int link_port(const struct cli_link *l)
{
    const char *colon = strrchr(l->bound, ':');
    return strncmp(l->bound, "tcp:", 4) == 0 && colon != NULL ? atoi(colon + 1) : 0;
}

static void partition_clear(struct cli_link *l)
{
    char cmd[160];
    if (l->partition_until == 0)
        return;
    snprintf(cmd, sizeof(cmd), "flush chain inet crashwindow l%d", link_port(l));
    nft(cmd);
    snprintf(cmd, sizeof(cmd), "delete chain inet crashwindow l%d", link_port(l));
    nft(cmd);
    l->partition_until = 0;
}

/* Drops the link's packets in the kernel (dport: towards the proxy, from
 * the process; sport: back to it).  0, or -1 with err. */
static int partition_set(struct cli_link *l, const struct np_fault *f, char *err,
                         size_t errlen)
{
    int port = link_port(l);
    if (port <= 0) {
        snprintf(err, errlen, "link %s: a partition is for TCP links", l->name);
        return -1;
    }
    if (!own_netns()) {
        snprintf(err, errlen, "partition: the proxy runs in the host's network namespace; "
                 "the host's rules are never touched (the runner makes a namespace of its "
                 "own when a scenario has a partition)");
        return -1;
    }
    if (access(NFT, X_OK) != 0) {
        snprintf(err, errlen, "partition: %s is missing (Debian package nftables)", NFT);
        return -1;
    }
    partition_clear(l);
    char cmd[3][160];
    snprintf(cmd[0], sizeof(cmd[0]), "add table inet crashwindow");
    snprintf(cmd[1], sizeof(cmd[1]),
             "add chain inet crashwindow l%d { type filter hook input priority 0 ; }", port);
    int rc = nft(cmd[0]) < 0 || nft(cmd[1]) < 0 ? -1 : 0;
    l->partition_until = -1;
    if (rc == 0 && f->dir != NP_DOWNSTREAM) {
        snprintf(cmd[2], sizeof(cmd[2]), "add rule inet crashwindow l%d tcp dport %d drop",
                 port, port);
        rc = nft(cmd[2]);
    }
    if (rc == 0 && f->dir != NP_UP) {
        snprintf(cmd[2], sizeof(cmd[2]), "add rule inet crashwindow l%d tcp sport %d drop",
                 port, port);
        rc = nft(cmd[2]);
    }
    if (rc < 0) {
        partition_clear(l);
        snprintf(err, errlen, "partition: nft failed to install the rules of %s", l->name);
        return -1;
    }
    if (f->ms > 0)
        l->partition_until = mono_ms() + f->ms;
    return 0;
}

/* Ends the partitions whose time ran out. */
static void partitions_expire(void)
{
    long long now = mono_ms();
    for (int i = 0; i < nlinks; i++)
        if (links[i].partition_until > 0 && now >= links[i].partition_until)
            partition_clear(&links[i]);
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
                cJSON_AddNumberToObject(l, "open", (double)st.open);
                cJSON_AddNumberToObject(l, "bytes_up", (double)st.bytes_up);
                cJSON_AddNumberToObject(l, "bytes_down", (double)st.bytes_down);
                cJSON_AddNumberToObject(l, "cuts", (double)st.cuts);
                cJSON_AddNumberToObject(l, "resets", (double)st.resets);
                cJSON_AddNumberToObject(l, "windows", (double)st.windows);
                cJSON_AddItemToObject(l, "fired", firings_json(np, links[i].name));
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
        partition_clear(find(ln->valuestring));
        out = ok_frame("ok");
    } else if (strcmp(op->valuestring, "pid") == 0) {
        int pid = take_pid(f, err, sizeof(err));
        if (pid == 0)
            snprintf(err, sizeof(err), "pid: missing");
        out = pid <= 0 ? error_frame(err)
                       : (netproxy_set_pid(np, ln->valuestring, pid), ok_frame("ok"));
    } else if (strcmp(op->valuestring, "set") == 0) {
        struct np_fault flt;
        struct cli_link *l = find(ln->valuestring);
        cJSON_DeleteItemFromObjectCaseSensitive(f, "op");
        /* The pid is the runner's to give, never a scenario's: it is taken
         * out before the fault is read, which refuses one. */
        int pid = take_pid(f, err, sizeof(err));
        int rc = pid < 0 ? -1 : np_fault_parse(f, l->proto, &flt, err, sizeof(err));
        if (rc == 0 && flt.kind == NP_WINDOW && pid == 0) {
            snprintf(err, sizeof(err), "pid: required by fault window (the process at the "
                     "client end of the link)");
            rc = -1;
        } else if (rc == 0 && flt.kind != NP_WINDOW && pid > 0) {
            snprintf(err, sizeof(err), "pid: fault %s takes no such field",
                     np_kind_name(flt.kind));
            rc = -1;
        }
        flt.pid = rc == 0 ? pid : 0;
        if (rc == 0 && flt.kind == NP_PARTITION)
            rc = partition_set(l, &flt, err, sizeof(err));
        else if (rc == 0)
            rc = netproxy_set(np, ln->valuestring, &flt, err, sizeof(err));
        out = rc < 0 ? error_frame(err) : ok_frame("ok");
    } else {
        out = error_frame("unknown op (links, set, pid, clear, stats)");
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
        partitions_expire();
        if (poll(&pf, 1, 50) <= 0)
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
    for (int i = 0; i < nlinks; i++)
        partition_clear(&links[i]);
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
        fprintf(stderr, "netproxy: --link wants NAME=pg|broker|amqp,LISTEN,UPSTREAM: %s\n", spec);
        return -1;
    }
    *eq = *c1 = *c2 = '\0';
    struct cli_link *l = &links[nlinks];
    if (strlen(copy) >= sizeof(l->name)) {
        fprintf(stderr, "netproxy: link name too long: %.64s\n", copy);
        return -1;
    }
    memcpy(l->name, copy, strlen(copy) + 1);
    if (strcmp(eq + 1, "pg") != 0 && strcmp(eq + 1, "broker") != 0 &&
        strcmp(eq + 1, "amqp") != 0) {
        fprintf(stderr, "netproxy: %s: protocol must be pg, broker or amqp\n", l->name);
        return -1;
    }
    l->proto = strcmp(eq + 1, "pg") == 0 ? NP_PG : strcmp(eq + 1, "amqp") == 0 ? NP_AMQP
                                                                                : NP_BROKER;
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
    char *buf = malloc(MAX_REPLY);
    if (buf == NULL || write(fd, frame, n) != (ssize_t)n || write(fd, "\n", 1) != 1 ||
        read_line(fd, buf, MAX_REPLY, 5000) < 0) {
        fprintf(stderr, "netproxy: no answer from %s\n", control);
        free(buf);
        close(fd);
        return 1;
    }
    close(fd);
    printf("%s\n", buf);
    int failed = strstr(buf, "\"op\":\"error\"") != NULL;
    free(buf);
    return failed ? 1 : 0;
}

/* Gives the proxy's session the weight of nice -10 (see the top of this
 * file).  Only root may; elsewhere, or without autogroup scheduling, the
 * proxy runs at the normal weight, which only makes hops slower. */
static void weigh_session(void)
{
    int fd = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t w = write(fd, "-10\n", 4);
    (void)w;
    close(fd);
}

/* The links given with --link, made as they are read. */
struct link_args {
    netproxy *np;  /* made at the first --link */
    int status;    /* the exit status when one fails: 1 no proxy, 2 a bad link */
};

static int take_link(const char *v, void *ctx, char *err, size_t errlen)
{
    struct link_args *la = ctx;
    if (la->np == NULL && (la->np = netproxy_new(err, errlen)) == NULL) {
        la->status = 1;
        return -1;
    }
    if (add_link(la->np, v) < 0) {
        err[0] = '\0'; /* add_link said why */
        la->status = 2;
        return -1;
    }
    return 0;
}

/* A mistake of form gets the one-line usage; --help the whole of it. */
#define NETPROXY_USAGE \
    "usage: netproxy --control SOCK (--link NAME=pg|broker|amqp,LISTEN,UPSTREAM ... | " \
    "--send FRAME)"
static const struct cw_opts_style netproxy_style = {
    .help = CW_HELP_LONG | CW_HELP_SHORT,
    .unknown = NETPROXY_USAGE,
    .missing = NETPROXY_USAGE,
};

static void usage(FILE *f)
{
    fprintf(f,
            NETPROXY_USAGE "\n"
            "the TCP fault proxy every process's links go through (the runner starts it)\n"
            "  --control SOCK        the Unix socket its control frames arrive on\n"
            "  --link NAME=KIND,LISTEN,UPSTREAM\n"
            "                        one link (repeatable): KIND pg, broker or amqp (the\n"
            "                        protocol its frame faults read), LISTEN the address it\n"
            "                        serves, UPSTREAM the one it forwards to\n"
            "  --isolated-from NETNS the network namespace the run left (as\n"
            "                        /proc/self/ns/net names it); without it no partition\n"
            "                        (a kernel drop rule) is allowed\n"
            "  --send FRAME          send one control frame to --control, print the reply\n"
            "                        (exit 1 on an error reply)\n"
            "SIGTERM ends the daemon.  Exit: 0, 1 could not serve, 2 bad usage or link.\n");
}

int main(int argc, char **argv)
{
    const char *control = NULL, *send = NULL;
    signal(SIGPIPE, SIG_IGN);
    char err[256];
    struct link_args la = { NULL, 0 };
    const struct cw_opt opts[] = {
        CW_OPT_STRING("--control", &control),
        CW_OPT_STRING("--isolated-from", &isolated_from),
        CW_OPT_STRING("--send", &send),
        CW_OPT_CALL("--link", take_link, &la),
    };
    int pr = cw_opts_parse(opts, CW_NOPTS(opts), &netproxy_style, argc, argv, NULL, err,
                           sizeof(err));
    netproxy *np = la.np;
    if (pr == CW_OPTS_HELP) {
        usage(stdout);
        netproxy_free(np);
        return 0;
    }
    if (pr == CW_OPTS_USAGE) {
        fprintf(stderr, "%s\n", err);
        netproxy_free(np);
        return 2;
    }
    if (pr < 0) {
        if (err[0] != '\0')
            fprintf(stderr, "netproxy: %s\n", err);
        netproxy_free(np);
        return la.status;
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
    (void)setsid(); /* fails only for a group leader, already detached */
    weigh_session();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int rc = serve(control, np);
    netproxy_free(np);
    return rc;
}
