/* report_internal.h -- what the three files of the report's drawings share,
 * and nothing that report.c or a test may call (that is report_timeline.h):
 *
 *   report_events.c    the event model: struct rtl, its events, lanes and
 *                      windows, and the JSON-lines reader
 *   report_timeline.c  the SVG timeline and the time axis helpers
 *   report_charts.c    the metric samples, the shared view and the charts
 *
 * The timeline and the charts read struct rtl directly: rtl_load builds it,
 * rtl_mark_witnesses flags its messages, and drawing only reads it. */
#ifndef CW_REPORT_INTERNAL_H
#define CW_REPORT_INTERNAL_H

#include "report_timeline.h"

#include <cjson/cJSON.h>

#define MAX_LANES 40

/* What an event is: report_events.c decides it from the process's role and
 * the event's name, report_timeline.c gives each kind its shape and legend. */
enum kind {
    K_START, K_REQUEST, K_COMMIT, K_API_ODD, K_CLAIM, K_PUBLISH, K_PUB_ERR, K_MARK,
    K_RETRY, K_DEAD, K_LEASE_LOST, K_BROKER_PUB, K_DELIVER, K_REDELIVER, K_APPLY,
    K_DUP, K_ANOMALY, K_ACK, K_NACK, K_FAULT, K_FAULT_END, K_ARM, K_KILL, K_STOP,
    K_EXIT, K_PAUSE, K_RESUME, K_RESTART, K_RECONNECT, K_RUNNER, K_OTHER, K_COUNT
};

/* ---- the event model (report_events.c) ---------------------------------- */

struct rev {
    int64_t ts;
    int lane;
    int kind;
    int target;       /* lane a runner action aims at, or -1 */
    long pid;
    int nmsgs;
    int *msgs;        /* message indices, owned */
    char *text;       /* hover text: event name and fields, owned */
};

enum win_type { W_FAULT, W_DOWN, W_PAUSED, W_NET, W_DB, W_BROKER, W_CLOCK };
extern const char *const rtl_win_names[]; /* by win_type, as rtl_windows names them */

struct rwin {
    int lane;
    enum win_type type;
    int64_t from, to;
    char *label; /* owned, raw */
};

struct lane {
    char *name;
    long last_pid;
};

struct rtl {
    struct rev *ev;
    size_t n, cap;
    size_t bad_lines, dropped;
    struct lane lanes[MAX_LANES];
    int nlanes;
    /* message ids: open-addressing table of indices into ids[] */
    char **ids;
    unsigned char *witness;
    size_t nids, idcap;
    int *slots;
    size_t nslots;
    struct rwin *win;
    size_t nwin;
};

/* Roles a process name implies; the event names overlap between roles
 * ("publish" is a relay's and the broker's, "deliver" a consumer's and the
 * broker's), so the role picks the kind. */
enum role { R_OTHER, R_API, R_RELAY, R_BROKER, R_RUNNER, R_CONSUMER };
/* The role of the process whose lane is named proc. */
enum role rtl_role_of(const char *proc);

/* A copy of s, or NULL on out of memory. */
char *report_strdup(const char *s);

/* Where report_read_jsonl hands the lines of a file: add takes one JSON object
 * and returns < 0 to count it as bad; *n is the count add keeps, compared
 * against max. */
struct jsonl_sink {
    int (*add)(void *ctx, const cJSON *o);
    void *ctx;
    const size_t *n;
    size_t max;
    size_t *dropped, *bad_lines;
};

/* Reads the JSON-lines file at path into sink. Empty lines are skipped; once *sink->n
 * reaches sink->max further lines only count in *dropped; a line longer than 1 MiB,
 * not a JSON object, or refused by add counts in *bad_lines. 0 on success, -1 with
 * the reason in err when the file cannot be opened or read (what was added stays). */
int report_read_jsonl(const char *path, const struct jsonl_sink *sink, char *err,
                      size_t errlen);

/* ---- the time axis (report_timeline.c), shared with the charts ----------- */

/* Where a drawing puts time: [t0, t1] spread over w pixels from x0. */
struct geo {
    int64_t t0, t1;   /* shown */
    double x0, w;
    int64_t origin;   /* labels count from here */
};

/* The x of time ts, clamped to the drawing. */
double report_xpos(const struct geo *g, int64_t ts);

/* Formats a time offset in milliseconds for an axis with the given step:
 * seconds once the step reaches 100 ms, with as many decimals as the step
 * needs, milliseconds below. */
void report_fmt_offset(char *out, size_t len, double ms, double step_ms);

#endif
