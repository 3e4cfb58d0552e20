/* test_bus.c -- the bus client (src/bus/bus_fakebroker.c) against a scripted
 * peer: a forked child listens on a socket in a fresh temporary directory,
 * answers each connection's hello and then sends one deliver frame chosen by
 * the test.  A delivery whose aggregate_version is not an integer in 0..2^53
 * must be refused as a protocol error (never cast), and the connection is
 * then unusable; versions inside the range arrive exactly.  The child is
 * killed by its pid. */
#include "bus.h"
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* The aggregate_version of the frame sent on the i-th connection, as JSON
 * text, and whether the client must accept it. */
static const struct {
    const char *version;
    int ok;
    long long want;
} cases[] = {
    { "7", 1, 7 },
    { "0", 1, 0 },
    { "9007199254740992", 1, 9007199254740992LL },  /* 2^53 */
    { "-1", 0, 0 },
    { "1.5", 0, 0 },
    { "9007199254740994", 0, 0 },                    /* 2^53 + 2 */
    { "1e300", 0, 0 },
    { "-1e300", 0, 0 },
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void serve(int lfd)
{
    for (size_t i = 0; i < NCASES; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            _exit(1);
        char c;
        while (read(fd, &c, 1) == 1 && c != '\n') /* the hello frame */
            ;
        char frame[512];
        int n = snprintf(frame, sizeof(frame),
                         "{\"op\":\"hello_ok\"}\n"
                         "{\"op\":\"deliver\",\"tag\":%zu,\"topic\":\"payments\","
                         "\"message_id\":\"m-%zu\",\"type\":\"PaymentCreated\","
                         "\"delivery_count\":1,\"payload\":\"{}\",\"headers\":"
                         "{\"aggregate_version\":%s,\"schema_version\":1}}\n",
                         i + 1, i, cases[i].version);
        if (write(fd, frame, (size_t)n) != n)
            _exit(1);
        /* Held open until the client closes it: a close here could race
         * the client's read of the frame. */
        while (read(fd, &c, 1) > 0)
            ;
        close(fd);
    }
    _exit(0);
}

int main(void)
{
    char dir[] = "/tmp/cw-test-bus-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char path[96];
    snprintf(path, sizeof(path), "%s/peer.sock", dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 8) < 0) {
        perror("listen");
        return 1;
    }
    pid_t peer = fork();
    if (peer == 0)
        serve(lfd);
    close(lfd);

    for (size_t i = 0; i < NCASES; i++) {
        char err[256] = "";
        bus_conn *c = bus_connect(path, "test", 2000, err, sizeof(err));
        CHECK(c != NULL);
        if (c == NULL) {
            fprintf(stderr, "connect: %s\n", err);
            break;
        }
        struct bus_delivery *d = NULL;
        int rc = bus_next_delivery(c, 2000, &d, err, sizeof(err));
        if (cases[i].ok) {
            CHECK(rc == BUS_OK && d != NULL);
            CHECK(d != NULL && d->aggregate_version == cases[i].want);
        } else {
            if (rc != BUS_PROTOCOL)
                fprintf(stderr, "aggregate_version %s: rc %d\n", cases[i].version, rc);
            CHECK(rc == BUS_PROTOCOL && d == NULL);
            CHECK(strstr(err, "aggregate_version outside 0..2^53") != NULL);
            /* Unusable after a protocol error: the caller reconnects. */
            CHECK_EQ_INT(bus_next_delivery(c, 10, &d, err, sizeof(err)), BUS_DISCONNECTED);
        }
        bus_delivery_free(d);
        bus_close(c);
    }

    int status = 0;
    WAIT_FOR(waitpid(peer, &status, WNOHANG) != 0, 2000);
    if (!check_waited) {
        kill(peer, SIGKILL);
        waitpid(peer, &status, 0);
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unlink(path);
    rmdir(dir);
    return check_report("test_bus");
}
