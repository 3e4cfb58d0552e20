/* report_timeline.h -- the drawings of the HTML report: one SVG timeline per
 * scenario and small-multiple SVG charts of its metrics.
 *
 * A scenario's timeline.jsonl (one event per line, sorted by ts_us, written
 * by every process of the run and merged by the runner) becomes one lane per
 * process on a shared time axis.  Events are drawn as markers, one shape and
 * colour per kind with a legend; every marker carries a hover <title> with
 * its fields and the message ids it concerns, and a data-m attribute so the
 * page can highlight one message across lanes.  The runner's actions on a
 * process (start, stop, kill, pause, resume, restart, exit seen, fault armed)
 * are drawn on that process's lane.  Seven kinds of intervals are shaded,
 * derived from the events alone:
 *
 *   fault   fault_hit of a process  ->  its fault_resumed, its next event,
 *           a new incarnation's start, or a runner kill, exit, resume,
 *           start or restart aimed at it; else the end of the run
 *   down    runner kill or exit     ->  runner start or restart of it, or a
 *           start logged by it (one window for a kill and its exit)
 *   paused  runner pause            ->  runner resume, kill, exit or restart
 *   net     runner net_fault on a link  ->  its own end (ms), the link's
 *           next net_fault or net_clear, or the end of the run; drawn on a
 *           lane of the link's own ("net relay-1->pg")
 *   db      runner db_fault (crash, freeze, failover, held commits, lock,
 *           deadlock...)  ->  from its started_us to its end, on a
 *           "postgres" lane
 *   broker  runner db_fault aimed at the broker (a crash), on a "broker"
 *           lane as db; and each switch a broker_control turned on
 *           (faults_on)  ->  the next broker_control that turns it off or
 *           sets it again, or the end of the run (close_connections: an
 *           instant)
 *   clock   runner start or restart of a process with a shifted clock
 *           ("clock")  ->  that incarnation's end (kill, exit, stop,
 *           restart), or the end of the run
 *
 * Messages named in a failure witness are outlined in red and joined by a
 * dashed line across lanes.  Past a cap on individual markers, routine events
 * (claims, publishes, deliveries, applies, acks...) are folded into density
 * bars and a note says so; exceptional ones (faults, kills, retries,
 * duplicates, witness messages) stay individual, up to the same cap.
 *
 * metrics.jsonl samples (pending, oldest age, attempts, dead letters,
 * duplicates ignored, published/consumed, latency p50/p99) become line
 * charts on the same time axis with the fault windows shaded; missing or
 * null fields leave gaps.
 *
 * This header is the drawings' whole public interface, kept in three files:
 * report_events.c reads a timeline into the event model (rtl_load and the
 * rtl_ counts), report_timeline.c draws it (rtl_svg), report_charts.c reads
 * the metrics and draws their charts (rmetrics_*, and rtl_view, which needs
 * both).  What the three share and no caller needs is in report_internal.h. */
#ifndef CW_REPORT_TIMELINE_H
#define CW_REPORT_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "report_html.h"

struct rtl;     /* a parsed timeline */
struct rmetrics; /* parsed metric samples */

/* Reads a timeline.jsonl.  Lines that are not JSON objects with a numeric
 * ts_us are counted and skipped; past max_events the rest is counted only.
 * Returns NULL with a message in err when the file cannot be read (a missing
 * file included: the caller decides whether that is an error). */
struct rtl *rtl_load(const char *path, size_t max_events, char *err, size_t errlen);
void rtl_free(struct rtl *t); /* NULL is a no-op */

/* Number of events kept, of lines skipped as malformed, of lanes. */
size_t rtl_count(const struct rtl *t);
size_t rtl_bad_lines(const struct rtl *t);
int rtl_lanes(const struct rtl *t);
/* Number of shaded windows of the given type ("fault", "down", "paused",
 * "net", "db", "broker", "clock"). */
size_t rtl_windows(const struct rtl *t, const char *type);

/* Marks every message whose id occurs in one of the n texts as a witness
 * message.  Returns how many messages were marked. */
size_t rtl_mark_witnesses(struct rtl *t, const char *const *texts, size_t n);

/* The time drawn, in microseconds since the epoch: origin is the start of
 * the scenario (axis labels and hover times count from it) and [t0, t1] the
 * part shown, shared by the timeline and the charts. */
struct rview {
    int64_t origin, t0, t1;
};

/* Computes the view of a scenario from the timeline and the metrics (either
 * may be NULL).  When process start-up takes more than a fifth of the run,
 * the view starts shortly before the runner's first step, so the steps get
 * the width; the drawings then say how many earlier events they leave out.
 * Returns 0 (and a zero view) when there is nothing to draw, else 1. */
int rtl_view(const struct rtl *t, const struct rmetrics *m, struct rview *v);

/* Appends the timeline SVG (and its legend and notes) for scenario number
 * scen (used to keep element ids and data-m values unique in the page).
 * At most cap markers are drawn individually.  Returns 0 or -1 on overflow. */
int rtl_svg(struct rbuf *out, const struct rtl *t, int scen, const struct rview *v,
            size_t cap);

/* Reads a metrics.jsonl; same error rules as rtl_load. */
struct rmetrics *rmetrics_load(const char *path, size_t max_samples, char *err,
                               size_t errlen);
void rmetrics_free(struct rmetrics *m);
size_t rmetrics_count(const struct rmetrics *m);

/* Appends the metric charts, shading the windows of t (may be NULL). */
int rmetrics_svg(struct rbuf *out, const struct rmetrics *m, const struct rtl *t,
                 const struct rview *v);

/* A "nice" axis step (1, 2 or 5 times a power of ten) giving about n ticks
 * over span; exposed for unit tests. */
double report_nice_step(double span, int n);

#endif
