/* fakebroker_main.c -- the fakebroker command: argument checking, then the
 * event loop of fakebroker_server.c.  The protocol and the log are described
 * in fakebroker.h.
 *
 *   fakebroker --socket PATH [--db FILE] [--visibility-timeout-ms N] [--events FILE]
 *
 * Exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure, 2 on bad
 * usage or a fault specification that does not parse. */
#include "fakebroker.h"
#include "cliutil.h"
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

/* --visibility-timeout-ms: cw_parse_int's rule, the broker's own message. */
static int take_visibility(const char *v, void *ctx, char *err, size_t errlen)
{
    if (cw_parse_int(NULL, v, 1, 86400000, ctx, NULL, 0) < 0) {
        snprintf(err, errlen, "--visibility-timeout-ms must be an integer in 1..86400000, "
                              "got '%s'", v);
        return -1;
    }
    return 0;
}

/* Every option takes a value; every argument is read as an option's name. */
static const struct cw_opts_style broker_style = {
    .help = CW_HELP_LONG | CW_HELP_SHORT,
    .value_first = 1,
    .unknown = "unknown option %s",
    .missing = "%s needs a value",
};

int main(int argc, char **argv)
{
    struct fb_options opt = {
        .socket_path = NULL,
        .db_path = NULL,
        .events_path = NULL,
        .visibility_timeout_ms = 30000,
    };
    const struct cw_opt opts[] = {
        CW_OPT_STRING("--socket", &opt.socket_path),
        CW_OPT_STRING("--db", &opt.db_path),
        CW_OPT_STRING("--events", &opt.events_path),
        CW_OPT_CALL("--visibility-timeout-ms", take_visibility, &opt.visibility_timeout_ms),
    };
    char err[4096];
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &broker_style, argc, argv, NULL, err,
                           sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout);
        return 0;
    }
    if (rc < 0) {
        fprintf(stderr, "fakebroker: %s\n", err);
        /* A value refused is the whole story; a mistake of form gets the usage. */
        if (rc == CW_OPTS_USAGE)
            usage(stderr);
        return 2;
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
    if (fault_init(err, sizeof(err)) < 0) {
        fprintf(stderr, "fakebroker: %s\n", err);
        return 2;
    }
    return fb_server_run(&opt);
}
