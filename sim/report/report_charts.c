/* report_charts.c -- a scenario's metrics: its metrics.jsonl read into
 * samples, and the small-multiple SVG charts drawn from them on the
 * timeline's time axis with its windows shaded (contracts in
 * report_timeline.h).  rtl_view, the part of the run both the timeline and
 * the charts show, is here because it is the one call that reads both the
 * events and the samples.
 *
 * As on the timeline, outside text (a consumer's name) reaches the page
 * through rbuf_esc and numbers are formatted by us. */
#include "report_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Formats a y-axis label: whole numbers without decimals, others with two
 * below 10 and one up to 10,000. */
static void fmt_value(char *out, size_t len, double v)
{
    if (fabs(v) >= 10000)
        snprintf(out, len, "%.0f", v);
    else if (v == floor(v))
        snprintf(out, len, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(out, len, "%.1f", v);
    else
        snprintf(out, len, "%.2f", v);
}

/* ---- metric samples ------------------------------------------------------ */

enum mfield { M_PENDING, M_OLDEST, M_ATTEMPTS, M_DEAD, M_DUPS, M_PUBLISHED, M_PUB50,
              M_PUB99, M_PROC50, M_PROC99, M_NFIELDS };
static const char *const mfield_keys[M_NFIELDS] = {
    "pending", "oldest_pending_age_ms", "attempts_total", "dead_letters",
    "duplicates_ignored", "published", "publish_latency_p50_ms", "publish_latency_p99_ms",
    "processing_latency_p50_ms", "processing_latency_p99_ms"};

#define MAX_CONSUMERS 6

struct rsample {
    int64_t ts;
    double v[M_NFIELDS];
    double consumed[MAX_CONSUMERS];
};

struct rmetrics {
    struct rsample *s;
    size_t n, cap;
    size_t bad_lines, dropped;
    char *consumers[MAX_CONSUMERS];
    int nconsumers;
};

static int consumer_slot(struct rmetrics *m, const char *name)
{
    for (int i = 0; i < m->nconsumers; i++)
        if (strcmp(m->consumers[i], name) == 0)
            return i;
    if (m->nconsumers == MAX_CONSUMERS)
        return -1;
    m->consumers[m->nconsumers] = report_strdup(name);
    if (m->consumers[m->nconsumers] == NULL)
        return -1;
    return m->nconsumers++;
}

static int add_sample(struct rmetrics *m, const cJSON *o)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "ts_us");
    if (!cJSON_IsNumber(ts) || ts->valuedouble <= 0)
        return -1;
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        struct rsample *ns = realloc(m->s, nc * sizeof(*ns));
        if (ns == NULL)
            return -1;
        m->s = ns;
        m->cap = nc;
    }
    struct rsample *s = &m->s[m->n];
    s->ts = (int64_t)ts->valuedouble;
    for (int i = 0; i < M_NFIELDS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, mfield_keys[i]);
        s->v[i] = cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : NAN;
    }
    for (int i = 0; i < MAX_CONSUMERS; i++)
        s->consumed[i] = NAN;
    const cJSON *cons = cJSON_GetObjectItemCaseSensitive(o, "consumed");
    const cJSON *c;
    if (cJSON_IsObject(cons)) {
        cJSON_ArrayForEach(c, cons) {
            if (c->string == NULL || !cJSON_IsNumber(c) || !isfinite(c->valuedouble))
                continue;
            int slot = consumer_slot(m, c->string);
            if (slot >= 0)
                s->consumed[slot] = c->valuedouble;
        }
    } else if (cJSON_IsNumber(cons) && isfinite(cons->valuedouble)) {
        int slot = consumer_slot(m, "consumed");
        if (slot >= 0)
            s->consumed[slot] = cons->valuedouble;
    }
    m->n++;
    return 0;
}

static int add_sample_cb(void *ctx, const cJSON *o) { return add_sample(ctx, o); }

static int cmp_sample(const void *a, const void *b)
{
    const struct rsample *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

struct rmetrics *rmetrics_load(const char *path, size_t max_samples, char *err,
                               size_t errlen)
{
    struct rmetrics *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct jsonl_sink sink = { add_sample_cb, m, &m->n, max_samples, &m->dropped,
                               &m->bad_lines };
    if (report_read_jsonl(path, &sink, err, errlen) < 0) {
        rmetrics_free(m);
        return NULL;
    }
    qsort(m->s, m->n, sizeof(*m->s), cmp_sample);
    return m;
}

void rmetrics_free(struct rmetrics *m)
{
    if (m == NULL)
        return;
    free(m->s);
    for (int i = 0; i < m->nconsumers; i++)
        free(m->consumers[i]);
    free(m);
}

size_t rmetrics_count(const struct rmetrics *m) { return m ? m->n : 0; }

/* ---- the view the timeline and the charts share ------------------------- */

int rtl_view(const struct rtl *t, const struct rmetrics *m, struct rview *v)
{
    int64_t a = INT64_MAX, z = INT64_MIN;
    if (t != NULL && t->n > 0) {
        a = t->ev[0].ts;
        z = t->ev[t->n - 1].ts;
    }
    if (m != NULL && m->n > 0) {
        if (m->s[0].ts < a)
            a = m->s[0].ts;
        if (m->s[m->n - 1].ts > z)
            z = m->s[m->n - 1].ts;
    }
    if (a > z) {
        v->origin = v->t0 = v->t1 = 0;
        return 0;
    }
    v->origin = v->t0 = a;
    v->t1 = z > a ? z : a + 1000;
    /* the runner's first step: start-up before it is context, not the story */
    for (size_t i = 0; t != NULL && i < t->n; i++) {
        const struct rev *e = &t->ev[i];
        if (rtl_role_of(t->lanes[e->lane].name) != R_RUNNER || e->text == NULL ||
            strncmp(e->text, "step", 4) != 0 || (e->text[4] != '\0' && e->text[4] != '\n'))
            continue;
        if (e->ts - a > (v->t1 - a) / 5) {
            int64_t margin = (v->t1 - e->ts) / 30;
            v->t0 = e->ts - margin > a ? e->ts - margin : a;
        }
        break;
    }
    return 1;
}

/* ---- the charts ---------------------------------------------------------- */

/* Geometry of one small chart. */
#define CH_W 372
#define CH_H 150
#define CH_L 46
#define CH_R 10
#define CH_T 30
#define CH_B 22

struct series {
    const char *label;
    int field;     /* M_* or -1 for a consumer column */
    int consumer;  /* index when field < 0 */
    int dashed;    /* p99 lines are dashed: readable without colour */
};

static double sample_value(const struct rsample *s, const struct series *se)
{
    return se->field >= 0 ? s->v[se->field] : s->consumed[se->consumer];
}

/* chart draws one small chart through the helpers below: scale, shaded
 * windows, axes, one line per series, and the key. */

/* The samples in view and the y scale that fits them. */
struct chart_scale {
    size_t first, last;   /* the samples in view: [first, last) */
    size_t have;          /* values (not null) among them */
    double step, ymax;    /* y grid step and the top of the y axis */
    double ph;            /* plot height */
};

static void chart_fit(const struct rmetrics *m, const struct rview *v,
                      const struct series *se, int nse, struct chart_scale *cs)
{
    size_t first = 0, last = m->n;
    while (first < last && m->s[first].ts < v->t0)
        first++;
    while (last > first && m->s[last - 1].ts > v->t1)
        last--;
    double max = 0;
    size_t have = 0;
    int integral = 1;
    for (size_t i = first; i < last; i++)
        for (int k = 0; k < nse; k++) {
            double val = sample_value(&m->s[i], &se[k]);
            if (isnan(val))
                continue;
            have++;
            if (val > max)
                max = val;
            if (val != floor(val))
                integral = 0;
        }
    double step = report_nice_step(max > 0 ? max : 1, 3);
    if (integral && step < 1)
        step = 1; /* counts: no 0.5 rows */
    cs->first = first;
    cs->last = last;
    cs->have = have;
    cs->step = step;
    cs->ymax = ceil((max > 0 ? max : 1) / step) * step;
    cs->ph = CH_H - CH_T - CH_B;
}

/* Fault, down and paused windows, as in the timeline. */
static void chart_windows(struct rbuf *b, const struct rtl *t, const struct rview *v,
                          const struct geo *g, double ph)
{
    for (size_t i = 0; t != NULL && i < t->nwin; i++) {
        if (t->win[i].to < v->t0)
            continue;
        double x = report_xpos(g, t->win[i].from), x2 = report_xpos(g, t->win[i].to);
        rbuf_printf(b, "<rect class=\"cwin-%s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" "
                       "height=\"%.0f\"><title>",
                    rtl_win_names[t->win[i].type], x, CH_T, x2 - x < 1.5 ? 1.5 : x2 - x,
                    ph);
        rbuf_esc(b, t->win[i].label, 200);
        rbuf_puts(b, " in ");
        rbuf_esc(b, t->lanes[t->win[i].lane].name, 80);
        rbuf_puts(b, "</title></rect>");
    }
}

/* The y grid with its labels, and the x labels: time since the scenario's
 * start, as on the timeline. */
static void chart_axes(struct rbuf *b, const struct rview *v, const struct geo *g,
                       const struct chart_scale *cs)
{
    rbuf_puts(b, "<g class=\"axis\">");
    for (double y0 = 0; y0 <= cs->ymax + cs->step * 1e-9; y0 += cs->step) {
        double y = CH_T + cs->ph - y0 / cs->ymax * cs->ph;
        char lab[32];
        fmt_value(lab, sizeof(lab), y0);
        rbuf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
                       "<text class=\"ylab\" x=\"%d\" y=\"%.1f\">%s</text>",
                    CH_L, y, CH_W - CH_R, y, CH_L - 4, y + 3.5, lab);
    }
    double from_ms = (double)(v->t0 - v->origin) / 1000.0;
    double to_ms = (double)(v->t1 - v->origin) / 1000.0;
    double xstep = report_nice_step(to_ms - from_ms, 4);
    int nt = 0;
    for (double ms = ceil(from_ms / xstep - 1e-9) * xstep;
         to_ms > from_ms && ms <= to_ms + xstep * 1e-9 && nt < 12; ms += xstep, nt++) {
        char lab[48];
        report_fmt_offset(lab, sizeof(lab), ms, xstep);
        double x = report_xpos(g, v->origin + (int64_t)llround(ms * 1000));
        rbuf_printf(b, "<text class=\"xlab\" x=\"%.1f\" y=\"%d\">%s</text>", x, CH_H - 6, lab);
    }
    rbuf_puts(b, "</g>");
}

/* Series k as one path; a missing or null sample breaks the line.  About
 * one point per pixel of the plot is all a line can show. */
static void chart_line(struct rbuf *b, const struct rmetrics *m, const struct geo *g,
                       const struct series *se, int k, const struct chart_scale *cs)
{
    size_t stride = cs->last - cs->first > 320 ? (cs->last - cs->first) / 320 + 1 : 1;
    rbuf_printf(b, "<path class=\"s%d%s\" d=\"", k, se[k].dashed ? " dashed" : "");
    int pen = 0;
    size_t npts = 0;
    double lx = 0, ly = 0;
    for (size_t i = cs->first; i < cs->last; i += stride) {
        double val = sample_value(&m->s[i], &se[k]);
        if (isnan(val)) {
            pen = 0;
            continue;
        }
        lx = report_xpos(g, m->s[i].ts);
        ly = CH_T + cs->ph - val / cs->ymax * cs->ph;
        rbuf_printf(b, "%s%.1f %.1f", pen ? "L" : "M", lx, ly);
        pen = 1;
        npts++;
    }
    /* a lone point would be invisible as a path: give it a short stroke */
    if (npts == 1)
        rbuf_printf(b, "M%.1f %.1fh2", lx - 1, ly);
    rbuf_puts(b, "\"><title>");
    rbuf_esc(b, se[k].label, 80);
    rbuf_puts(b, "</title></path>");
}

/* The key in HTML so it wraps; line styles make it readable in grey. */
static void chart_key(struct rbuf *b, const struct series *se, int nse)
{
    rbuf_puts(b, "<div class=\"ckey\">");
    for (int k = 0; k < nse; k++) {
        rbuf_printf(b, "<span><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"22\" "
                       "height=\"8\" aria-hidden=\"true\"><path class=\"s%d%s\" "
                       "d=\"M1 4h20\"/></svg>", k, se[k].dashed ? " dashed" : "");
        rbuf_esc(b, se[k].label, 40);
        rbuf_puts(b, "</span>");
    }
    rbuf_puts(b, "</div>");
}

static void chart(struct rbuf *b, const struct rmetrics *m, const struct rtl *t,
                  const struct rview *v, const char *title, const struct series *se,
                  int nse)
{
    struct chart_scale cs;
    chart_fit(m, v, se, nse, &cs);
    struct geo g = {v->t0, v->t1, CH_L, CH_W - CH_L - CH_R, v->origin};

    rbuf_puts(b, "<figure class=\"chartbox\">");
    rbuf_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"%d\" "
                   "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s\">",
                CH_W, CH_H, CH_W, CH_H, title);
    rbuf_printf(b, "<text class=\"ctitle\" x=\"4\" y=\"14\">%s</text>", title);
    chart_windows(b, t, v, &g, cs.ph);
    chart_axes(b, v, &g, &cs);
    if (cs.have == 0) {
        rbuf_printf(b, "<text class=\"nodata\" x=\"%d\" y=\"%d\">no samples</text>",
                    CH_L + 10, CH_T + (int)cs.ph / 2);
    }
    for (int k = 0; k < nse && cs.have > 0; k++)
        chart_line(b, m, &g, se, k, &cs);
    rbuf_puts(b, "</svg>");
    if (nse > 1)
        chart_key(b, se, nse);
    rbuf_puts(b, "</figure>");
}

int rmetrics_svg(struct rbuf *b, const struct rmetrics *m, const struct rtl *t,
                 const struct rview *v)
{
    if (m == NULL || m->n == 0) {
        rbuf_puts(b, "<p class=\"note\">No metric samples were recorded for this "
                     "scenario.</p>");
        return b->overflow ? -1 : 0;
    }
    rbuf_puts(b, "<div class=\"charts\">");
    struct series one[1] = {{NULL, 0, 0, 0}};
    static const struct { int field; const char *title; } singles[] = {
        {M_PENDING, "pending outbox rows"},
        {M_OLDEST, "oldest pending row age (ms)"},
        {M_ATTEMPTS, "publish attempts (total)"},
        {M_DEAD, "dead letters"},
        {M_DUPS, "inbox duplicates ignored"},
    };
    for (size_t i = 0; i < sizeof(singles) / sizeof(singles[0]); i++) {
        one[0].label = singles[i].title;
        one[0].field = singles[i].field;
        chart(b, m, t, v, singles[i].title, one, 1);
    }
    struct series flow[1 + MAX_CONSUMERS];
    int nflow = 0;
    flow[nflow++] = (struct series){"published", M_PUBLISHED, 0, 0};
    for (int i = 0; i < m->nconsumers; i++)
        flow[nflow++] = (struct series){m->consumers[i], -1, i, 1};
    chart(b, m, t, v, "published / consumed", flow, nflow);
    struct series pub[2] = {{"p50", M_PUB50, 0, 0}, {"p99", M_PUB99, 0, 1}};
    chart(b, m, t, v, "publish latency (ms)", pub, 2);
    struct series proc[2] = {{"p50", M_PROC50, 0, 0}, {"p99", M_PROC99, 0, 1}};
    chart(b, m, t, v, "processing latency (ms)", proc, 2);
    rbuf_puts(b, "</div>");
    if (m->bad_lines > 0 || m->dropped > 0)
        rbuf_printf(b, "<p class=\"note\">%zu malformed metric lines skipped, %zu past the "
                       "read limit ignored.</p>", m->bad_lines, m->dropped);
    return b->overflow ? -1 : 0;
}
