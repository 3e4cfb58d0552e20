/* report.c -- the HTML reliability report: what a team lead opens after CI.
 *
 * report_write turns a run directory into one self-contained file: inline
 * CSS, inline SVG and a few lines of script (hover highlighting only; the
 * page reads the same without it), no external reference of any kind.  The
 * page, top to bottom:
 *
 *   verdict banner   PASS or FAIL in words and colour; on FAIL the failing
 *                    scenarios, broken invariants and first witness, linked
 *   header           commit, date, machine, PostgreSQL and library versions,
 *                    totals
 *   summary table    one row per scenario
 *   scenarios        sentence, faults, counts, invariants with witnesses,
 *                    timeline (report_timeline.c) and metric charts
 *                    (report_charts.c)
 *   mutant matrix    mutants x scenarios, when the run has mutants
 *   simulator        statistics and replay commands, when present
 *
 * Design decisions:
 * - The markup is XHTML-compatible (every element closed, attributes quoted,
 *   only numeric character references) so that a strict XML parser can check
 *   it, and browsers parse it as ordinary HTML.
 * - Outside strings only ever pass through rbuf_esc; ids and anchors are
 *   built from indices, never from names found in the run.
 * - The whole page is built in memory under a size cap and written to a
 *   temporary file renamed into place: no half-written report on failure.
 * - A run directory is outside input: result.json is validated (type of each
 *   field read, scenario dirs relative and without ".."), timelines and
 *   metrics tolerate malformed lines, and what was skipped is said on the page.
 * - The marker budget of a timeline shrinks as the number of scenarios grows,
 *   keeping the full suite's report near a megabyte. */
#include "report.h"
#include "common_fs.h"
#include "common_result.h"
#include "cliutil.h"
#include "report_html.h"
#include "report_timeline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REPORT_MAX_HTML (64u << 20)      /* the page, hard cap */
#define REPORT_MAX_EVENTS 400000         /* per timeline.jsonl */
#define REPORT_MAX_SAMPLES 100000        /* per metrics.jsonl */
#define REPORT_MARKER_BUDGET 7000        /* individual markers, whole page */
#define REPORT_MIN_CAP 250
#define REPORT_MAX_CAP 1500
#define REPORT_FLOOR_CAP 40              /* markers, when shrinking to fit */
#define REPORT_SOFT_SIZE (1800u * 1024)  /* aim: the full suite under 2 MB */

static const char page_css[] =
    ":root{--fail:#c62828;--pass:#2e7d32;--warn:#a15c00;--ink:#1d2330;--muted:#5b6475;"
    "--line:#d9dde5}"
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,"
    "sans-serif;color:var(--ink);margin:0;background:#f4f5f7}"
    "main{max-width:1240px;margin:0 auto;padding:12px 20px 48px}"
    "h1{font-size:22px;margin:10px 0 4px}h2{font-size:18px;margin:26px 0 8px}"
    "h3{font-size:15px;margin:14px 0 6px}"
    "a{color:#0b57d0}code,.mono{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,"
    "monospace;font-size:12.5px}"
    ".banner{padding:12px 18px;border-radius:6px;margin:10px 0 14px;border:3px solid}"
    ".banner .word{font-size:28px;font-weight:800;letter-spacing:.06em;margin-right:12px}"
    ".banner.pass{background:#e8f5e9;border-color:var(--pass);color:#1b5e20}"
    ".banner.fail{background:#ffebee;border-color:var(--fail);color:#7f0000}"
    ".banner ul{margin:6px 0 0;padding-left:22px}.banner li{margin:2px 0}"
    ".warnbox{background:#fff8e1;border:2px solid #f0b400;border-radius:6px;"
    "padding:8px 14px;margin:8px 0}"
    ".meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}"
    ".meta dt{color:var(--muted)}.meta dd{margin:0}"
    ".tiles{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}"
    ".tile{background:#fff;border:1px solid var(--line);border-radius:6px;padding:6px 14px;"
    "min-width:110px}.tile b{display:block;font-size:20px}.tile span{color:var(--muted);"
    "font-size:12px}"
    "table{border-collapse:collapse;background:#fff;margin:6px 0}"
    "th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}"
    "th{background:#eef0f4;font-weight:600}td.num{text-align:right;"
    "font-variant-numeric:tabular-nums}"
    "tr.fail td{background:#fff0f0}tr.warn td{background:#fffaf0}"
    "#summary td:nth-child(2) a{white-space:nowrap}"
    ".badge{display:inline-block;padding:0 8px;border-radius:10px;font-weight:700;"
    "font-size:12px;color:#fff;white-space:nowrap}"
    ".badge.pass{background:var(--pass)}.badge.fail{background:var(--fail)}"
    ".badge.warn{background:var(--warn)}.badge.none{background:#78808f}"
    "section.scenario{background:#fff;border:1px solid var(--line);border-left:8px solid "
    "var(--pass);border-radius:4px;margin:18px 0;padding:8px 16px 12px}"
    "section.scenario.fail{border-left-color:var(--fail)}"
    "section.scenario h2{margin:6px 0}.sentence{margin:4px 0 8px;max-width:900px}"
    ".witness{margin:4px 0;padding-left:20px;color:#7f0000}"
    ".witness li{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:12.5px}"
    ".hazard{border:1px solid var(--warn);background:#fffaf0;padding:6px 10px;margin:6px 0}"
    ".hazard.missed{border-color:var(--fail);background:#ffebee}"
    "table.recovery{margin:6px 0}"
    ".err{background:#ffebee;border:1px solid var(--fail);padding:6px 10px;"
    "white-space:pre-wrap}"
    ".note{color:var(--muted);font-size:12.5px;margin:4px 0}"
    ".cols{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}"
    "figure{margin:8px 0}figure.timeline{overflow-x:auto}"
    "svg text{font-family:system-ui,Helvetica,Arial,sans-serif}"
    "ul.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;"
    "gap:2px 14px;font-size:12px}ul.legend li{display:flex;align-items:center;gap:3px}"
    ".sw{display:inline-block;width:16px;height:11px;border:1px solid #999}"
    ".sw-fault{background:rgba(229,57,53,.35)}.sw-net{background:rgba(251,140,0,.35)}"
    ".sw-db{background:rgba(142,36,170,.3)}.sw-broker{background:rgba(0,137,123,.3)}"
    ".sw-clock{background:rgba(121,85,72,.25)}"
    ".sw-down{background:repeating-linear-gradient(45deg,#9aa0aa 0 2px,#fff 2px 5px)}"
    ".sw-paused{background:rgba(96,125,139,.35)}.sw-density{background:#7986cb}"
    ".sw-witness{border:0;border-top:2px dashed #c62828;height:0;margin-top:4px}"
    ".lane{fill:#fff}.lane.odd{fill:#f3f5f8}"
    ".lanelabel{font-size:11px;fill:#263238;font-family:ui-monospace,monospace}"
    ".axis line{stroke:#e1e4ea;stroke-width:1}"
    ".axis text{font-size:10px;fill:#5b6475;text-anchor:middle}"
    ".axis text.ylab{text-anchor:end}"
    ".faultband{fill:#e53935;opacity:.07}.win-fault{fill:#e53935;opacity:.3}"
    ".win-paused{fill:#607d8b;opacity:.3}.win-net{fill:#fb8c00;opacity:.35}"
    ".win-db{fill:#8e24aa;opacity:.3}.win-broker{fill:#00897b;opacity:.3}"
    ".win-clock{fill:#795548;opacity:.2}.hatchline{stroke:#9aa0aa;stroke-width:2.5}"
    ".density path{fill:#7986cb;opacity:.6}"
    ".mk{stroke-width:1}"
    ".k-start{stroke:#37474f;stroke-width:3;fill:none}"
    ".k-request{stroke:#90a4ae;stroke-width:2;fill:none}"
    ".k-commit{fill:#2e7d32}.k-apiodd{fill:#ef6c00}"
    ".k-claim{fill:#1565c0}.k-publish{fill:#1e88e5}"
    ".k-puberr{fill:#fff;stroke:#c62828;stroke-width:2}"
    ".k-mark{stroke:#0d47a1;stroke-width:2;fill:none}.k-retry{fill:#ef6c00}"
    ".k-dead{stroke:#000;stroke-width:2.5;fill:none}"
    ".k-leaselost{stroke:#ef6c00;stroke-width:2.5;fill:none}"
    ".k-bpublish{fill:#8e24aa}.k-deliver{fill:#6a1b9a}"
    ".k-redeliver{fill:#fff;stroke:#6a1b9a;stroke-width:1.8}"
    ".k-apply{fill:#43a047}.k-dup{fill:#fff;stroke:#00897b;stroke-width:2}"
    ".k-anomaly{fill:#ffb300;stroke:#e65100}"
    ".k-ack{stroke:#2e7d32;stroke-width:2;fill:none}"
    ".k-nack{stroke:#c62828;stroke-width:2;fill:none}"
    ".k-fault{fill:#d50000;stroke:#fff}.k-faultend{fill:#d50000}"
    ".k-kill{stroke:#d50000;stroke-width:2.5;fill:none}"
    ".k-stop{fill:#fff;stroke:#455a64;stroke-width:1.5}"
    ".k-exit{stroke:#37474f;stroke-width:2;fill:none}"
    ".k-arm{fill:#fff;stroke:#d50000;stroke-width:1.5}"
    ".k-pause{stroke:#455a64;stroke-width:3;fill:none}.k-resume{fill:#546e7a}"
    ".k-restart{fill:#2e7d32}.k-reconnect{fill:#fff;stroke:#607d8b}"
    ".k-runner{fill:#455a64}.k-other{fill:#9e9e9e}"
    ".mk.w{stroke:#c62828;stroke-width:2.5}"
    ".wline{fill:none;stroke:#c62828;stroke-width:1.5;stroke-dasharray:5 3;opacity:.85}"
    ".mk.hl{stroke:#000;stroke-width:3}.wline.hl{stroke:#000;opacity:1}"
    ".charts{display:flex;flex-wrap:wrap;gap:6px 14px}"
    ".chartbox{margin:0;background:#fff}"
    ".chart path{fill:none;stroke-width:1.7}.chart .ctitle{font-size:12px;font-weight:600;"
    "fill:#263238}.chart .xlab{font-size:10px;text-anchor:middle}"
    ".chart .nodata{font-size:12px;fill:#8a93a3}"
    ".s0{stroke:#1565c0}.s1{stroke:#c62828}.s2{stroke:#2e7d32}.s3{stroke:#8e24aa}"
    ".s4{stroke:#ef6c00}.s5{stroke:#00838f}.s6{stroke:#5d4037}"
    ".dashed{stroke-dasharray:5 3}"
    ".cwin-fault{fill:#e53935;opacity:.16}.cwin-down{fill:#9aa0aa;opacity:.22}"
    ".cwin-paused{fill:#607d8b;opacity:.18}.cwin-net{fill:#fb8c00;opacity:.16}"
    ".cwin-db{fill:#8e24aa;opacity:.14}.cwin-broker{fill:#00897b;opacity:.14}"
    ".cwin-clock{fill:#795548;opacity:.08}"
    ".ckey{font-size:11.5px;display:flex;gap:10px;padding-left:46px}"
    ".ckey span{display:flex;align-items:center;gap:3px}"
    ".bar{display:inline-block;height:10px;background:#7986cb;vertical-align:middle}"
    "td.caught{background:#e8f5e9}td.survived{background:#ffebee;font-weight:700}"
    "td.net{color:var(--muted)}"
    ".asserts{font-family:system-ui,sans-serif;font-size:12px;color:var(--muted);max-width:34em}"
    "footer{color:var(--muted);font-size:12px;margin-top:30px}";

/* Hover a marker: every marker of the same message(s), on every lane, gets
 * the class hl.  No '<' or '&' in it, so the page stays valid XML. */
static const char page_js[] =
    "(function(){var cur=null;"
    "function mark(v,on){if(!v)return;var ids=v.split(' ');"
    "for(var i=0;i!=ids.length;i++){var l=document.querySelectorAll('[data-m~=\"'+ids[i]+'\"]');"
    "for(var j=0;j!=l.length;j++)l[j].classList.toggle('hl',on);}}"
    "document.addEventListener('mouseover',function(ev){"
    "var t=ev.target.closest?ev.target.closest('[data-m]'):null;"
    "var v=t?t.getAttribute('data-m'):null;if(v===cur)return;"
    "mark(cur,false);cur=v;mark(cur,true);});})();";

/* ---- JSON access, validated ---------------------------------------------- */

static const cJSON *jget(const cJSON *o, const char *key)
{
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = jget(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* 1 and *out when o[key] is a finite number. */
static int jnum(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = jget(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return 0;
    *out = v->valuedouble;
    return 1;
}

static int jpass(const cJSON *o)
{
    const char *v = jstr(o, "verdict");
    return v != NULL && strcmp(v, "pass") == 0;
}

/* An invariant that held, or a hazard's that caught the hazard's loss and
 * nothing else: neither is a break of the pipeline. */
static int jinv_ok(const cJSON *inv)
{
    const char *v = jstr(inv, "verdict");
    return jpass(inv) || (v != NULL && strcmp(v, "hazard caught") == 0);
}

/* ---- formatting ------------------------------------------------------------ */

/* Appends a number from o[key], or an en dash when absent. */
static void put_num(struct rbuf *b, const cJSON *o, const char *key)
{
    double d;
    if (!jnum(o, key, &d))
        rbuf_puts(b, "\xE2\x80\x93");
    else if (d == floor(d) && fabs(d) < 9e15)
        rbuf_printf(b, "%lld", (long long)d);
    else
        rbuf_printf(b, "%.2f", d);
}

static void put_duration(struct rbuf *b, const cJSON *o, const char *key)
{
    double ms;
    if (!jnum(o, key, &ms) || ms < 0)
        rbuf_puts(b, "\xE2\x80\x93");
    else if (ms < 1000)
        rbuf_printf(b, "%.0f ms", ms);
    else if (ms < 120000)
        rbuf_printf(b, "%.2f s", ms / 1000);
    else
        rbuf_printf(b, "%.0f min %.0f s", floor(ms / 60000), fmod(ms, 60000) / 1000);
}

static void put_badge(struct rbuf *b, const char *verdict)
{
    if (verdict != NULL && strcmp(verdict, "pass") == 0)
        rbuf_puts(b, "<span class=\"badge pass\">\xE2\x9C\x93 PASS</span>");
    else if (verdict != NULL && strcmp(verdict, "fail") == 0)
        rbuf_puts(b, "<span class=\"badge fail\">\xE2\x9C\x97 FAIL</span>");
    else {
        rbuf_puts(b, "<span class=\"badge none\">");
        rbuf_esc(b, verdict ? verdict : "no verdict", 24);
        rbuf_puts(b, "</span>");
    }
}

/* A scenario's display name: its name, else "scenario N". */
static void put_scen_name(struct rbuf *b, const cJSON *sc, int i)
{
    const char *name = jstr(sc, "name");
    if (name != NULL && name[0] != '\0')
        rbuf_esc(b, name, 120);
    else
        rbuf_printf(b, "scenario %d", i + 1);
}

/* ---- page parts ------------------------------------------------------------ */

struct page {
    struct rbuf b;
    const char *dir;
    const cJSON *res;
    const cJSON *scenarios; /* array (possibly empty) */
    int nscen;
    int npass;
    int pass;               /* the page's verdict */
    size_t cap;             /* individual markers per timeline */
};

static int scen_failed(const cJSON *sc)
{
    const cJSON *err = jget(sc, "error");
    return !jpass(sc) || (cJSON_IsString(err) && err->valuestring[0] != '\0');
}

static void put_banner(struct page *p)
{
    struct rbuf *b = &p->b;
    const cJSON *tot = jget(p->res, "totals");
    if (p->pass) {
        rbuf_puts(b, "<div id=\"verdict\" class=\"banner pass\" role=\"status\">"
                     "<span class=\"word\">PASS</span>");
        rbuf_printf(b, "all %d scenarios passed; ", p->nscen);
        put_num(b, tot, "invariants_checked");
        rbuf_puts(b, " invariant checks, no violation.</div>");
        return;
    }
    rbuf_puts(b, "<div id=\"verdict\" class=\"banner fail\" role=\"alert\">"
                 "<span class=\"word\">FAIL</span>");
    int nfail = p->nscen - p->npass;
    if (nfail > 0)
        rbuf_printf(b, "%d of %d scenarios failed.", nfail, p->nscen);
    else
        rbuf_puts(b, "the run reported a failure.");
    rbuf_puts(b, "<ul>");
    int i = 0, shown = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, p->scenarios) {
        if (scen_failed(sc) && shown < 20) {
            shown++;
            rbuf_printf(b, "<li><a href=\"#s%d\">", i);
            put_scen_name(b, sc, i);
            rbuf_puts(b, "</a>: ");
            const char *err = jstr(sc, "error");
            int broken = 0;
            const cJSON *inv;
            cJSON_ArrayForEach(inv, jget(sc, "invariants")) {
                if (jinv_ok(inv))
                    continue;
                rbuf_puts(b, broken ? ", " : "broken ");
                rbuf_esc(b, jstr(inv, "name") ? jstr(inv, "name") : "?", 80);
                broken++;
            }
            int unmet = 0;
            const cJSON *ex;
            cJSON_ArrayForEach(ex, jget(sc, "expect")) {
                if (jpass(ex) || unmet >= 4)
                    continue;
                rbuf_puts(b, unmet    ? ", "
                             : broken ? "; unmet expectations "
                                      : "unmet expectations ");
                rbuf_esc(b, jstr(ex, "check") ? jstr(ex, "check") : "?", 80);
                unmet++;
            }
            if (broken == 0 && unmet == 0 && err == NULL)
                rbuf_puts(b, "the scenario did not pass");
            if (err != NULL && err[0] != '\0') {
                rbuf_puts(b, broken ? "; error: " : "error: ");
                rbuf_esc(b, err, 300);
            }
            /* the first witness, so the cause is readable in the banner */
            cJSON_ArrayForEach(inv, jget(sc, "invariants")) {
                const cJSON *w = cJSON_GetArrayItem(jget(inv, "witnesses"), 0);
                if (!jinv_ok(inv) && cJSON_IsString(w)) {
                    rbuf_puts(b, " \xE2\x80\x94 <span class=\"mono\">");
                    rbuf_esc(b, w->valuestring, 300);
                    rbuf_puts(b, "</span>");
                    break;
                }
            }
            rbuf_puts(b, "</li>");
        }
        i++;
    }
    if (nfail > shown)
        rbuf_printf(b, "<li>and %d more (see the summary)</li>", nfail - shown);
    const char *rv = jstr(p->res, "verdict");
    if (nfail == 0 || (rv != NULL && strcmp(rv, "fail") != 0))
        rbuf_puts(b, "<li>the run's own verdict and its scenarios disagree; the report "
                     "shows FAIL</li>");
    rbuf_puts(b, "</ul></div>");
}

static void put_mutant_note(struct page *p)
{
    const char *mutant = jstr(p->res, "mutant");
    if (mutant == NULL || mutant[0] == '\0')
        return;
    rbuf_puts(&p->b, "<div class=\"warnbox\">This run used a <b>mutant build</b> (<code>");
    rbuf_esc(&p->b, mutant, 100);
    rbuf_puts(&p->b, "</code>): a known-wrong variant of the code. A FAIL here means the "
                     "harness caught the mistake, as it must.</div>");
}

static void put_meta_row(struct rbuf *b, const char *label, const char *value, int mono)
{
    rbuf_printf(b, "<dt>%s</dt><dd%s>", label, mono ? " class=\"mono\"" : "");
    rbuf_esc(b, value ? value : "unknown", 300);
    rbuf_puts(b, "</dd>");
}

/* A merged run (`crashwindow merge`): how many shards, where each ran and
 * how long it took. */
static void put_shards(struct rbuf *b, const cJSON *merged)
{
    double n;
    if (!jnum(merged, "count", &n))
        return;
    rbuf_printf(b, "<dt>shards</dt><dd>%.0f merged:", n);
    const cJSON *s;
    int i = 0;
    cJSON_ArrayForEach(s, jget(merged, "shards")) {
        if (i++ == 50) {
            rbuf_puts(b, " ...");
            break;
        }
        rbuf_puts(b, i > 1 ? ", " : " ");
        put_num(b, s, "index");
        rbuf_puts(b, " on ");
        rbuf_esc(b, jstr(s, "hostname") ? jstr(s, "hostname") : "unknown", 80);
        rbuf_puts(b, " (");
        put_duration(b, s, "duration_ms");
        rbuf_puts(b, ", ");
        put_badge(b, jstr(s, "verdict"));
        rbuf_puts(b, ")");
    }
    rbuf_puts(b, "</dd>");
}

/* Scenarios the run's broker could not take, each with its reason. */
static void put_skipped(struct rbuf *b, const cJSON *skipped)
{
    if (!cJSON_IsArray(skipped) || cJSON_GetArraySize(skipped) == 0)
        return;
    rbuf_printf(b, "<div class=\"warnbox\" id=\"skipped\"><b>%d scenario%s skipped</b> "
                "(not run against this broker):<ul>", cJSON_GetArraySize(skipped),
                cJSON_GetArraySize(skipped) == 1 ? "" : "s");
    const cJSON *s;
    int i = 0;
    cJSON_ArrayForEach(s, skipped) {
        if (i++ == 100)
            break;
        rbuf_puts(b, "<li><code>");
        rbuf_esc(b, jstr(s, "name") ? jstr(s, "name") : "(unnamed)", 120);
        rbuf_puts(b, "</code>: ");
        rbuf_esc(b, jstr(s, "reason") ? jstr(s, "reason") : "no reason recorded", 300);
        rbuf_puts(b, "</li>");
    }
    rbuf_puts(b, "</ul></div>");
}

static void put_header(struct page *p)
{
    struct rbuf *b = &p->b;
    const cJSON *res = p->res;
    rbuf_puts(b, "<h1>crashwindow reliability report</h1>");
    put_banner(p);
    put_mutant_note(p);
    rbuf_puts(b, "<dl class=\"meta\">");
    const cJSON *target = jget(res, "target");
    if (target != NULL) {
        rbuf_puts(b, "<dt>target</dt><dd>");
        rbuf_esc(b, jstr(target, "name") ? jstr(target, "name") : "?", 80);
        rbuf_puts(b, ": ");
        rbuf_esc(b, jstr(target, "title") ? jstr(target, "title") : "", 300);
        rbuf_puts(b, "</dd>");
    }
    put_meta_row(b, "commit", jstr(res, "commit"), 1);
    /* Which broker the pipeline ran against: a run from before the choice
     * existed used the fake broker. */
    const char *broker = jstr(res, "broker");
    put_meta_row(b, "broker", broker == NULL || strcmp(broker, "fake") == 0
                                  ? "fake broker (embedded)" : broker, 0);
    put_meta_row(b, "started", jstr(res, "started_at"), 0);
    rbuf_puts(b, "<dt>duration</dt><dd>");
    put_duration(b, res, "duration_ms");
    rbuf_puts(b, "</dd>");
    const cJSON *m = jget(res, "machine");
    const char *host = jstr(m, "hostname");
    rbuf_puts(b, "<dt>machine</dt><dd>");
    rbuf_esc(b, host ? host : "unknown", 120);
    double cpus;
    if (jnum(m, "cpus", &cpus))
        rbuf_printf(b, ", %.0f CPUs", cpus);
    rbuf_puts(b, "</dd>");
    put_meta_row(b, "PostgreSQL", jstr(m, "postgres"), 0);
    /* other machine facts the runner recorded (library versions, kernel...),
     * flat or grouped in one object such as "libs" */
    rbuf_puts(b, "<dt>libraries</dt><dd>");
    int nlib = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, m) {
        if (c->string == NULL || strcmp(c->string, "hostname") == 0 ||
            strcmp(c->string, "postgres") == 0)
            continue;
        const cJSON *group = cJSON_IsObject(c) ? c->child : NULL;
        const cJSON *one = cJSON_IsObject(c) ? NULL : c;
        for (const cJSON *x = one ? one : group; x != NULL && nlib <= 24;
             x = one ? NULL : x->next) {
            if (x->string == NULL || !cJSON_IsString(x))
                continue;
            if (nlib++ > 0)
                rbuf_puts(b, ", ");
            rbuf_esc(b, x->string, 40);
            rbuf_puts(b, " ");
            rbuf_esc(b, x->valuestring, 80);
        }
    }
    if (nlib == 0)
        rbuf_puts(b, "not recorded by the run");
    rbuf_puts(b, "</dd>");
    int lv = PQlibVersion();
    rbuf_printf(b, "<dt>report built with</dt><dd>libpq %d.%d, cJSON %s</dd>", lv / 10000,
                lv % 10000, cJSON_Version());
    put_meta_row(b, "binaries", jstr(res, "bin"), 1);
    put_shards(b, jget(res, "merged"));
    rbuf_puts(b, "</dl>");
    put_skipped(b, jget(res, "skipped"));

    const cJSON *tot = jget(res, "totals");
    static const struct { const char *key, *label; } tiles[] = {
        {"invariants_checked", "invariant checks"}, {"faults_fired", "faults fired"},
        {"kills", "kills"}, {"pauses", "pauses"}, {"restarts", "restarts"},
        {"events", "events processed"}};
    rbuf_puts(b, "<div class=\"tiles\" id=\"totals\">");
    rbuf_printf(b, "<div class=\"tile\"><b>%d/%d</b><span>scenarios passed</span></div>",
                p->npass, p->nscen);
    for (size_t i = 0; i < sizeof(tiles) / sizeof(tiles[0]); i++) {
        rbuf_puts(b, "<div class=\"tile\"><b>");
        put_num(b, tot, tiles[i].key);
        rbuf_printf(b, "</b><span>%s</span></div>", tiles[i].label);
    }
    rbuf_puts(b, "</div>");
}

static int count_array(const cJSON *a)
{
    return cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
}

/* The distinct fault points of a faults_fired list, at most three. */
static void put_fault_names(struct rbuf *b, const cJSON *fired)
{
    const char *seen[3];
    int n = 0, more = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, fired) {
        const char *pt = jstr(f, "point");
        if (pt == NULL)
            continue;
        int k;
        for (k = 0; k < n; k++)
            if (strcmp(seen[k], pt) == 0)
                break;
        if (k < n)
            continue;
        if (n == 3) {
            more = 1;
            continue;
        }
        seen[n++] = pt;
    }
    for (int k = 0; k < n; k++) {
        rbuf_puts(b, k ? ", " : " <span class=\"mono\">");
        rbuf_esc(b, seen[k], 80);
    }
    if (n > 0)
        rbuf_puts(b, more ? ", ...</span>" : "</span>");
}

/* A hazard scenario demonstrates a loss the setting is known for: its
 * verdict says whether the checker caught it, which is not the same as the
 * pipeline failing.  Older run directories have no "hazard": nothing shown. */
static void put_hazard_badge(struct rbuf *b, const cJSON *sc)
{
    const cJSON *h = jget(sc, "hazard");
    if (!cJSON_IsObject(h))
        return;
    if (cJSON_IsTrue(jget(h, "caught")))
        rbuf_puts(b, " <span class=\"badge warn\" title=\"a loss this setting is known "
                     "for, demonstrated and caught by the checker\">hazard caught</span>");
    else
        rbuf_puts(b, " <span class=\"badge fail\">hazard not caught</span>");
}

static void put_hazard(struct rbuf *b, const cJSON *sc)
{
    const cJSON *h = jget(sc, "hazard");
    if (!cJSON_IsObject(h))
        return;
    int caught = cJSON_IsTrue(jget(h, "caught"));
    rbuf_printf(b, "<div class=\"hazard %s\"><b>Hazard%s:</b> ", caught ? "caught" : "missed",
                caught ? ", caught by the checker" : " NOT caught by the checker");
    rbuf_esc(b, jstr(h, "why") ? jstr(h, "why") : "", 1000);
    rbuf_puts(b, ". This scenario shows a loss that its setting allows; it passes when the "
                 "checker reports the loss, each violation one the hazard explains, and is not "
                 "a failure of the pipeline.");
    /* What the hazard explained, against its bound (older runs: none). */
    double events = 0, payments = 0, at_most = 0;
    if (jstr(h, "explains") != NULL && jnum(h, "explained_events", &events) &&
        jnum(h, "explained_payments", &payments) && jnum(h, "at_most", &at_most)) {
        rbuf_puts(b, " It explains <code>");
        rbuf_esc(b, jstr(h, "explains"), 40);
        rbuf_printf(b, "</code>: %.0f events and %.0f acknowledged payments (at most %.0f "
                    "each).", events, payments, at_most);
    }
    rbuf_puts(b, "<ul>");
    const cJSON *x;
    cJSON_ArrayForEach(x, jget(h, "caught_by")) {
        double v = 0, explained = -1;
        jnum(x, "violations", &v);
        rbuf_puts(b, "<li><code>");
        rbuf_esc(b, jstr(x, "invariant"), 80);
        rbuf_printf(b, "</code>: %.0f violations", v);
        if (jnum(x, "explained", &explained))
            rbuf_printf(b, ", %.0f explained by the hazard", explained);
        if (jstr(x, "witness") != NULL) {
            rbuf_puts(b, ", first: ");
            rbuf_esc(b, jstr(x, "witness"), 600);
        }
        rbuf_puts(b, "</li>");
    }
    rbuf_puts(b, "</ul></div>");
}

/* How long the pipeline took to apply an event again after each database
 * or broker fault. */
static void put_recovery(struct rbuf *b, const cJSON *sc)
{
    const cJSON *rec = jget(sc, "recovery");
    if (count_array(rec) == 0)
        return;
    rbuf_puts(b, "<table class=\"recovery\"><thead><tr><th>fault</th><th>recovery: from the "
                 "fault to the next event applied</th></tr></thead><tbody>");
    const cJSON *x;
    cJSON_ArrayForEach(x, rec) {
        rbuf_puts(b, "<tr><td class=\"mono\">");
        rbuf_esc(b, jstr(x, "target"), 40);
        rbuf_puts(b, " ");
        rbuf_esc(b, jstr(x, "action"), 40);
        double ms;
        if (jnum(x, "recovery_ms", &ms))
            rbuf_printf(b, "</td><td class=\"num\">%.0f ms</td></tr>", ms);
        else
            rbuf_puts(b, "</td><td>no event applied afterwards</td></tr>");
    }
    rbuf_puts(b, "</tbody></table>");
}

static void put_summary(struct page *p)
{
    struct rbuf *b = &p->b;
    rbuf_puts(b, "<h2 id=\"summary-title\">Scenarios</h2>"
                 "<table id=\"summary\"><thead><tr><th>#</th><th>scenario</th>"
                 "<th>crash window</th><th>verdict</th><th>duration</th>"
                 "<th>faults fired</th><th>kills / pauses / restarts</th>"
                 "<th>duplicates absorbed by the inbox</th></tr></thead><tbody>");
    int i = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, p->scenarios) {
        int failed = scen_failed(sc);
        int nothit = count_array(jget(sc, "faults_not_hit"));
        rbuf_printf(b, "<tr class=\"%s\"><td class=\"num\">%d</td><td><a href=\"#s%d\">",
                    failed ? "fail" : nothit ? "warn" : "pass", i + 1, i);
        put_scen_name(b, sc, i);
        rbuf_puts(b, "</a>");
        double ac;
        if (jnum(sc, "article_case", &ac))
            rbuf_printf(b, " <span class=\"note\">(case %.0f)</span>", ac);
        rbuf_puts(b, "</td><td class=\"mono\">");
        rbuf_esc(b, jstr(sc, "crash_window"), 120);
        rbuf_puts(b, "</td><td>");
        put_badge(b, failed && jpass(sc) ? "fail" : jstr(sc, "verdict"));
        put_hazard_badge(b, sc);
        rbuf_puts(b, "</td><td class=\"num\">");
        put_duration(b, sc, "duration_ms");
        rbuf_printf(b, "</td><td>%d", count_array(jget(sc, "faults_fired")));
        put_fault_names(b, jget(sc, "faults_fired"));
        if (nothit > 0)
            rbuf_printf(b, " <span class=\"badge warn\">%d armed, not hit</span>", nothit);
        rbuf_puts(b, "</td><td class=\"num\">");
        put_num(b, sc, "kills");
        rbuf_puts(b, " / ");
        put_num(b, sc, "pauses");
        rbuf_puts(b, " / ");
        put_num(b, sc, "restarts");
        rbuf_puts(b, "</td><td class=\"num\">");
        put_num(b, jget(sc, "counts"), "duplicates_absorbed");
        rbuf_puts(b, "</td></tr>");
        i++;
    }
    if (i == 0)
        rbuf_puts(b, "<tr><td colspan=\"8\">this run has no scenarios</td></tr>");
    rbuf_puts(b, "</tbody></table>");
}

/* A relative path inside the run directory: no leading '/', no ".." part. */
static int safe_rel_dir(const char *d)
{
    if (d == NULL || d[0] == '\0' || d[0] == '/' || strlen(d) > 512)
        return 0;
    const char *s = d;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return 0;
        if (!e)
            break;
        s = e + 1;
    }
    return 1;
}

static void put_key_values(struct rbuf *b, const cJSON *o, const char *title)
{
    rbuf_printf(b, "<table class=\"kv\"><thead><tr><th colspan=\"2\">%s</th></tr></thead>"
                   "<tbody>", title);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, o) {
        if (c->string == NULL || n++ > 40)
            continue;
        rbuf_puts(b, "<tr><td>");
        rbuf_esc(b, c->string, 60);
        rbuf_puts(b, "</td><td class=\"num\">");
        if (cJSON_IsNumber(c))
            put_num(b, o, c->string);
        else if (cJSON_IsString(c))
            rbuf_esc(b, c->valuestring, 100);
        rbuf_puts(b, "</td></tr>");
    }
    if (n == 0)
        rbuf_puts(b, "<tr><td colspan=\"2\">not recorded</td></tr>");
    rbuf_puts(b, "</tbody></table>");
}

static void put_invariants(struct rbuf *b, const cJSON *sc)
{
    const cJSON *invs = jget(sc, "invariants");
    rbuf_puts(b, "<h3>Invariants</h3><table class=\"invariants\"><thead><tr>"
                 "<th>invariant</th><th>verdict</th><th>checked</th><th>violations</th>"
                 "<th>witnesses (the rows that break it)</th></tr></thead><tbody>");
    const cJSON *inv;
    int n = 0, nets = 0;
    cJSON_ArrayForEach(inv, invs) {
        int ok = jinv_ok(inv);
        /* invariants the scenario does not list are checked too, as a net:
         * shown lighter, with a hover text saying so */
        int net = cJSON_IsFalse(jget(inv, "listed"));
        nets += net;
        rbuf_printf(b, "<tr class=\"%s\"><td class=\"mono%s\"%s>", ok ? "pass" : "fail",
                    net ? " net" : "",
                    net ? " title=\"not listed by the scenario: checked as a safety net\"" : "");
        rbuf_esc(b, jstr(inv, "name"), 120);
        /* what it asserts: the checker's table (sim/checker/invariants.c),
         * carried in result.json; a run stored before it carries none */
        if (jstr(inv, "asserts")) {
            rbuf_puts(b, "<div class=\"asserts\">");
            rbuf_esc(b, jstr(inv, "asserts"), 400);
            rbuf_puts(b, "</div>");
        }
        rbuf_puts(b, "</td><td>");
        put_badge(b, jstr(inv, "verdict"));
        /* examined nothing: never to be read as "checked and fine" */
        if (cJSON_IsTrue(jget(inv, "vacuous")))
            put_badge(b, "vacuous");
        rbuf_puts(b, "</td><td class=\"num\">");
        put_num(b, inv, "checked");
        rbuf_puts(b, "</td><td class=\"num\">");
        put_num(b, inv, "violations");
        rbuf_puts(b, "</td><td>");
        const cJSON *ws = jget(inv, "witnesses");
        int nw = count_array(ws);
        if (nw > 0) {
            rbuf_puts(b, "<ul class=\"witness\">");
            int k = 0;
            const cJSON *w;
            cJSON_ArrayForEach(w, ws) {
                if (k++ == 25) {
                    rbuf_printf(b, "<li>and %d more</li>", nw - 25);
                    break;
                }
                if (!cJSON_IsString(w))
                    continue;
                rbuf_puts(b, "<li>");
                rbuf_esc(b, w->valuestring, 1000);
                rbuf_puts(b, "</li>");
            }
            rbuf_puts(b, "</ul>");
        } else if (!ok) {
            rbuf_puts(b, "no witness recorded");
        }
        rbuf_puts(b, "</td></tr>");
        n++;
    }
    if (n == 0)
        rbuf_puts(b, "<tr><td colspan=\"5\">no invariants were checked</td></tr>");
    rbuf_puts(b, "</tbody></table>");
    if (nets > 0)
        rbuf_puts(b, "<p class=\"note\">Names in grey are not listed by the scenario; they "
                     "are checked anyway, as a safety net.</p>");

    const cJSON *ex = jget(sc, "expect");
    if (count_array(ex) > 0) {
        rbuf_puts(b, "<h3>Expectations</h3><table class=\"expect\"><thead><tr>"
                     "<th>check</th><th>verdict</th><th>detail</th></tr></thead><tbody>");
        const cJSON *e;
        cJSON_ArrayForEach(e, ex) {
            rbuf_printf(b, "<tr class=\"%s\"><td class=\"mono\">", jpass(e) ? "pass" : "fail");
            rbuf_esc(b, jstr(e, "check"), 200);
            rbuf_puts(b, "</td><td>");
            put_badge(b, jstr(e, "verdict"));
            rbuf_puts(b, "</td><td>");
            rbuf_esc(b, jstr(e, "detail"), 500);
            rbuf_puts(b, "</td></tr>");
        }
        rbuf_puts(b, "</tbody></table>");
    }
}

/* The faults of a scenario; their times count from origin (the timeline's
 * start, as in its hover texts), or from the first fault when it is 0. */
static void put_faults(struct rbuf *b, const cJSON *sc, int64_t origin)
{
    const cJSON *fired = jget(sc, "faults_fired");
    const cJSON *nothit = jget(sc, "faults_not_hit");
    rbuf_puts(b, "<h3>Faults</h3>");
    if (count_array(fired) == 0 && count_array(nothit) == 0) {
        rbuf_puts(b, "<p class=\"note\">no fault point was armed and the runner broke no link, "
                     "database, broker or clock in this scenario</p>");
        return;
    }
    rbuf_puts(b, "<table class=\"faults\"><thead><tr><th>fault (a point, or what the runner "
                 "broke from outside)</th><th>process</th>"
                 "<th>action</th><th>when (since the start)</th></tr></thead><tbody>");
    const cJSON *f;
    double t0 = (double)origin;
    if (origin == 0) {
        t0 = INFINITY;
        cJSON_ArrayForEach(f, fired) {
            double ts;
            if (jnum(f, "ts_us", &ts) && ts < t0)
                t0 = ts;
        }
    }
    int n = 0;
    cJSON_ArrayForEach(f, fired) {
        double ts;
        rbuf_puts(b, "<tr><td class=\"mono\">");
        rbuf_esc(b, jstr(f, "point"), 120);
        rbuf_puts(b, "</td><td class=\"mono\">");
        rbuf_esc(b, jstr(f, "proc"), 60);
        rbuf_puts(b, "</td><td>");
        rbuf_esc(b, jstr(f, "action"), 30);
        rbuf_puts(b, "</td><td class=\"num\">");
        if (jnum(f, "ts_us", &ts) && isfinite(t0))
            rbuf_printf(b, "+%.3f s", (ts - t0) / 1e6);
        rbuf_puts(b, "</td></tr>");
        if (++n == 200)
            break;
    }
    cJSON_ArrayForEach(f, nothit) {
        rbuf_puts(b, "<tr class=\"warn\"><td class=\"mono\">");
        rbuf_esc(b, cJSON_IsString(f) ? f->valuestring : jstr(f, "point"), 120);
        rbuf_puts(b, "</td><td colspan=\"3\"><span class=\"badge warn\">NOT HIT</span> armed "
                     "but never reached: this window was not exercised</td></tr>");
    }
    rbuf_puts(b, "</tbody></table>");
}

/* Collects a scenario's witness strings (borrowed pointers) for highlighting
 * the messages they name in the timeline. */
static size_t witness_texts(const cJSON *sc, const char **out, size_t max)
{
    size_t n = 0;
    const cJSON *inv, *w;
    cJSON_ArrayForEach(inv, jget(sc, "invariants")) {
        if (jpass(inv))
            continue;
        cJSON_ArrayForEach(w, jget(inv, "witnesses"))
            if (cJSON_IsString(w) && n < max)
                out[n++] = w->valuestring;
    }
    return n;
}

static void put_scenario(struct page *p, const cJSON *sc, int i)
{
    struct rbuf *b = &p->b;
    int failed = scen_failed(sc);
    rbuf_printf(b, "<section class=\"scenario %s\" id=\"s%d\"><h2>%d. ",
                failed ? "fail" : "pass", i, i + 1);
    put_scen_name(b, sc, i);
    rbuf_puts(b, " ");
    put_badge(b, failed && jpass(sc) ? "fail" : jstr(sc, "verdict"));
    rbuf_puts(b, "</h2><p class=\"sentence\">");
    rbuf_esc(b, jstr(sc, "title") ? jstr(sc, "title") : "(no description)", 1000);
    rbuf_puts(b, "</p>");
    const char *desc = jstr(sc, "description");
    if (desc != NULL && desc[0] != '\0') {
        rbuf_puts(b, "<p class=\"sentence note\">");
        rbuf_esc(b, desc, 2000);
        rbuf_puts(b, "</p>");
    }
    rbuf_puts(b, "<p class=\"note\">crash window <code>");
    rbuf_esc(b, jstr(sc, "crash_window") ? jstr(sc, "crash_window") : "none", 120);
    rbuf_puts(b, "</code>");
    double ac;
    if (jnum(sc, "article_case", &ac))
        rbuf_printf(b, " &#183; article case %.0f", ac);
    rbuf_puts(b, " &#183; duration ");
    put_duration(b, sc, "duration_ms");
    rbuf_puts(b, " &#183; kills ");
    put_num(b, sc, "kills");
    rbuf_puts(b, ", pauses ");
    put_num(b, sc, "pauses");
    rbuf_puts(b, ", restarts ");
    put_num(b, sc, "restarts");
    rbuf_puts(b, "</p>");
    const char *err = jstr(sc, "error");
    if (err != NULL && err[0] != '\0') {
        rbuf_puts(b, "<div class=\"err\"><b>ERROR:</b> ");
        rbuf_esc(b, err, 4000);
        rbuf_puts(b, "</div>");
    }
    put_hazard(b, sc);
    put_recovery(b, sc);
    put_invariants(b, sc);
    rbuf_puts(b, "<div class=\"cols\">");
    put_key_values(b, jget(sc, "counts"), "counts");
    put_key_values(b, jget(sc, "classification"), "messages by outcome");
    rbuf_puts(b, "</div>");
    /* timeline and metrics from the scenario's directory: read first, so
     * that the fault table counts time from the same origin as the timeline */
    const char *dir = jstr(sc, "dir");
    struct rtl *tl = NULL;
    struct rmetrics *ms = NULL;
    char path[4096], tl_err[512] = "", ms_err[512] = "";
    int dir_ok = safe_rel_dir(dir);
    if (dir_ok) {
        snprintf(path, sizeof(path), "%s/%s/timeline.jsonl", p->dir, dir);
        tl = rtl_load(path, REPORT_MAX_EVENTS, tl_err, sizeof(tl_err));
        snprintf(path, sizeof(path), "%s/%s/metrics.jsonl", p->dir, dir);
        ms = rmetrics_load(path, REPORT_MAX_SAMPLES, ms_err, sizeof(ms_err));
    }
    if (tl != NULL) {
        const char *wt[256];
        size_t nw = witness_texts(sc, wt, 256);
        rtl_mark_witnesses(tl, wt, nw);
    }
    struct rview view;
    rtl_view(tl, ms, &view);
    put_faults(b, sc, view.origin);

    rbuf_puts(b, "<h3>Timeline</h3>");
    if (!dir_ok) {
        rbuf_puts(b, "<p class=\"note\">no usable scenario directory in result.json (it must "
                     "be a relative path inside the run directory)</p>");
    } else if (tl == NULL) {
        rbuf_puts(b, "<p class=\"note\">timeline unavailable: ");
        rbuf_esc(b, tl_err, 600);
        rbuf_puts(b, "</p>");
    }
    if (tl != NULL)
        rtl_svg(b, tl, i, &view, p->cap);
    rbuf_puts(b, "<h3>Metrics</h3>");
    if (ms == NULL && dir_ok) {
        rbuf_puts(b, "<p class=\"note\">metrics unavailable: ");
        rbuf_esc(b, ms_err, 600);
        rbuf_puts(b, "</p>");
    } else if (ms != NULL) {
        rmetrics_svg(b, ms, tl, &view);
    }
    rtl_free(tl);
    rmetrics_free(ms);
    rbuf_puts(b, "</section>");
}

static void put_mutants(struct page *p)
{
    struct rbuf *b = &p->b;
    const cJSON *muts = jget(p->res, "mutants");
    if (count_array(muts) == 0)
        return;
    /* columns: every scenario any mutant ran, in order of first appearance */
    const char *cols[64];
    int ncols = 0;
    const cJSON *m, *s;
    cJSON_ArrayForEach(m, muts) {
        cJSON_ArrayForEach(s, jget(m, "scenarios")) {
            const char *name = jstr(s, "name");
            if (name == NULL)
                continue;
            int k;
            for (k = 0; k < ncols; k++)
                if (strcmp(cols[k], name) == 0)
                    break;
            if (k == ncols && ncols < 64)
                cols[ncols++] = name;
        }
    }
    int nm = 0, caught = 0;
    cJSON_ArrayForEach(m, muts) {
        nm++;
        caught += cJSON_IsTrue(jget(m, "killed"));
    }
    rbuf_printf(b, "<h2 id=\"mutants\">Mutant matrix</h2><p>Each mutant is a known-wrong "
                   "variant of the real code; the harness must fail on every one. "
                   "<b>%d of %d caught.</b></p>", caught, nm);
    if (caught < nm)
        rbuf_printf(b, "<div class=\"banner fail\" role=\"alert\"><span class=\"word\">"
                       "SURVIVED</span>%d mutant%s not caught by any scenario: the harness "
                       "cannot see that mistake.</div>", nm - caught, nm - caught == 1 ? "" : "s");
    rbuf_puts(b, "<table id=\"mutant-matrix\"><thead><tr><th>mutant</th><th>result</th>");
    for (int k = 0; k < ncols; k++) {
        rbuf_puts(b, "<th class=\"mono\">");
        rbuf_esc(b, cols[k], 60);
        rbuf_puts(b, "</th>");
    }
    rbuf_puts(b, "</tr></thead><tbody>");
    cJSON_ArrayForEach(m, muts) {
        int killed = cJSON_IsTrue(jget(m, "killed"));
        rbuf_printf(b, "<tr class=\"%s\"><td class=\"mono\">", killed ? "pass" : "fail");
        rbuf_esc(b, jstr(m, "name"), 80);
        rbuf_printf(b, "</td><td class=\"%s\">%s</td>", killed ? "caught" : "survived",
                    killed ? "\xE2\x9C\x93 caught" : "\xE2\x9C\x97 SURVIVED");
        for (int k = 0; k < ncols; k++) {
            const cJSON *cell = NULL;
            cJSON_ArrayForEach(s, jget(m, "scenarios")) {
                const char *name = jstr(s, "name");
                if (name != NULL && strcmp(name, cols[k]) == 0) {
                    cell = s;
                    break;
                }
            }
            if (cell == NULL) {
                rbuf_puts(b, "<td class=\"note\">not run</td>");
                continue;
            }
            /* "errored": failed by a timeout or a harness error alone, which
             * kills nothing (older results carry no outcome: their verdict) */
            const char *oc = jstr(cell, "outcome");
            int errored = oc != NULL && strcmp(oc, "errored") == 0;
            int unreached = oc != NULL && strcmp(oc, "unreached") == 0;
            int hit = oc != NULL ? strcmp(oc, "killed") == 0 : !jpass(cell);
            rbuf_printf(b, "<td class=\"%s\">", hit ? "caught" : "");
            if (errored) {
                rbuf_puts(b, "<b>errored</b> (a timeout or a harness error, no failed check)");
            } else if (unreached) {
                rbuf_puts(b, "unreached (the real code's run never evaluates its hooks: it "
                             "runs as the real code)");
            } else if (hit) {
                rbuf_puts(b, "<b>caught</b> by ");
                const cJSON *kb;
                int nk = 0;
                cJSON_ArrayForEach(kb, jget(cell, "killed_by")) {
                    if (!cJSON_IsString(kb))
                        continue;
                    rbuf_puts(b, nk++ ? ", " : "");
                    rbuf_puts(b, "<code>");
                    rbuf_esc(b, kb->valuestring, 80);
                    rbuf_puts(b, "</code>");
                }
                if (nk == 0)
                    rbuf_puts(b, "a failed check");
                const char *w = jstr(cell, "witness");
                if (w != NULL && w[0] != '\0') {
                    rbuf_puts(b, "<div class=\"note\">");
                    rbuf_esc(b, w, 300);
                    rbuf_puts(b, "</div>");
                }
            } else {
                rbuf_puts(b, "passed (not caught here)");
            }
            rbuf_puts(b, "</td>");
        }
        rbuf_puts(b, "</tr>");
    }
    rbuf_puts(b, "</tbody></table>");
}

static void put_simulator(struct page *p)
{
    struct rbuf *b = &p->b;
    const cJSON *sim = jget(p->res, "simulator");
    if (!cJSON_IsObject(sim))
        return;
    double fails = 0;
    jnum(sim, "failures", &fails);
    rbuf_puts(b, "<h2 id=\"simulator\">Simulator</h2>");
    if (fails > 0)
        rbuf_printf(b, "<div class=\"banner fail\" role=\"alert\"><span class=\"word\">FAIL"
                       "</span>%.0f randomized run%s broke an invariant; replay commands "
                       "below.</div>", fails, fails == 1 ? "" : "s");
    rbuf_puts(b, "<div class=\"cols\"><table id=\"sim-stats\"><tbody>");
    static const struct { const char *key, *label; } rows[] = {
        {"seed", "seed"}, {"runs", "runs"}, {"failures", "failing runs"},
        {"runs_per_minute", "runs per minute"}, {"kills", "kills"}, {"pauses", "pauses"},
        {"redeliveries", "redeliveries"}, {"duplicates_absorbed", "duplicates absorbed"},
        {"invariant_checks", "invariant checks"}};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        rbuf_printf(b, "<tr><th>%s</th><td class=\"num\">", rows[i].label);
        put_num(b, sim, rows[i].key);
        rbuf_puts(b, "</td></tr>");
    }
    rbuf_puts(b, "</tbody></table>");
    const cJSON *ff = jget(sim, "faults_fired");
    if (cJSON_IsObject(ff)) {
        double max = 1;
        const cJSON *c;
        cJSON_ArrayForEach(c, ff)
            if (cJSON_IsNumber(c) && c->valuedouble > max)
                max = c->valuedouble;
        rbuf_puts(b, "<table id=\"sim-faults\"><thead><tr><th>fault point</th><th>fired"
                     "</th><th></th></tr></thead><tbody>");
        int n = 0;
        cJSON_ArrayForEach(c, ff) {
            if (c->string == NULL || !cJSON_IsNumber(c) || n++ > 100)
                continue;
            rbuf_puts(b, "<tr><td class=\"mono\">");
            rbuf_esc(b, c->string, 100);
            rbuf_printf(b, "</td><td class=\"num\">%.0f</td><td><span class=\"bar\" "
                           "style=\"width:%.0fpx\"></span></td></tr>",
                        c->valuedouble, c->valuedouble > 0 ? 2 + 180 * c->valuedouble / max : 0);
        }
        rbuf_puts(b, "</tbody></table>");
    }
    rbuf_puts(b, "</div>");
    const cJSON *fid = jget(sim, "fidelity");
    if (cJSON_IsObject(fid)) {
        double replays = 0, again = 0, same = 0;
        jnum(fid, "replays", &replays);
        jnum(fid, "failed_again", &again);
        jnum(fid, "same_failure", &same);
        rbuf_puts(b, "<h3>Replay fidelity</h3><p id=\"sim-fidelity\">The first failing run, ");
        rbuf_puts(b, "<code>");
        rbuf_esc(b, jstr(fid, "run"), 60);
        rbuf_printf(b, "</code>, replayed %.0f times with the same schedule: it failed again "
                    "%.0f times (%.0f%%), %.0f of them on <code>", replays, again,
                    replays > 0 ? 100.0 * again / replays : 0.0, same);
        rbuf_esc(b, jstr(fid, "invariant"), 100);
        rbuf_puts(b, "</code>.  A failure that does not come back is one nobody can "
                     "debug.</p>");
    }
    const cJSON *failing = jget(sim, "failing");
    if (count_array(failing) > 0) {
        rbuf_puts(b, "<h3>Failing runs</h3><table id=\"sim-failing\"><thead><tr><th>run</th>"
                     "<th>invariant</th><th>witness</th><th>replay</th></tr></thead><tbody>");
        const cJSON *f;
        int n = 0;
        cJSON_ArrayForEach(f, failing) {
            if (n++ == 100)
                break;
            rbuf_puts(b, "<tr class=\"fail\"><td class=\"mono\">");
            rbuf_esc(b, jstr(f, "run"), 60);
            rbuf_puts(b, "</td><td class=\"mono\">");
            rbuf_esc(b, jstr(f, "invariant"), 100);
            rbuf_puts(b, "</td><td>");
            rbuf_esc(b, jstr(f, "witness"), 600);
            rbuf_puts(b, "</td><td><code>");
            rbuf_esc(b, jstr(f, "replay"), 200);
            rbuf_puts(b, "</code></td></tr>");
        }
        rbuf_puts(b, "</tbody></table>");
    }
}

/* ---- entry points ---------------------------------------------------------- */

/* The whole file at path (the caller frees it), at most max bytes.  NULL
 * with the reason in err. */
static char *slurp(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    enum cw_slurp_error why;
    char *data = cw_slurp(path, max, len, &why);
    if (data != NULL)
        return data;
    if (why == CW_SLURP_OPEN)
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    else if (why == CW_SLURP_NOMEM)
        snprintf(err, errlen, "out of memory reading %s", path);
    else if (why == CW_SLURP_READ)
        snprintf(err, errlen, "cannot read %s", path);
    else
        snprintf(err, errlen, "%s is larger than %zu bytes", path, max);
    return NULL;
}

/* The page written whole to out_path (through a temporary file, renamed).
 * 0, or -1 with err. */
static int write_file(const char *out_path, const struct rbuf *b, char *err, size_t errlen)
{
    char tmp[4200];
    enum cw_write_error why;
    if (cw_write_data(out_path, b->data, b->len, tmp, sizeof(tmp), &why) == 0)
        return 0;
    if (why == CW_WRITE_TOO_LONG)
        snprintf(err, errlen, "output path too long");
    else if (why == CW_WRITE_CREATE)
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
    else
        snprintf(err, errlen, "cannot write %s: %s", out_path, strerror(errno));
    return -1;
}

/* Appends the whole page for p (p->b must be empty). */
static void build_page(struct page *p)
{
    struct rbuf *b = &p->b;
    const cJSON *res = p->res;
    rbuf_puts(b, "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">"
                 "<head><meta charset=\"utf-8\"/>"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>"
                 "<title>");
    rbuf_printf(b, "%s \xE2\x80\x94 crashwindow report", p->pass ? "PASS" : "FAIL");
    const char *commit = jstr(res, "commit");
    if (commit != NULL) {
        rbuf_puts(b, " \xE2\x80\x94 ");
        rbuf_esc(b, commit, 12);
    }
    rbuf_puts(b, "</title><style>");
    rbuf_puts(b, page_css);
    rbuf_puts(b, "</style></head><body><main>");
    put_header(p);
    put_summary(p);
    int i = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, p->scenarios)
        put_scenario(p, sc, i++);
    put_mutants(p);
    put_simulator(p);
    rbuf_printf(b, "<footer>Generated by <code>crashwindow report</code> from the run "
                   "directory; one file, no network. Hover a marker for its fields and "
                   "message ids; the markers of that message light up on every lane."
                   "</footer></main><script>%s</script></body></html>\n", page_js);
}

/* Takes the "mutants" array of matrix_dir's result.json into res, which
 * has none, with where it came from.  0, or -1 with a message. */
static int adopt_matrix(cJSON *res, const char *matrix_dir, char *err, size_t errlen)
{
    if (matrix_dir == NULL || cJSON_GetObjectItemCaseSensitive(res, "mutants") != NULL)
        return 0;
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/result.json", matrix_dir) >= (int)sizeof(path)) {
        snprintf(err, errlen, "matrix directory path too long");
        return -1;
    }
    size_t len = 0;
    char *text = slurp(path, CW_RESULT_MAX_JSON, &len, err, errlen);
    if (text == NULL)
        return -1;
    cJSON *m = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *muts = cJSON_GetObjectItemCaseSensitive(m, "mutants");
    if (!cJSON_IsArray(muts)) {
        snprintf(err, errlen, "%s holds no mutant matrix", path);
        cJSON_Delete(m);
        return -1;
    }
    cJSON_AddItemToObject(res, "mutants", cJSON_Duplicate(muts, 1));
    cJSON_AddStringToObject(res, "matrix_from", matrix_dir);
    cJSON_Delete(m);
    return 0;
}

int report_write(const char *dir, const char *out_path, char *err, size_t errlen)
{
    return report_write_matrix(dir, out_path, NULL, err, errlen);
}

int report_write_matrix(const char *dir, const char *out_path, const char *matrix_dir,
                        char *err, size_t errlen)
{
    if (dir == NULL || out_path == NULL || dir[0] == '\0' || out_path[0] == '\0') {
        snprintf(err, errlen, "a run directory and an output file are required");
        return -1;
    }
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/result.json", dir) >= (int)sizeof(path)) {
        snprintf(err, errlen, "run directory path too long");
        return -1;
    }
    size_t len = 0;
    char *text = slurp(path, CW_RESULT_MAX_JSON, &len, err, errlen);
    if (text == NULL)
        return -1;
    cJSON *res = cw_result_parse(path, text, len, CW_RESULT_DRAWABLE, err, errlen);
    free(text);
    if (res == NULL)
        return -1;
    int rc = -1;
    struct page p;
    memset(&p, 0, sizeof(p));
    rbuf_init(&p.b, REPORT_MAX_HTML);
    if (adopt_matrix(res, matrix_dir, err, errlen) < 0)
        goto out;
    p.dir = dir;
    p.res = res;
    p.scenarios = jget(res, "scenarios");
    p.nscen = count_array(p.scenarios);
    const cJSON *sc;
    int anyfail = 0;
    cJSON_ArrayForEach(sc, p.scenarios) {
        if (scen_failed(sc))
            anyfail = 1;
        else
            p.npass++;
    }
    const char *verdict = jstr(res, "verdict");
    p.pass = verdict != NULL && strcmp(verdict, "pass") == 0 && !anyfail;
    /* The marker budget is shared by the timelines.  Should the page still
     * come out above the soft size (long metrics, many exceptional events),
     * it is rebuilt with half the markers per timeline: the notes under each
     * timeline then say what was folded. */
    size_t cap = p.nscen > 0 ? REPORT_MARKER_BUDGET / (size_t)p.nscen : REPORT_MAX_CAP;
    p.cap = cap < REPORT_MIN_CAP ? REPORT_MIN_CAP : cap > REPORT_MAX_CAP ? REPORT_MAX_CAP : cap;
    for (;;) {
        rbuf_free(&p.b);
        rbuf_init(&p.b, REPORT_MAX_HTML);
        build_page(&p);
        if (p.b.overflow) {
            snprintf(err, errlen, "report would exceed %u bytes", REPORT_MAX_HTML);
            goto out;
        }
        if (p.b.len <= REPORT_SOFT_SIZE || p.cap <= REPORT_FLOOR_CAP)
            break;
        p.cap /= 2;
    }
    if (write_file(out_path, &p.b, err, errlen) < 0)
        goto out;
    rc = 0;
out:
    rbuf_free(&p.b);
    cJSON_Delete(res);
    return rc;
}

static void report_usage(FILE *f)
{
    fprintf(f, "usage: crashwindow report DIR -o FILE.html\n"
               "  writes the HTML reliability report of run directory DIR\n"
               "  (DIR/result.json, and each scenario's timeline.jsonl and metrics.jsonl)\n"
               "  -o FILE, --output FILE  the report to write (default: DIR/report.html)\n"
               "  --matrix MUTANTS_DIR  show the mutant matrix of that `crashwindow mutants`\n"
               "            run when DIR has none\n"
               "exit status: 0 written, 1 could not write it, 2 bad usage or DIR not a run\n"
               "directory\n");
}

/* The run directory: one only. */
static int take_dir(const char *value, void *ctx, char *err, size_t errlen)
{
    const char **dir = ctx;
    if (*dir != NULL) {
        snprintf(err, errlen, "one run directory only (got %s and %s)", *dir, value);
        return -1;
    }
    *dir = value;
    return 0;
}

int report_main(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL, *matrix = NULL;
    /* argv[0] is the subcommand ("report"), as with every crashwindow command */
    const struct cw_opt opts[] = {
        CW_OPT_STRING("-o", &out),
        CW_OPT_STRING("--output", &out),
        CW_OPT_STRING("--matrix", &matrix),
    };
    const struct cw_opts_style style = {
        .prefix = "-",
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unknown option %s",
        .missing = "%s needs a file name",
        .positional = take_dir,
        .positional_ctx = &dir,
    };
    char uerr[16384]; /* the arguments in full, as they always were */
    /* A lone "-" is a run directory's name here, as it always was, not an
     * option: the parse resumes after it (argv + at: its argv[0] is "-"). */
    int at = 0, rc;
    for (int from = 0;; from = at) {
        rc = cw_opts_parse(opts, CW_NOPTS(opts), &style, argc - from, argv + from, &at,
                           uerr, sizeof(uerr));
        at += from;
        if (rc != CW_OPTS_USAGE || strcmp(argv[at], "-") != 0)
            break;
        if (take_dir(argv[at], &dir, uerr, sizeof(uerr)) < 0) {
            rc = CW_OPTS_BAD_VALUE;
            break;
        }
    }
    if (rc == CW_OPTS_HELP) {
        report_usage(stdout);
        return 0;
    }
    if (rc != CW_OPTS_OK) {
        /* A usage error is an unknown option (the usage follows) or an
         * option without its value: --matrix says what it lacks in its
         * own words. */
        int known = 0;
        for (size_t k = 0; k < CW_NOPTS(opts); k++)
            known = known || strcmp(argv[at], opts[k].name) == 0;
        if (rc == CW_OPTS_USAGE && strcmp(argv[at], "--matrix") == 0)
            fprintf(stderr, "crashwindow report: --matrix needs a mutants run directory\n");
        else
            fprintf(stderr, "crashwindow report: %s\n", uerr);
        if (rc == CW_OPTS_USAGE && !known)
            report_usage(stderr);
        return 2;
    }
    if (dir == NULL) {
        report_usage(stderr);
        return 2;
    }
    /* A directory that is not a run's is bad input (exit 2), as for check
     * and merge; a report that cannot be made of a run is a failure (1). */
    struct stat st;
    char resp[4096 + 16];
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "crashwindow report: %s: no such directory\n", dir);
        return 2;
    }
    snprintf(resp, sizeof(resp), "%s/result.json", dir);
    if (access(resp, F_OK) != 0) {
        fprintf(stderr, "crashwindow report: %s: missing (%s is not a run directory)\n", resp,
                dir);
        return 2;
    }
    char def[4096];
    if (out == NULL) {
        if (snprintf(def, sizeof(def), "%s/report.html", dir) >= (int)sizeof(def)) {
            fprintf(stderr, "crashwindow report: run directory path too long\n");
            return 2;
        }
        out = def;
    }
    char err[1024];
    if (report_write_matrix(dir, out, matrix, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow report: %s\n", err);
        return 1;
    }
    printf("report written to %s\n", out);
    return 0;
}
