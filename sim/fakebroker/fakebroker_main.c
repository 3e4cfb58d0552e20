/* fakebroker_main.c -- the fakebroker command: argument checking, then the
 * event loop of fakebroker_server.c.  The protocol and the log are described
 * in fakebroker.h.
 *
 *   fakebroker --socket PATH [--db FILE] [--visibility-timeout-ms N] [--events FILE]
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure, 2 on bad
 * usage or a fault specification that does not parse. */
#include "fakebroker.h"
#include "cwlog.h"
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: fakebroker --socket PATH [--db FILE] [--visibility-timeout-ms N]"
               " [--events FILE]\n"
               "  --socket PATH              Unix socket to listen on (a stale one is removed)\n"
               "  --db FILE                  keep state in this SQLite file (default: memory)\n"
               "  --visibility-timeout-ms N  redeliver unacked deliveries after N ms"
               " (default 30000)\n"
               "  --events FILE              append the broker log (JSON lines) to FILE\n");
}

static int parse_ms(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 86400000)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    struct fb_options opt = {
        .socket_path = NULL,
        .db_path = NULL,
        .events_path = NULL,
        .visibility_timeout_ms = 30000,
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "fakebroker: %s needs a value\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--socket") == 0) {
            opt.socket_path = v;
        } else if (strcmp(a, "--db") == 0) {
            opt.db_path = v;
        } else if (strcmp(a, "--events") == 0) {
            opt.events_path = v;
        } else if (strcmp(a, "--visibility-timeout-ms") == 0) {
            if (parse_ms(v, &opt.visibility_timeout_ms) < 0) {
                fprintf(stderr, "fakebroker: --visibility-timeout-ms must be an integer"
                                " in 1..86400000, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "fakebroker: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (opt.socket_path == NULL || opt.socket_path[0] == '\0') {
        fprintf(stderr, "fakebroker: --socket is required\n");
        usage(stderr);
        return 2;
    }
    if (opt.db_path != NULL && opt.db_path[0] == '\0') {
        fprintf(stderr, "fakebroker: --db needs a file name\n");
        return 2;
    }
    /* cwlog names the process in warnings and in fault_hit lines; the
     * broker's own log lines go to the events file through the server. */
    if (cwlog_open(opt.events_path, "fakebroker") < 0) {
        fprintf(stderr, "fakebroker: could not open events file %s: %s\n", opt.events_path,
                strerror(errno));
        return 1;
    }
    char err[256];
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "fakebroker: %s\n", err);
        return 2;
    }
    return fb_server_run(&opt);
}
