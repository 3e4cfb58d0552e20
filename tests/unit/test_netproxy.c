/* test_netproxy.c -- the fault proxy: its protocol scanners, its fault
 * specs, and a live link between a client and an echo server under
 * pass-through, latency, blackhole, reset, down, limit_data, the cuts and
 * the windows (on an AMQP link, against a child process standing for the
 * link's client). */
#include "netproxy.h"

#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- PostgreSQL messages -------------------------------------------------- */

static size_t put32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
    return 4;
}

/* A typed message: type, length, body. */
static size_t msg(unsigned char *out, char type, const void *body, size_t n)
{
    out[0] = (unsigned char)type;
    put32(out + 1, (unsigned)(n + 4));
    memcpy(out + 5, body, n);
    return n + 5;
}

static size_t startup(unsigned char *out, unsigned code, size_t extra)
{
    put32(out, (unsigned)(8 + extra));
    put32(out + 4, code);
    memset(out + 8, 'x', extra);
    return 8 + extra;
}

/* Feeds buf one byte at a time: the offset of the first hit, or -1. */
static long feed_bytewise(struct np_pgscan *sc, const unsigned char *buf, size_t n)
{
    long hit = -1;
    for (size_t i = 0; i < n; i++)
        if (np_pgscan_feed(sc, buf + i, 1) >= 0 && hit < 0)
            hit = (long)i + 1;
    return hit;
}

static void test_is_commit(void)
{
    CHECK(np_is_commit("COMMIT", 6));
    CHECK(np_is_commit("  commit;", 9));
    CHECK(np_is_commit("END", 3));
    CHECK(np_is_commit("commit work", 11));
    CHECK(np_is_commit("COMMIT\0", 7));
    CHECK(!np_is_commit("COMMIT PREPARED 'x'", 19));
    CHECK(!np_is_commit("ending", 6));
    CHECK(!np_is_commit("SELECT 'COMMIT'", 15));
    CHECK(!np_is_commit("BEGIN", 5));
    CHECK(!np_is_commit("", 0));
}

static void test_pgscan(void)
{
    unsigned char buf[1024];
    size_t n = 0;
    n += startup(buf + n, 80877103u, 0);          /* SSLRequest */
    n += startup(buf + n, 196608u, 20);           /* StartupMessage */
    n += msg(buf + n, 'Q', "BEGIN", 6);
    n += msg(buf + n, 'Q', "SELECT 1", 9);
    size_t before = n;
    n += msg(buf + n, 'Q', "COMMIT", 7);
    struct np_pgscan sc;
    memset(&sc, 0, sizeof(sc));
    CHECK_EQ_INT(np_pgscan_feed(&sc, buf, before), -1);
    CHECK_EQ_INT(np_pgscan_feed(&sc, buf + before, n - before), (long)(n - before));
    memset(&sc, 0, sizeof(sc));
    CHECK_EQ_INT(feed_bytewise(&sc, buf, n), (long)n);

    /* extended: Parse COMMIT, Bind, Describe, Execute, Sync: hit after Sync */
    size_t m = 0;
    unsigned char ext[256];
    m += startup(ext + m, 196608u, 4);
    m += msg(ext + m, 'P', "\0COMMIT\0\0\0", 10);
    m += msg(ext + m, 'B', "\0\0\0\0\0\0\0\0\0\0", 10);
    m += msg(ext + m, 'D', "P\0", 2);
    m += msg(ext + m, 'E', "\0\0\0\0\0", 5);
    size_t sync_at = m;
    m += msg(ext + m, 'S', "", 0);
    memset(&sc, 0, sizeof(sc));
    CHECK_EQ_INT(np_pgscan_feed(&sc, ext, sync_at), -1);
    CHECK_EQ_INT(np_pgscan_feed(&sc, ext + sync_at, m - sync_at), 5);
    memset(&sc, 0, sizeof(sc));
    CHECK_EQ_INT(feed_bytewise(&sc, ext, m), (long)m);

    /* a Parse of something else, then Sync: no hit */
    m = 0;
    m += startup(ext + m, 196608u, 0);
    m += msg(ext + m, 'P', "s1\0UPDATE t SET x=1\0\0\0", 23);
    m += msg(ext + m, 'S', "", 0);
    memset(&sc, 0, sizeof(sc));
    CHECK_EQ_INT(np_pgscan_feed(&sc, ext, m), -1);
    CHECK(!sc.broken);

    /* garbage: a length under 4 stops the scanner, never a false hit */
    unsigned char bad[16] = { 'Q', 0, 0, 0, 1 };
    memset(&sc, 0, sizeof(sc));
    sc.started = 1;
    CHECK_EQ_INT(np_pgscan_feed(&sc, bad, sizeof(bad)), -1);
    CHECK(sc.broken);
}

static void test_linescan(void)
{
    struct np_linescan ls;
    memset(&ls, 0, sizeof(ls));
    const char *a = "{\"op\":\"deliver\",\"payload\":\"{\\\"op\\\":\\\"confirm\\\"}\"}\n";
    CHECK_EQ_INT(np_linescan_feed(&ls, "confirm", a, strlen(a)), -1);
    const char *b = "{\"op\":\"hello_ok\"}\n{\"op\":\"confirm\",\"seq\":1}\n";
    CHECK_EQ_INT(np_linescan_feed(&ls, "confirm", b, strlen(b)), 18);
    /* a head split over two reads: the cut starts at 0 of the second */
    memset(&ls, 0, sizeof(ls));
    CHECK_EQ_INT(np_linescan_feed(&ls, "ack", "{\"op\":\"a", 8), -1);
    CHECK_EQ_INT(np_linescan_feed(&ls, "ack", "ck\",\"tag\":4}\n", 13), 0);
    /* a long line whose head names another op is passed whole */
    memset(&ls, 0, sizeof(ls));
    char big[300];
    memset(big, 'y', sizeof(big));
    memcpy(big, "{\"op\":\"publish\",", 16);
    big[299] = '\n';
    CHECK_EQ_INT(np_linescan_feed(&ls, "ack", big, sizeof(big)), -1);
    CHECK_EQ_INT(np_linescan_feed(&ls, "ack", "{\"op\":\"ack\"}\n", 13), 0);
}

/* Parses text as a fault for proto: 0, or -1 with err. */
static int parse(const char *text, enum np_proto proto, struct np_fault *f, char *err)
{
    cJSON *j = cJSON_Parse(text);
    int rc = np_fault_parse(j, proto, f, err, 256);
    cJSON_Delete(j);
    return rc;
}

static void test_fault_parse(void)
{
    struct np_fault f;
    char err[256];
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":200,\"jitter_ms\":50,\"direction\":\"up\","
                "\"ms\":3000}", NP_PG, &f, err) == 0);
    CHECK(f.kind == NP_LATENCY && f.latency_ms == 200 && f.dir == NP_UP && f.ms == 3000);
    CHECK_EQ_INT(parse("{\"fault\":\"cut\",\"cut_after\":\"commit\",\"then\":\"reset\"}", NP_PG, &f,
                       err), 0);
    CHECK(f.kind == NP_CUT && f.then == NP_THEN_RESET && f.times == 1);
    CHECK_EQ_INT(parse("{\"fault\":\"cut\",\"cut_after\":\"confirm\"}", NP_BROKER, &f, err), 0);
    CHECK_EQ_INT(f.then, NP_THEN_BLACKHOLE);

    CHECK(parse("{\"fault\":\"latncy\",\"latency_ms\":2}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "fault: 'latncy'") != NULL);
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":-5}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "latency_ms: -5 is out of range") != NULL);
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":99999999}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"latency\"}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "latency_ms: required") != NULL);
    CHECK(parse("{\"fault\":\"latency\",\"latency_ms\":5,\"jitter_ms\":9}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"blackhole\",\"rate_kbps\":5}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "rate_kbps: fault blackhole takes no such field") != NULL);
    CHECK(parse("{\"fault\":\"cut\",\"cut_after\":\"commit\"}", NP_BROKER, &f, err) < 0);
    CHECK(strstr(err, "cut_after: commit is for pg links") != NULL);
    CHECK(parse("{\"fault\":\"cut\",\"cut_after\":\"ack\"}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"cut\",\"cut_after\":\"rollback\"}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"blackhole\",\"direction\":\"sideways\"}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"blackhole\",\"ms\":1.5}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"reset\",\"direction\":\"up\"}", NP_PG, &f, err) < 0);
    CHECK(parse("{\"fault\":\"reset\",\"ms\":500}", NP_PG, &f, err) < 0);
    CHECK(strstr(err, "ms: fault reset takes no such field") != NULL);
    CHECK_EQ_INT(parse("{\"fault\":\"partition\",\"direction\":\"up\"}", NP_PG, &f, err), 0);
    CHECK(f.kind == NP_PARTITION && f.dir == NP_UP);

    char text[128];
    parse("{\"fault\":\"latency\",\"latency_ms\":200,\"jitter_ms\":50,\"direction\":\"up\","
          "\"ms\":3000}", NP_PG, &f, err);
    np_fault_describe(&f, text, sizeof(text));
    CHECK_EQ_STR(text, "latency 200+-50 ms up for 3000 ms");
}

/* ---- a live link ------------------------------------------------------------ */

/* An echo server on a loopback port: answers every byte it reads. */
struct echo {
    int lfd;
    int port;
    pthread_t th;
    volatile int stop;
};

static void *echo_run(void *arg)
{
    struct echo *e = arg;
    struct pollfd pf[16];
    int n = 1;
    pf[0] = (struct pollfd){ .fd = e->lfd, .events = POLLIN };
    while (!e->stop) {
        if (poll(pf, (nfds_t)n, 50) <= 0)
            continue;
        if ((pf[0].revents & POLLIN) && n < 16) {
            int fd = accept(e->lfd, NULL, NULL);
            if (fd >= 0)
                pf[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
        }
        for (int i = 1; i < n; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t got = read(pf[i].fd, buf, sizeof(buf));
            if (got <= 0) {
                close(pf[i].fd);
                pf[i].fd = -1;
            } else if (write(pf[i].fd, buf, (size_t)got) != got) {
                close(pf[i].fd);
                pf[i].fd = -1;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    return NULL;
}

static int echo_start(struct echo *e)
{
    memset(e, 0, sizeof(*e));
    e->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = { .sin_family = AF_INET };
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(in);
    if (bind(e->lfd, (struct sockaddr *)&in, len) < 0 || listen(e->lfd, 16) < 0 ||
        getsockname(e->lfd, (struct sockaddr *)&in, &len) < 0)
        return -1;
    e->port = ntohs(in.sin_port);
    return pthread_create(&e->th, NULL, echo_run, e) == 0 ? 0 : -1;
}

static void echo_stop(struct echo *e)
{
    e->stop = 1;
    pthread_join(e->th, NULL);
    close(e->lfd);
}

static int dial(const char *bound)
{
    int port = atoi(strrchr(bound, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&in, sizeof(in)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads up to n bytes within timeout_ms: the count, 0 at EOF, -1 on error
 * (errno ECONNRESET for a reset), -2 when nothing came in time. */
static ssize_t read_within(int fd, char *buf, size_t n, int timeout_ms)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    if (poll(&pf, 1, timeout_ms) <= 0)
        return -2;
    return read(fd, buf, n);
}

/* Sends text and reads its echo: the time it took, or -1. */
static int64_t roundtrip(int fd, const char *text, int timeout_ms)
{
    int64_t t0 = now_ms();
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t)n)
        return -1;
    char buf[256];
    size_t got = 0;
    while (got < n) {
        ssize_t r = read_within(fd, buf + got, sizeof(buf) - got, timeout_ms);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return memcmp(buf, text, n) == 0 ? now_ms() - t0 : -1;
}

static void set_fault(netproxy *np, const char *link, const char *text, enum np_proto p)
{
    struct np_fault f;
    char err[256];
    CHECK_EQ_INT(parse(text, p, &f, err), 0);
    CHECK_EQ_INT(netproxy_set(np, link, &f, err, sizeof(err)), 0);
}

static void test_live(void)
{
    struct echo e;
    CHECK_EQ_INT(echo_start(&e), 0);
    char err[256], up[64], bound[64];
    snprintf(up, sizeof(up), "tcp:127.0.0.1:%d", e.port);
    netproxy *np = netproxy_new(err, sizeof(err));
    CHECK(np != NULL);
    CHECK_EQ_INT(netproxy_add_link(np, "t->pg", NP_BROKER, "tcp:127.0.0.1:0", up, bound,
                                   sizeof(bound), err, sizeof(err)), 0);
    CHECK(netproxy_add_link(np, "t->pg", NP_BROKER, "tcp:127.0.0.1:0", "nonsense", bound,
                            sizeof(bound), err, sizeof(err)) < 0);
    int fd = dial(bound);
    CHECK(fd >= 0);
    CHECK(roundtrip(fd, "hello\n", 2000) >= 0);

    set_fault(np, "t->pg", "{\"fault\":\"latency\",\"latency_ms\":150,\"direction\":\"up\"}",
              NP_BROKER);
    int64_t took = roundtrip(fd, "slow\n", 3000);
    CHECK(took >= 150);
    netproxy_clear(np, "t->pg");
    took = roundtrip(fd, "fast\n", 3000);
    CHECK(took >= 0 && took < 150);

    /* blackhole: nothing comes back, the connection stays open */
    set_fault(np, "t->pg", "{\"fault\":\"blackhole\",\"ms\":300}", NP_BROKER);
    char buf[64];
    CHECK_EQ_INT(write(fd, "lost\n", 5), 5);
    CHECK_EQ_INT(read_within(fd, buf, sizeof(buf), 200), -2);
    /* the fault ends by itself after 300 ms */
    int64_t deadline = now_ms() + 3000;
    while (roundtrip(fd, "back\n", 100) < 0 && now_ms() < deadline) {
    }
    CHECK(now_ms() < deadline);

    /* cut after confirm: lines before it pass, the confirm and the rest do not */
    set_fault(np, "t->pg", "{\"fault\":\"cut\",\"cut_after\":\"confirm\",\"then\":\"reset\"}",
              NP_BROKER);
    const char *two = "{\"op\":\"hello_ok\"}\n{\"op\":\"confirm\",\"seq\":1}\n";
    CHECK_EQ_INT(write(fd, two, strlen(two)), (ssize_t)strlen(two));
    size_t got = 0;
    ssize_t r;
    while ((r = read_within(fd, buf + got, sizeof(buf) - got, 2000)) > 0)
        got += (size_t)r;
    CHECK(r == -1 && errno == ECONNRESET);
    CHECK(got == 18 && memcmp(buf, two, 18) == 0);
    close(fd);
    struct np_stats st;
    CHECK(netproxy_stats(np, "t->pg", &st) == 0 && st.cuts == 1);

    /* the cut is spent: a new connection passes */
    fd = dial(bound);
    CHECK(roundtrip(fd, "{\"op\":\"confirm\"}\n", 2000) >= 0);

    /* reset: the open connection sees a reset */
    set_fault(np, "t->pg", "{\"fault\":\"reset\"}", NP_BROKER);
    r = read_within(fd, buf, sizeof(buf), 2000);
    CHECK(r == -1 && errno == ECONNRESET);
    close(fd);

    /* down: new connections are refused until it ends */
    set_fault(np, "t->pg", "{\"fault\":\"down\"}", NP_BROKER);
    fd = dial(bound);
    CHECK(fd < 0 || roundtrip(fd, "x\n", 1000) < 0);
    if (fd >= 0)
        close(fd);
    netproxy_clear(np, "t->pg");
    fd = dial(bound);
    CHECK(roundtrip(fd, "up\n", 2000) >= 0);

    /* limit_data: 4 bytes up, then the connection closes (the echo of
     * what passed may or may not come back before it does) */
    set_fault(np, "t->pg", "{\"fault\":\"limit_data\",\"limit_bytes\":4,\"direction\":\"up\"}",
              NP_BROKER);
    CHECK_EQ_INT(write(fd, "abcdefgh", 8), 8);
    got = 0;
    while ((r = read_within(fd, buf + got, sizeof(buf) - got, 2000)) > 0)
        got += (size_t)r;
    CHECK(r == 0 && got <= 4 && memcmp(buf, "abcd", got) == 0);
    close(fd);
    netproxy_clear(np, "t->pg");

    /* slicer: the echo arrives whole, in order */
    set_fault(np, "t->pg", "{\"fault\":\"slicer\",\"slice_bytes\":2,\"slice_delay_ms\":5}",
              NP_BROKER);
    fd = dial(bound);
    CHECK(roundtrip(fd, "sliced into pieces\n", 3000) >= 0);
    close(fd);

    CHECK(netproxy_set(np, "nope", &(struct np_fault){ .kind = NP_BLACKHOLE }, err,
                       sizeof(err)) < 0);
    netproxy_free(np);
    echo_stop(&e);
}

/* A child that only waits: the process a window signals. */
static pid_t sleeper(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

/* The state letter of pid in /proc, or 0. */
static char state_of(pid_t pid)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char *ok = fgets(stat, sizeof(stat), f);
    fclose(f);
    const char *paren = ok ? strrchr(stat, ')') : NULL;
    return paren != NULL ? paren[2] : 0;
}

/* Reads exactly n bytes within timeout_ms: 0, or -1. */
static int read_exactly(int fd, unsigned char *buf, size_t n, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    size_t got = 0;
    while (got < n) {
        int left = (int)(deadline - now_ms());
        ssize_t r = left > 0 ? read_within(fd, (char *)buf + got, n - got, left) : -2;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void set_window(netproxy *np, const char *text, pid_t pid)
{
    struct np_fault f;
    char err[256];
    CHECK_EQ_INT(parse(text, NP_AMQP, &f, err), 0);
    f.pid = (int)pid;
    CHECK_EQ_INT(netproxy_set(np, "w->broker", &f, err, sizeof(err)), 0);
}

/* The windows on an AMQP link to the echo server: a pause holds the
 * publish (heartbeats still pass) until the process runs again; a kill
 * drops it and closes the connection. */
static void test_live_window(void)
{
    struct echo e;
    CHECK_EQ_INT(echo_start(&e), 0);
    char err[256], up[64], bound[64];
    snprintf(up, sizeof(up), "tcp:127.0.0.1:%d", e.port);
    netproxy *np = netproxy_new(err, sizeof(err));
    CHECK_EQ_INT(netproxy_add_link(np, "w->broker", NP_AMQP, "tcp:127.0.0.1:0", up, bound,
                                   sizeof(bound), err, sizeof(err)), 0);
    static const unsigned char header[8] = { 'A', 'M', 'Q', 'P', 0, 0, 9, 1 };
    static const unsigned char heartbeat[8] = { 8, 0, 0, 0, 0, 0, 0, 0xCE };
    static const unsigned char publish[18] = { 1, 0, 1, 0, 0, 0, 10, 0, 60, 0, 40,
                                               0, 0, 0, 0, 0, 0, 0xCE };
    unsigned char wire[64], back[64];
    memcpy(wire, header, 8);
    memcpy(wire + 8, publish, sizeof(publish));
    memcpy(wire + 8 + sizeof(publish), heartbeat, 8);
    size_t nwire = 16 + sizeof(publish);

    /* a window needs a real pid: kill(0) would hit the proxy's own group */
    struct np_fault f;
    CHECK_EQ_INT(parse("{\"fault\":\"window\",\"frame\":\"publish\",\"action\":\"kill\"}",
                       NP_AMQP, &f, err), 0);
    CHECK(netproxy_set(np, "w->broker", &f, err, sizeof(err)) < 0);
    CHECK(strstr(err, "needs the pid") != NULL);

    /* pause: the header and the heartbeat come back, the publish waits */
    pid_t child = sleeper();
    set_window(np, "{\"fault\":\"window\",\"frame\":\"publish\",\"action\":\"pause\"}", child);
    int fd = dial(bound);
    CHECK_EQ_INT(write(fd, wire, nwire), (ssize_t)nwire);
    CHECK_EQ_INT(read_exactly(fd, back, 16, 2000), 0);
    CHECK(memcmp(back, header, 8) == 0 && memcmp(back + 8, heartbeat, 8) == 0);
    int64_t deadline = now_ms() + 2000;
    while (state_of(child) != 'T' && now_ms() < deadline) {
    }
    CHECK(state_of(child) == 'T');
    CHECK_EQ_INT(read_within(fd, (char *)back, sizeof(back), 300), -2);
    /* more heartbeats pass while it is held */
    CHECK_EQ_INT(write(fd, heartbeat, 8), 8);
    CHECK_EQ_INT(read_exactly(fd, back, 8, 2000), 0);
    CHECK(memcmp(back, heartbeat, 8) == 0);
    struct np_stats st;
    CHECK(netproxy_stats(np, "w->broker", &st) == 0 && st.windows == 1);
    struct np_firing fr[4];
    CHECK_EQ_INT(netproxy_firings(np, "w->broker", fr, 4), 1);
    CHECK(fr[0].frame == NP_FRAME_PUBLISH && fr[0].action == NP_ACTION_PAUSE &&
          fr[0].pid == (int)child && fr[0].signal_errno == 0 && fr[0].ts_us > 0);
    /* resumed: the publish follows, whole */
    kill(child, SIGCONT);
    CHECK_EQ_INT(read_exactly(fd, back, sizeof(publish), 2000), 0);
    CHECK(memcmp(back, publish, sizeof(publish)) == 0);
    /* the window is spent: the next publish passes */
    CHECK_EQ_INT(write(fd, publish, sizeof(publish)), (ssize_t)sizeof(publish));
    CHECK_EQ_INT(read_exactly(fd, back, sizeof(publish), 2000), 0);
    close(fd);

    /* skip 1, kill: the first publish passes, the second is never seen,
     * the process dies and the connection closes */
    set_window(np, "{\"fault\":\"window\",\"frame\":\"publish\",\"action\":\"kill\","
               "\"skip\":1}", child);
    fd = dial(bound);
    nwire = 8 + sizeof(publish);
    CHECK_EQ_INT(write(fd, wire, nwire), (ssize_t)nwire);
    CHECK_EQ_INT(read_exactly(fd, back, nwire, 2000), 0);
    CHECK(memcmp(back + 8, publish, sizeof(publish)) == 0);
    CHECK_EQ_INT(write(fd, publish, sizeof(publish)), (ssize_t)sizeof(publish));
    CHECK_EQ_INT(read_within(fd, (char *)back, sizeof(back), 2000), 0); /* closed */
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status) &&
          WTERMSIG(status) == SIGKILL);
    CHECK(netproxy_stats(np, "w->broker", &st) == 0 && st.windows == 2);
    close(fd);
    netproxy_free(np);
    echo_stop(&e);
}

int main(void)
{
    test_is_commit();
    test_pgscan();
    test_linescan();
    test_fault_parse();
    test_live();
    test_live_window();
    return check_report("test_netproxy");
}
