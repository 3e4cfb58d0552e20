/* report_timeline.c -- the SVG timeline of one scenario: lanes, time axis,
 * shaded windows, density bars, witness lines and markers, then the legend
 * and notes (contracts in report_timeline.h; the events, lanes and windows
 * it draws are built by report_events.c).
 *
 * Every piece of outside text reaches the page through rbuf_esc; numbers are
 * formatted by us; element ids and data-m values are built from integers
 * only, never from names taken from the run.  The time axis helpers here
 * (report_nice_step, report_fmt_offset, report_xpos) serve the metric charts
 * too (report_charts.c), which share the timeline's time axis. */
#include "report_timeline.h"
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WITNESS_LINES 24

/* Geometry of the timeline drawing, in SVG user units (pixels). */
#define TL_WIDTH 1180
#define TL_LEFT 184    /* lane labels live left of this */
#define TL_LABEL_MAX 26 /* bytes of a lane's name shown ("net accounting->broker" whole) */
#define TL_RIGHT 14
#define TL_TOP 26      /* time axis labels above the lanes */
#define TL_LANE_H 34
#define TL_BUCKET_PX 5 /* width of one density bar */

/* ---- how each event kind is drawn ---------------------------------------- */

enum shape { SH_CIRCLE, SH_SQUARE, SH_DIAMOND, SH_TRI, SH_CROSS, SH_TICK, SH_BAR,
             SH_PLAY, SH_STAR, SH_DOT, SH_KILL, SH_START };

struct kind_info {
    const char *cls;   /* CSS class suffix, also the short name in titles */
    const char *label; /* legend text */
    enum shape shape;
    int row;           /* 0 top, 1 middle, 2 bottom of the lane */
    int routine;       /* may be folded into density bars */
};

static const struct kind_info kinds[K_COUNT] = {
    [K_START] = {"start", "process start", SH_START, 1, 0},
    [K_REQUEST] = {"request", "HTTP request", SH_TICK, 0, 1},
    [K_COMMIT] = {"commit", "commit (payment + outbox row)", SH_SQUARE, 1, 1},
    [K_API_ODD] = {"apiodd", "replay / conflict / ambiguous commit", SH_DIAMOND, 2, 0},
    [K_CLAIM] = {"claim", "claim (lease)", SH_DIAMOND, 0, 1},
    [K_PUBLISH] = {"publish", "publish confirmed", SH_CIRCLE, 1, 1},
    [K_PUB_ERR] = {"puberr", "publish failed", SH_CIRCLE, 1, 0},
    [K_MARK] = {"mark", "marked published", SH_TICK, 2, 1},
    [K_RETRY] = {"retry", "retry scheduled", SH_TRI, 2, 0},
    [K_DEAD] = {"dead", "dead-lettered", SH_CROSS, 2, 0},
    [K_LEASE_LOST] = {"leaselost", "lease lost", SH_CROSS, 0, 0},
    [K_BROKER_PUB] = {"bpublish", "broker stored", SH_CIRCLE, 0, 1},
    [K_DELIVER] = {"deliver", "delivery", SH_TRI, 0, 1},
    [K_REDELIVER] = {"redeliver", "redelivery", SH_TRI, 0, 0},
    [K_APPLY] = {"apply", "applied (ledger entry)", SH_CIRCLE, 1, 1},
    [K_DUP] = {"dup", "duplicate absorbed by inbox", SH_DIAMOND, 1, 0},
    [K_ANOMALY] = {"anomaly", "gap / stale / parked", SH_DIAMOND, 2, 0},
    [K_ACK] = {"ack", "ack", SH_TICK, 2, 1},
    [K_NACK] = {"nack", "nack", SH_TICK, 2, 0},
    [K_FAULT] = {"fault", "fault point hit", SH_STAR, 1, 0},
    [K_FAULT_END] = {"faultend", "fault resumed", SH_DOT, 1, 0},
    [K_ARM] = {"arm", "fault armed / disarmed by the runner", SH_DOT, 0, 0},
    [K_KILL] = {"kill", "kill (SIGKILL)", SH_KILL, 1, 0},
    [K_STOP] = {"stop", "stop (SIGTERM)", SH_SQUARE, 1, 0},
    [K_EXIT] = {"exit", "process exited", SH_CROSS, 1, 0},
    [K_PAUSE] = {"pause", "pause (SIGSTOP)", SH_BAR, 1, 0},
    [K_RESUME] = {"resume", "resume (SIGCONT)", SH_PLAY, 1, 0},
    [K_RESTART] = {"restart", "restart", SH_PLAY, 1, 0},
    [K_RECONNECT] = {"reconnect", "reconnect", SH_DOT, 0, 0},
    [K_RUNNER] = {"runner", "runner step / check", SH_DOT, 1, 0},
    [K_OTHER] = {"other", "other event", SH_DOT, 1, 1},
};

/* ---- the time axis, shared with the charts -------------------------------- */

double report_nice_step(double span, int n)
{
    if (!(span > 0) || n < 1)
        return 1;
    double raw = span / n;
    double p = pow(10, floor(log10(raw)));
    double f = raw / p;
    double nice = f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10;
    return nice * p;
}

void report_fmt_offset(char *out, size_t len, double ms, double step_ms)
{
    if (fabs(ms) < step_ms * 1e-6)
        ms = 0; /* never "-0.0 s" */
    if (step_ms >= 100) {
        int dec = fmod(step_ms, 1000) == 0 ? 0 : fmod(step_ms, 100) == 0 ? 1 : 2;
        snprintf(out, len, "%.*f s", dec, ms / 1000);
    } else {
        int dec = step_ms >= 1 ? 0 : step_ms >= 0.1 ? 1 : 2;
        snprintf(out, len, "%.*f ms", dec, ms);
    }
}

double report_xpos(const struct geo *g, int64_t ts)
{
    if (g->t1 <= g->t0)
        return g->x0;
    double f = (double)(ts - g->t0) / (double)(g->t1 - g->t0);
    if (f < 0)
        f = 0;
    if (f > 1)
        f = 1;
    return g->x0 + f * g->w;
}

/* ---- the timeline SVG ---------------------------------------------------- */

static double row_y(int lane, int row)
{
    return TL_TOP + lane * TL_LANE_H + 8 + row * 9;
}

/* Appends the geometry of a shape at (x, y) as the start of an element
 * (without its closing): the caller adds attributes and the title. */
static void shape_open(struct rbuf *b, enum shape s, double x, double y)
{
    switch (s) {
    case SH_CIRCLE:
        rbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.6\"", x, y);
        break;
    case SH_SQUARE:
        rbuf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"6.4\" height=\"6.4\"", x - 3.2,
                    y - 3.2);
        break;
    case SH_DIAMOND:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl4.5 4.5-4.5 4.5-4.5-4.5z\"", x, y - 4.5);
        break;
    case SH_TRI:
        rbuf_printf(b, "<path d=\"M%.1f %.1fh9l-4.5-8z\"", x - 4.5, y + 4);
        break;
    case SH_CROSS:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl8 8m0-8l-8 8\"", x - 4, y - 4);
        break;
    case SH_TICK:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv9\"", x, y - 4.5);
        break;
    case SH_BAR:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv12m5-12v12\"", x - 2.5, y - 6);
        break;
    case SH_PLAY:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv12l9-6z\"", x - 3, y - 6);
        break;
    case SH_STAR:
        rbuf_printf(b, "<path d=\"M%.1f %.1fl2.4 5.6 5.6 2.4-5.6 2.4-2.4 5.6-2.4-5.6-5.6-2.4 "
                       "5.6-2.4z\"", x, y - 8);
        break;
    case SH_DOT:
        rbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"", x, y);
        break;
    case SH_KILL:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv%dM%.1f %.1fl10 10m0-10l-10 10\"", x,
                    y - TL_LANE_H / 2.0 + 1, TL_LANE_H - 2, x - 5, y - 5);
        break;
    case SH_START:
        rbuf_printf(b, "<path d=\"M%.1f %.1fv14\"", x, y - 7);
        break;
    }
}

static void legend_icon(struct rbuf *b, int k)
{
    rbuf_puts(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"16\" height=\"18\" "
                 "viewBox=\"0 0 16 18\" aria-hidden=\"true\">");
    enum shape s = kinds[k].shape;
    /* the kill marker spans a lane: shrink it for the legend */
    if (s == SH_KILL)
        s = SH_CROSS;
    shape_open(b, s, 8, 9);
    rbuf_printf(b, " class=\"mk k-%s\"/></svg>", kinds[k].cls);
}

static void msg_attr(struct rbuf *b, const struct rtl *t, const struct rev *e, int scen,
                     int *is_witness)
{
    *is_witness = 0;
    if (e->nmsgs == 0)
        return;
    rbuf_puts(b, " data-m=\"");
    for (int i = 0; i < e->nmsgs; i++) {
        rbuf_printf(b, "%s%d-%d", i ? " " : "", scen, e->msgs[i]);
        if (t->witness[e->msgs[i]])
            *is_witness = 1;
    }
    rbuf_puts(b, "\"");
}

static void title_of(struct rbuf *b, const struct rtl *t, const struct rev *e,
                     int64_t origin)
{
    rbuf_printf(b, "<title>+%.3f s ", (double)(e->ts - origin) / 1e6);
    rbuf_esc(b, t->lanes[e->lane].name, 80);
    rbuf_printf(b, " (pid %ld) ", e->pid);
    rbuf_esc(b, e->text, 0);
    if (e->target >= 0) {
        rbuf_puts(b, "\n-> ");
        rbuf_esc(b, t->lanes[e->target].name, 80);
    }
    /* ids the fields above do not already show in full (a long claim's
     * "ids" list is cut at six) */
    int listed = 0;
    for (int i = 0; i < e->nmsgs; i++) {
        const char *id = t->ids[e->msgs[i]];
        if (e->text != NULL && strstr(e->text, id) != NULL)
            continue;
        rbuf_puts(b, listed++ ? ", " : "\nmessages: ");
        rbuf_esc(b, id, 80);
    }
    rbuf_puts(b, "</title>");
}

/* Where an event is drawn: runner actions on the lane they aim at. */
static int draw_lane(const struct rev *e)
{
    return e->target >= 0 ? e->target : e->lane;
}

static int is_individual(const struct rtl *t, const struct rev *e, int folding)
{
    if (!folding || !kinds[e->kind].routine)
        return 1;
    for (int i = 0; i < e->nmsgs; i++)
        if (t->witness[e->msgs[i]])
            return 1;
    return 0;
}

/* Vertical grid lines and labels (time since the origin) over [t0, t1]. */
static void draw_axis(struct rbuf *b, const struct geo *g, int height)
{
    double from_ms = (double)(g->t0 - g->origin) / 1000.0;
    double to_ms = (double)(g->t1 - g->origin) / 1000.0;
    double step = report_nice_step(to_ms - from_ms, 10);
    rbuf_puts(b, "<g class=\"axis\">");
    int n = 0;
    for (double ms = ceil(from_ms / step - 1e-9) * step; ms <= to_ms + step * 1e-9 && n < 40;
         ms += step, n++) {
        double x = report_xpos(g, g->origin + (int64_t)llround(ms * 1000));
        char lab[48];
        report_fmt_offset(lab, sizeof(lab), ms, step);
        rbuf_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                       "<text x=\"%.1f\" y=\"%d\">%s</text>",
                    x, TL_TOP - 4, x, height - 4, x, TL_TOP - 8, lab);
    }
    rbuf_puts(b, "</g>");
}

/* rtl_svg draws in layers, back to front, one helper each: lanes, axis,
 * shaded windows, density bars, witness lines, markers; then the legend and
 * notes below the drawing.  What the legend and notes need to know about
 * the drawing is gathered here as it is drawn. */
struct tl_drawn {
    size_t early;            /* events before the view, not drawn */
    size_t folded;           /* routine events drawn as density */
    size_t over_cap;         /* events past the marker cap */
    int lines;               /* witness lines drawn */
    int present[K_COUNT];    /* kinds drawn as markers */
};

/* The figure and svg elements, the hatch pattern for down windows (its id
 * made unique in the page by scen) and one labelled band per lane. */
static void draw_lanes(struct rbuf *b, const struct rtl *t, int scen, int height)
{
    rbuf_printf(b, "<figure class=\"timeline\"><svg xmlns=\"http://www.w3.org/2000/svg\" "
                   "class=\"timeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                   "role=\"img\" aria-label=\"timeline: one lane per process\">",
                TL_WIDTH, height, TL_WIDTH, height);
    rbuf_printf(b, "<defs><pattern id=\"hatch-%d\" width=\"6\" height=\"6\" "
                   "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
                   "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"hatchline\"/>"
                   "</pattern></defs>", scen);
    for (int l = 0; l < t->nlanes; l++) {
        int y = TL_TOP + l * TL_LANE_H;
        rbuf_printf(b, "<rect class=\"lane%s\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\"/>"
                       "<text class=\"lanelabel\" x=\"6\" y=\"%d\">",
                    l % 2 ? " odd" : "", y, TL_WIDTH, TL_LANE_H, y + TL_LANE_H / 2 + 4);
        rbuf_esc(b, t->lanes[l].name, TL_LABEL_MAX);
        rbuf_puts(b, "</text>");
    }
}

/* Shaded windows: a faint band over every lane for faults (so the charts
 * below and the other lanes show when a fault was active), and the
 * stronger shade on the lane of the process concerned. */
static void draw_windows(struct rbuf *b, const struct rtl *t, const struct geo *g, int scen)
{
    for (size_t i = 0; i < t->nwin; i++) {
        const struct rwin *w = &t->win[i];
        if (w->to < g->t0)
            continue;
        double x = report_xpos(g, w->from), x2 = report_xpos(g, w->to);
        double wd = x2 - x < 2 ? 2 : x2 - x;
        if (w->type == W_FAULT)
            rbuf_printf(b, "<rect class=\"faultband\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                           "height=\"%d\"/>", x, TL_TOP, wd, t->nlanes * TL_LANE_H);
        rbuf_printf(b, "<rect class=\"win-%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                       "height=\"%d\"", rtl_win_names[w->type], x,
                    TL_TOP + w->lane * TL_LANE_H + 1, wd, TL_LANE_H - 2);
        if (w->type == W_DOWN)
            rbuf_printf(b, " fill=\"url(#hatch-%d)\"", scen);
        rbuf_puts(b, "><title>");
        rbuf_esc(b, w->label, 200);
        rbuf_puts(b, " in ");
        rbuf_esc(b, t->lanes[w->lane].name, 80);
        rbuf_printf(b, ": +%.3f s to +%.3f s (%.1f ms)</title></rect>",
                    (double)(w->from - g->origin) / 1e6, (double)(w->to - g->origin) / 1e6,
                    (double)(w->to - w->from) / 1000.0);
    }
}

/* Density bars for folded routine events: one path per lane (a bar per
 * bucket, integer coordinates) with one hover text giving the lane's
 * folded counts by kind; a rect and title per bar would cost ten times
 * the bytes.  Returns the number of events folded (0 when out of memory:
 * nothing is drawn then). */
static size_t draw_density(struct rbuf *b, const struct rtl *t, const struct geo *g)
{
    size_t folded = 0;
    int nb = (int)(g->w / TL_BUCKET_PX) + 1;
    size_t cells = (size_t)t->nlanes * (size_t)nb;
    unsigned *cnt = calloc(cells, sizeof(unsigned));
    size_t *kc = calloc((size_t)t->nlanes * K_COUNT, sizeof(size_t));
    if (cnt == NULL || kc == NULL)
        goto out;
    unsigned max = 1;
    for (size_t i = 0; i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (e->ts < g->t0 || is_individual(t, e, 1))
            continue;
        int bk = (int)((report_xpos(g, e->ts) - g->x0) / TL_BUCKET_PX);
        size_t c = (size_t)draw_lane(e) * (size_t)nb + (size_t)bk;
        cnt[c]++;
        kc[(size_t)draw_lane(e) * K_COUNT + (size_t)e->kind]++;
        if (cnt[c] > max)
            max = cnt[c];
        folded++;
    }
    rbuf_puts(b, "<g class=\"density\">");
    for (int l = 0; l < t->nlanes; l++) {
        int any = 0;
        for (int bk = 0; bk < nb; bk++) {
            unsigned n = cnt[(size_t)l * (size_t)nb + (size_t)bk];
            if (n == 0)
                continue;
            int h = (int)lround(3 + (TL_LANE_H - 8) * log1p(n) / log1p(max));
            if (!any)
                rbuf_puts(b, "<path d=\"");
            any = 1;
            rbuf_printf(b, "M%d %dv%dh%dv%dz",
                        (int)lround(g->x0) + bk * TL_BUCKET_PX,
                        TL_TOP + (l + 1) * TL_LANE_H - 2, -h, TL_BUCKET_PX - 1, h);
        }
        if (!any)
            continue;
        rbuf_puts(b, "\"><title>");
        rbuf_esc(b, t->lanes[l].name, 80);
        rbuf_puts(b, ": routine events drawn as density (bar height grows with the "
                     "log of the count):");
        for (int k = 0; k < K_COUNT; k++) {
            size_t nk = kc[(size_t)l * K_COUNT + (size_t)k];
            if (nk > 0)
                rbuf_printf(b, " %s %zu", kinds[k].cls, nk);
        }
        rbuf_puts(b, "</title></path>");
    }
    rbuf_puts(b, "</g>");
out:
    free(cnt);
    free(kc);
    return folded;
}

/* Witness messages: one dashed line through all their markers, at most
 * MAX_WITNESS_LINES.  Returns the number of lines drawn. */
static int draw_witness_lines(struct rbuf *b, const struct rtl *t, const struct geo *g,
                              int scen)
{
    int lines = 0;
    for (size_t m = 0; m < t->nids && lines < MAX_WITNESS_LINES; m++) {
        if (!t->witness[m])
            continue;
        int pts = 0;
        for (size_t i = 0; i < t->n; i++) {
            const struct rev *e = &t->ev[i];
            if (e->ts < g->t0)
                continue;
            for (int k = 0; k < e->nmsgs; k++) {
                if (e->msgs[k] != (int)m)
                    continue;
                if (pts == 0)
                    rbuf_printf(b, "<polyline class=\"wline\" data-m=\"%d-%zu\" points=\"",
                                scen, m);
                rbuf_printf(b, "%s%.1f,%.1f", pts ? " " : "", report_xpos(g, e->ts),
                            row_y(draw_lane(e), kinds[e->kind].row));
                pts++;
            }
        }
        if (pts > 0) {
            rbuf_puts(b, "\"><title>witness message ");
            rbuf_esc(b, t->ids[m], 100);
            rbuf_puts(b, "</title></polyline>");
            lines++;
        }
    }
    return lines;
}

/* One event's marker: its shape, class, data-m and hover title. */
static void draw_marker(struct rbuf *b, const struct rtl *t, const struct rev *e,
                        const struct geo *g, int scen)
{
    int lane = draw_lane(e);
    shape_open(b, kinds[e->kind].shape, report_xpos(g, e->ts),
               row_y(lane, kinds[e->kind].row));
    int wit;
    /* data-m before class so that the witness flag is known */
    struct rbuf tmp;
    rbuf_init(&tmp, 4096);
    msg_attr(&tmp, t, e, scen, &wit);
    rbuf_printf(b, " class=\"mk k-%s%s\"", kinds[e->kind].cls, wit ? " w" : "");
    if (tmp.len > 0)
        rbuf_put(b, tmp.data, tmp.len);
    rbuf_free(&tmp);
    rbuf_puts(b, ">");
    title_of(b, t, e, g->origin);
    switch (kinds[e->kind].shape) {
    case SH_CIRCLE: case SH_DOT: rbuf_puts(b, "</circle>"); break;
    case SH_SQUARE: rbuf_puts(b, "</rect>"); break;
    default: rbuf_puts(b, "</path>"); break;
    }
}

/* Markers for the events in view that are not folded, up to cap of them;
 * the rest are counted in d->over_cap. */
static void draw_markers(struct rbuf *b, const struct rtl *t, const struct geo *g, int scen,
                         int folding, size_t cap, struct tl_drawn *d)
{
    size_t individual = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (e->ts < g->t0 || !is_individual(t, e, folding))
            continue;
        if (individual >= cap) {
            d->over_cap++;
            continue;
        }
        individual++;
        d->present[e->kind] = 1;
        draw_marker(b, t, e, g, scen);
    }
}

/* The caption: a legend of only the kinds present plus the shadings, and a
 * note for everything that was drawn otherwise or not at all. */
static void draw_caption(struct rbuf *b, const struct rtl *t, const struct geo *g,
                         size_t cap, const struct tl_drawn *d)
{
    rbuf_puts(b, "<figcaption><ul class=\"legend\">");
    for (int k = 0; k < K_COUNT; k++) {
        if (!d->present[k])
            continue;
        rbuf_puts(b, "<li>");
        legend_icon(b, k);
        rbuf_puts(b, kinds[k].label);
        rbuf_puts(b, "</li>");
    }
    if (rtl_windows(t, "fault"))
        rbuf_puts(b, "<li><span class=\"sw sw-fault\"></span>fault window</li>");
    if (rtl_windows(t, "down"))
        rbuf_puts(b, "<li><span class=\"sw sw-down\"></span>process down</li>");
    if (rtl_windows(t, "paused"))
        rbuf_puts(b, "<li><span class=\"sw sw-paused\"></span>process paused</li>");
    if (rtl_windows(t, "net"))
        rbuf_puts(b, "<li><span class=\"sw sw-net\"></span>network fault on a link</li>");
    if (rtl_windows(t, "db"))
        rbuf_puts(b, "<li><span class=\"sw sw-db\"></span>database outage (crash, freeze, "
                     "held commits, failover)</li>");
    if (rtl_windows(t, "broker"))
        rbuf_puts(b, "<li><span class=\"sw sw-broker\"></span>broker fault (crash, outage, "
                     "duplicates, delays, dropped confirms...)</li>");
    if (rtl_windows(t, "clock"))
        rbuf_puts(b, "<li><span class=\"sw sw-clock\"></span>process clock shifted</li>");
    if (d->lines > 0)
        rbuf_puts(b, "<li><span class=\"sw sw-witness\"></span>message named in a failure "
                     "witness</li>");
    if (d->folded > 0)
        rbuf_puts(b, "<li><span class=\"sw sw-density\"></span>routine events (density)"
                     "</li>");
    rbuf_puts(b, "</ul>");
    if (d->folded > 0)
        rbuf_printf(b, "<p class=\"note\">%zu events: %zu routine events are drawn as "
                       "density bars (hover a lane's bars for its counts); faults, kills, retries, "
                       "duplicates and witness messages are drawn one by one.</p>",
                    t->n - d->early, d->folded);
    if (d->early > 0)
        rbuf_printf(b, "<p class=\"note\">The time axis starts at +%.2f s, just before the "
                       "first step; the %zu events of process start-up before it are not "
                       "drawn.</p>", (double)(g->t0 - g->origin) / 1e6, d->early);
    if (d->over_cap > 0)
        rbuf_printf(b, "<p class=\"note\">%zu more events are not drawn (cap of %zu "
                       "markers).</p>", d->over_cap, cap);
    if (t->bad_lines > 0 || t->dropped > 0)
        rbuf_printf(b, "<p class=\"note\">%zu malformed lines skipped, %zu lines past the "
                       "read limit ignored.</p>", t->bad_lines, t->dropped);
    rbuf_puts(b, "</figcaption></figure>");
}

int rtl_svg(struct rbuf *b, const struct rtl *t, int scen, const struct rview *v,
            size_t cap)
{
    if (t == NULL || t->n == 0) {
        rbuf_puts(b, "<p class=\"note\">No timeline events were recorded for this "
                     "scenario.</p>");
        return b->overflow ? -1 : 0;
    }
    struct geo g = {v->t0, v->t1, TL_LEFT, TL_WIDTH - TL_LEFT - TL_RIGHT, v->origin};
    int height = TL_TOP + t->nlanes * TL_LANE_H + 6;
    struct tl_drawn d;
    memset(&d, 0, sizeof(d));
    while (d.early < t->n && t->ev[d.early].ts < g.t0)
        d.early++;
    int folding = t->n - d.early > cap;

    draw_lanes(b, t, scen, height);
    draw_axis(b, &g, height);
    draw_windows(b, t, &g, scen);
    if (folding)
        d.folded = draw_density(b, t, &g);
    d.lines = draw_witness_lines(b, t, &g, scen);
    draw_markers(b, t, &g, scen, folding, cap, &d);
    rbuf_puts(b, "</svg>");
    draw_caption(b, t, &g, cap, &d);
    return b->overflow ? -1 : 0;
}
