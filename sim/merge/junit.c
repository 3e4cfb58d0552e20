/* junit.c -- JUnit XML from result.json; see junit.h.
 *
 * The document is built in the report's size-capped buffer (report_html.h)
 * and written in one go; every value from the run goes through rbuf_esc,
 * which escapes for both text and attributes and replaces what XML forbids. */
#include "junit.h"
#include "common_fs.h"
#include "fstree.h"
#include "report_html.h"
#include "rundir.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define JUNIT_MAX_BYTES (256u * 1024 * 1024)

static void put_seconds(struct rbuf *b, double ms)
{
    rbuf_printf(b, "%.3f", ms > 0 ? ms / 1000.0 : 0.0);
}

/* The replay line of a simulator run named "sim-S-I", from the result's
 * "simulator"."failing" list (whose "run" is "S:I"); NULL when none. */
static const char *sim_replay(const cJSON *result, const char *name)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, rd_get(rd_get(result, "simulator"), "failing")) {
        const char *run = rd_str(f, "run");
        char want[96];
        if (run == NULL)
            continue;
        snprintf(want, sizeof(want), "sim-%s", run);
        char *colon = strchr(want, ':');
        if (colon != NULL)
            *colon = '-';
        if (strcmp(want, name) == 0)
            return rd_str(f, "replay");
    }
    return NULL;
}

/* The text of a <failure>: every failed check on a line of its own. */
static void put_failure_text(struct rbuf *b, const cJSON *result, const cJSON *sc)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, rd_get(sc, "invariants")) {
        if (!rundir_check_failed(it))
            continue;
        rbuf_puts(b, "invariant ");
        rbuf_esc(b, rd_str(it, "name"), 100);
        rbuf_printf(b, " failed (%.0f violations)\n", rd_num(it, "violations"));
        const cJSON *w;
        int n = 0;
        cJSON_ArrayForEach(w, rd_get(it, "witnesses")) {
            if (cJSON_IsString(w) && n++ < 5) {
                rbuf_puts(b, "  ");
                rbuf_esc(b, w->valuestring, 2000);
                rbuf_puts(b, "\n");
            }
        }
    }
    cJSON_ArrayForEach(it, rd_get(sc, "expect")) {
        if (!rundir_check_failed(it))
            continue;
        rbuf_puts(b, "expectation ");
        rbuf_esc(b, rd_str(it, "check"), 100);
        rbuf_puts(b, " failed: ");
        rbuf_esc(b, rd_str(it, "detail"), 2000);
        rbuf_puts(b, "\n");
    }
    if (rd_str(sc, "error") != NULL) {
        rbuf_puts(b, "error: ");
        rbuf_esc(b, rd_str(sc, "error"), 4000);
        rbuf_puts(b, "\n");
    }
    const char *replay = rd_str(sc, "name") ? sim_replay(result, rd_str(sc, "name")) : NULL;
    if (replay != NULL) {
        rbuf_puts(b, "replay: ");
        rbuf_esc(b, replay, 1000);
        rbuf_puts(b, "\n");
    }
    if (rd_str(sc, "dir") != NULL) {
        rbuf_puts(b, "files: ");
        rbuf_esc(b, rd_str(sc, "dir"), 1000);
        rbuf_puts(b, " in the run directory\n");
    }
}

/* One <testcase> per scenario entry, under classname cls. */
static void put_scenario_cases(struct rbuf *b, const cJSON *result, const cJSON *scs,
                               const char *cls)
{
    const cJSON *sc;
    cJSON_ArrayForEach(sc, scs) {
        rbuf_printf(b, "    <testcase classname=\"%s\" name=\"", cls);
        rbuf_esc(b, rd_str(sc, "name") ? rd_str(sc, "name") : "unnamed", 200);
        double rep = rd_num(sc, "repeat");
        if (rep > 0)
            rbuf_printf(b, ".r%.0f", rep);
        rbuf_puts(b, "\" time=\"");
        put_seconds(b, rd_num(sc, "duration_ms"));
        if (!rundir_failed(sc)) {
            rbuf_puts(b, "\"/>\n");
            continue;
        }
        char witness[2048], sig[128];
        rundir_first_witness(sc, witness, sizeof(witness), sig, sizeof(sig));
        rbuf_puts(b, "\">\n      <failure message=\"");
        rbuf_esc(b, witness, 1000);
        rbuf_puts(b, "\" type=\"");
        rbuf_esc(b, sig, 100);
        rbuf_puts(b, "\">");
        put_failure_text(b, result, sc);
        rbuf_puts(b, "</failure>\n    </testcase>\n");
    }
}

/* A surviving mutant: which scenarios it got past. */
static void put_survivor(struct rbuf *b, const cJSON *m)
{
    rbuf_puts(b, "\">\n      <failure message=\"survived: ");
    const cJSON *s;
    int n = 0;
    cJSON_ArrayForEach(s, rd_get(m, "scenarios")) {
        rbuf_puts(b, n++ ? ", " : "");
        rbuf_esc(b, rd_str(s, "name"), 100);
    }
    rbuf_puts(b, n ? " passed against it" : "no scenario ran against it");
    rbuf_puts(b, "\" type=\"survived\">");
    rbuf_esc(b, rd_str(m, "mistake"), 500);
    rbuf_puts(b, "\nno scenario aimed at this mistake failed: the harness cannot see it\n"
                 "</failure>\n    </testcase>\n");
}

/* One <testcase> per mutant: killed passes, survived fails, an error (the
 * build or the run) is an <error>. */
static void put_mutant_cases(struct rbuf *b, const cJSON *mutants)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, mutants) {
        rbuf_puts(b, "    <testcase classname=\"crashwindow.mutants\" name=\"");
        rbuf_esc(b, rd_str(m, "name") ? rd_str(m, "name") : "unnamed", 200);
        const char *err = rd_str(m, "error");
        if (err != NULL) {
            rbuf_puts(b, "\">\n      <error message=\"");
            rbuf_esc(b, err, 1000);
            rbuf_puts(b, "\" type=\"error\"/>\n    </testcase>\n");
        } else if (cJSON_IsTrue(rd_get(m, "killed"))) {
            rbuf_puts(b, "\"/>\n");
        } else {
            put_survivor(b, m);
        }
    }
}

static int count_failed(const cJSON *scs)
{
    int n = 0;
    const cJSON *sc;
    cJSON_ArrayForEach(sc, scs)
        n += rundir_failed(sc);
    return n;
}

static double sum_ms(const cJSON *items)
{
    double t = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
        t += rd_num(it, "duration_ms");
    return t;
}

/* <properties>: where the result came from. */
static void put_properties(struct rbuf *b, const cJSON *result)
{
    rbuf_puts(b, "    <properties>\n      <property name=\"commit\" value=\"");
    rbuf_esc(b, rd_str(result, "commit") ? rd_str(result, "commit") : "unknown", 100);
    rbuf_puts(b, "\"/>\n");
    const cJSON *sh = rd_get(result, "shard");
    if (cJSON_IsObject(sh))
        rbuf_printf(b, "      <property name=\"shard\" value=\"%.0f/%.0f\"/>\n",
                    rd_num(sh, "index"), rd_num(sh, "count"));
    const char *target = rd_str(rd_get(result, "target"), "name");
    if (target != NULL) {
        rbuf_puts(b, "      <property name=\"target\" value=\"");
        rbuf_esc(b, target, 100);
        rbuf_puts(b, "\"/>\n");
    }
    const cJSON *mg = rd_get(result, "merged");
    if (cJSON_IsObject(mg))
        rbuf_printf(b, "      <property name=\"merged_shards\" value=\"%.0f\"/>\n",
                    rd_num(mg, "count"));
    const cJSON *seed = rd_get(rd_get(result, "simulator"), "seed");
    if (cJSON_IsNumber(seed))
        rbuf_printf(b, "      <property name=\"seed\" value=\"%.0f\"/>\n", seed->valuedouble);
    else if (cJSON_IsString(seed)) {
        rbuf_puts(b, "      <property name=\"seed\" value=\"");
        rbuf_esc(b, seed->valuestring, 40);
        rbuf_puts(b, "\"/>\n");
    }
    rbuf_puts(b, "    </properties>\n");
}

static void put_suite_head(struct rbuf *b, const cJSON *result, const char *name, int tests,
                           int failures, int errors, double ms)
{
    rbuf_printf(b, "  <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\" errors=\"%d\" "
                   "skipped=\"0\" time=\"", name, tests, failures, errors);
    put_seconds(b, ms);
    rbuf_puts(b, "\" timestamp=\"");
    /* JUnit wants ISO 8601 without a zone suffix. */
    char ts[40] = "";
    snprintf(ts, sizeof(ts), "%.19s", rd_str(result, "started_at") ? rd_str(result, "started_at")
                                                                 : "");
    rbuf_esc(b, ts, 40);
    rbuf_puts(b, "\" hostname=\"");
    rbuf_esc(b, rd_str(rd_get(result, "machine"), "hostname") ? rd_str(rd_get(result, "machine"),
                                                                 "hostname") : "unknown", 200);
    rbuf_puts(b, "\">\n");
    put_properties(b, result);
}

static void build(struct rbuf *b, const cJSON *result)
{
    const char *kind = rd_str(result, "kind") ? rd_str(result, "kind") : "run";
    const cJSON *scs = rd_get(result, "scenarios");
    const cJSON *muts = rd_get(result, "mutants");
    int ismut = strcmp(kind, "mutants") == 0;
    int nsc = cJSON_GetArraySize(scs), fsc = count_failed(scs);
    int nm = 0, fm = 0, em = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, muts) {
        nm++;
        if (rd_str(m, "error") != NULL)
            em++;
        else
            fm += !cJSON_IsTrue(rd_get(m, "killed"));
    }
    rbuf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"crashwindow ");
    rbuf_esc(b, kind, 40);
    rbuf_printf(b, "\" tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"", nsc + nm,
                fsc + fm, em);
    put_seconds(b, rd_num(result, "duration_ms"));
    rbuf_puts(b, "\">\n");
    char cls[64];
    snprintf(cls, sizeof(cls), "crashwindow.%s", strcmp(kind, "sim") == 0 ? "sim"
             : ismut ? "mutants.baseline" : "run");
    put_suite_head(b, result, cls, nsc, fsc, 0, sum_ms(scs));
    put_scenario_cases(b, result, scs, cls);
    rbuf_puts(b, "  </testsuite>\n");
    if (ismut) {
        put_suite_head(b, result, "crashwindow.mutants", nm, fm, em, 0);
        put_mutant_cases(b, muts);
        rbuf_puts(b, "  </testsuite>\n");
    }
    rbuf_puts(b, "</testsuites>\n");
}

int junit_write(const cJSON *result, const char *path, char *err, size_t errlen)
{
    struct rbuf b;
    rbuf_init(&b, JUNIT_MAX_BYTES);
    build(&b, result);
    int rc = -1;
    if (b.overflow)
        snprintf(err, errlen, "the JUnit file would exceed %u bytes", JUNIT_MAX_BYTES);
    else
        rc = cw_write_text(path, b.data, 0, err, errlen);
    rbuf_free(&b);
    return rc;
}
