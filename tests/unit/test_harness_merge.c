/* test_harness_merge.c -- unit tests of sharding and of what is written from
 * a run directory: K/N parsing and the environment of CI matrices and
 * Kubernetes Indexed Jobs, the split (every item in exactly one share, for
 * many N), the digest, the first witness, and JUnit XML built from a
 * result.json (escaping included).  The merge itself runs against real
 * shard directories in tests/py/test_shards.py. */
#include "junit.h"
#include "merge_internal.h"
#include "rundir.h"
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int parses(const char *text, int k, int n)
{
    struct shard sh = { 0, 0 };
    char err[256];
    return shard_parse(text, &sh, err, sizeof(err)) == 0 && sh.index == k && sh.count == n;
}

/* shard_arg(text) fails and its message holds every needle. */
static int refused(const char *text, const char *needle1, const char *needle2)
{
    struct shard sh = { 7, 7 };
    char err[512] = "";
    int rc = shard_arg(text, &sh, err, sizeof(err));
    int ok = rc < 0 && sh.index == 7 && strstr(err, needle1) != NULL &&
             (needle2 == NULL || strstr(err, needle2) != NULL);
    if (!ok)
        fprintf(stderr, "  shard_arg(%s): rc %d, '%s'\n", text, rc, err);
    return ok;
}

static void test_parse(void)
{
    CHECK(parses("1/1", 1, 1));
    CHECK(parses("2/3", 2, 3));
    CHECK(parses("3/3", 3, 3));
    CHECK(parses("10000/10000", 10000, 10000));
    CHECK(refused("0/3", "K counts from 1", "1/3 to 3/3"));
    CHECK(refused("4/3", "K is past N", NULL));
    CHECK(refused("a/b", "'a/b' is not K/N", NULL));
    CHECK(refused("1/0", "N must be from 1", NULL));
    CHECK(refused("1/10001", "N must be from 1 to 10000", NULL));
    CHECK(refused("-1/3", "not K/N", NULL));
    CHECK(refused("+1/3", "not K/N", NULL));
    CHECK(refused(" 1/3", "not K/N", NULL));
    CHECK(refused("1/3 ", "not K/N", NULL));
    CHECK(refused("13", "not K/N", NULL));
    CHECK(refused("1/2/3", "not K/N", NULL));
    CHECK(refused("", "not K/N", NULL));
    CHECK(refused("/", "not K/N", NULL));
    CHECK(refused("99999999999/3", "not K/N", NULL));
}

static void clear_env(void)
{
    static const char *const vars[] = { "CW_SHARD", "JOB_COMPLETION_INDEX", "CW_SHARD_COUNT",
                                        "CI_NODE_INDEX", "CI_NODE_TOTAL" };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

static int from_env(int k, int n)
{
    struct shard sh = { 0, 0 };
    char err[512];
    int rc = shard_arg("env", &sh, err, sizeof(err));
    if (rc < 0)
        fprintf(stderr, "  env: %s\n", err);
    return rc == 0 && sh.index == k && sh.count == n;
}

static void test_env(void)
{
    clear_env();
    CHECK(refused("env", "none of CW_SHARD", NULL));
    /* Kubernetes counts from 0 */
    setenv("JOB_COMPLETION_INDEX", "0", 1);
    CHECK(refused("env", "JOB_COMPLETION_INDEX=0 is set but CW_SHARD_COUNT is not", NULL));
    setenv("CW_SHARD_COUNT", "3", 1);
    CHECK(from_env(1, 3));
    setenv("JOB_COMPLETION_INDEX", "2", 1);
    CHECK(from_env(3, 3));
    setenv("JOB_COMPLETION_INDEX", "3", 1);
    CHECK(refused("env", "JOB_COMPLETION_INDEX=3", "K is past N"));
    setenv("JOB_COMPLETION_INDEX", "x", 1);
    CHECK(refused("env", "both must be whole numbers", NULL));
    clear_env();
    /* GitLab counts from 1 */
    setenv("CI_NODE_INDEX", "2", 1);
    setenv("CI_NODE_TOTAL", "4", 1);
    CHECK(from_env(2, 4));
    setenv("CI_NODE_INDEX", "0", 1);
    CHECK(refused("env", "CI_NODE_INDEX=0", "K counts from 1"));
    /* CW_SHARD wins over the others */
    setenv("CW_SHARD", "1/2", 1);
    CHECK(from_env(1, 2));
    setenv("CW_SHARD", "3/2", 1);
    CHECK(refused("env", "CW_SHARD 3/2", "K is past N"));
    clear_env();
}

/* Every item of 0..items-1 falls in exactly one share of N, and the shares
 * differ in size by one at most; the ranges of runs tile 1..R. */
static void test_split(void)
{
    for (int n = 1; n <= 9; n++) {
        for (long items = n; items <= 40; items += 3) {
            int min = 1 << 30, max = 0, bad = 0;
            long covered = 0, next = 1;
            for (int k = 1; k <= n; k++) {
                struct shard sh = { k, n };
                int size = 0;
                for (long i = 0; i < items; i++)
                    size += shard_mine(&sh, i);
                min = size < min ? size : min;
                max = size > max ? size : max;
                covered += size;
                long first, last;
                shard_range(&sh, items, &first, &last);
                bad |= first != next || last < first || last > items;
                next = last + 1;
            }
            for (long i = 0; i < items; i++) {
                int owners = 0;
                for (int k = 1; k <= n; k++) {
                    struct shard sh = { k, n };
                    owners += shard_mine(&sh, i);
                }
                bad |= owners != 1;
            }
            CHECK(!bad && covered == items && max - min <= 1 && next == items + 1);
        }
    }
    struct shard none = { 0, 0 };
    long first, last;
    shard_range(&none, 50, &first, &last);
    CHECK(first == 1 && last == 50 && shard_mine(&none, 12));
    struct shard s2 = { 2, 4 };
    shard_range(&s2, 10, &first, &last);
    CHECK(first == 3 && last == 5);
}

/* Longest first, each to the least loaded share; equal weights are round
 * robin; every item gets a share. */
static void test_plan(void)
{
    int plan[16];
    const double w[] = { 5, 4, 3, 3, 3 };
    shard_plan(w, 5, 2, plan);
    CHECK(plan[0] == 1 && plan[1] == 2 && plan[2] == 2 && plan[3] == 1 && plan[4] == 2);
    const double eq[] = { 7, 7, 7, 7, 7, 7, 7 };
    shard_plan(eq, 7, 3, plan);
    int rr[7];
    shard_plan(NULL, 7, 3, rr);
    CHECK(memcmp(plan, rr, sizeof(rr)) == 0 && rr[0] == 1 && rr[3] == 1 && rr[5] == 3);
    /* the suite's durations: four shards end within one long scenario */
    const double d[] = { 314, 289, 1901, 1246, 736, 315, 1267, 755, 1277, 369, 256, 247,
                         1285, 637, 1267 };
    shard_plan(d, 15, 4, plan);
    double load[4] = { 0 };
    for (int i = 0; i < 15; i++) {
        CHECK(plan[i] >= 1 && plan[i] <= 4);
        load[plan[i] - 1] += d[i];
    }
    double lo = load[0], hi = load[0];
    for (int k = 1; k < 4; k++) {
        lo = load[k] < lo ? load[k] : lo;
        hi = load[k] > hi ? load[k] : hi;
    }
    CHECK(hi - lo <= 1901);
    shard_plan(d, 15, 1, plan);
    CHECK(plan[0] == 1 && plan[14] == 1);
}

static void test_digest(void)
{
    uint64_t a = shard_digest(shard_digest(SHARD_DIGEST_INIT, "ab"), "c");
    uint64_t b = shard_digest(shard_digest(SHARD_DIGEST_INIT, "a"), "bc");
    uint64_t c = shard_digest(shard_digest(SHARD_DIGEST_INIT, "ab"), "c");
    CHECK(a != b && a == c);
    char hex[24];
    shard_digest_hex(a, hex, sizeof(hex));
    CHECK_EQ_INT(strlen(hex), 16);
    CHECK(merge_sim_index("sim-7-12", hex, sizeof(hex)) == 12 && strcmp(hex, "7") == 0);
    CHECK(merge_sim_index("sim-7-", NULL, 0) < 0 && merge_sim_index("04-x", NULL, 0) < 0);
    CHECK(merge_sim_index("sim-7-1x", NULL, 0) < 0 && merge_sim_index("sim--3", NULL, 0) < 0);
    CHECK(rundir_safe_rel("a/b") && !rundir_safe_rel("../a") && !rundir_safe_rel("/a") &&
          !rundir_safe_rel("a/../b") && rundir_safe_rel("a/..b"));
}

static const char failing_result[] =
    "{\"tool\":\"crashwindow\",\"kind\":\"run\",\"verdict\":\"fail\",\"commit\":\"abc\","
    "\"started_at\":\"2026-01-01T00:00:00.000Z\",\"machine\":{\"hostname\":\"h<1>\"},"
    "\"shard\":{\"index\":2,\"count\":3},\"scenarios\":["
    "{\"name\":\"ok-one\",\"verdict\":\"pass\",\"duration_ms\":1500,\"invariants\":[],"
    "\"expect\":[],\"error\":null},"
    "{\"name\":\"bad-one\",\"verdict\":\"fail\",\"duration_ms\":20,\"error\":null,"
    "\"invariants\":[{\"name\":\"nothing_lost\",\"verdict\":\"pass\",\"witnesses\":[]},"
    "{\"name\":\"effect_once\",\"verdict\":\"fail\",\"violations\":2,\"checked\":4,"
    "\"witnesses\":[\"event <x> & \\\"y\\\" applied\\u0001 2 times\",\"second\"]}],"
    "\"expect\":[]},"
    "{\"name\":\"exp-one\",\"verdict\":\"fail\",\"error\":null,\"invariants\":[],"
    "\"expect\":[{\"check\":\"effects\",\"verdict\":\"fail\",\"detail\":\"effects = 3 (want = 5)\"}]},"
    "{\"name\":\"err-one\",\"verdict\":\"fail\",\"error\":\"heal: no convergence\","
    "\"invariants\":[],\"expect\":[]}]}";

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_witness_and_junit(void)
{
    cJSON *res = cJSON_Parse(failing_result);
    CHECK(res != NULL);
    const cJSON *scs = cJSON_GetObjectItemCaseSensitive(res, "scenarios");
    char w[512], sig[64];
    CHECK(!rundir_failed(cJSON_GetArrayItem(scs, 0)));
    CHECK(rundir_failed(cJSON_GetArrayItem(scs, 1)));
    rundir_first_witness(cJSON_GetArrayItem(scs, 1), w, sizeof(w), sig, sizeof(sig));
    CHECK(strncmp(w, "effect_once: event <x>", 22) == 0 && strcmp(sig, "effect_once") == 0);
    rundir_first_witness(cJSON_GetArrayItem(scs, 2), w, sizeof(w), sig, sizeof(sig));
    CHECK_EQ_STR(w, "expectation effects: effects = 3 (want = 5)");
    CHECK_EQ_STR(sig, "expectation");
    rundir_first_witness(cJSON_GetArrayItem(scs, 3), w, sizeof(w), sig, sizeof(sig));
    CHECK(strcmp(w, "error: heal: no convergence") == 0 && strcmp(sig, "error") == 0);

    char dir[] = "/tmp/cwjunitXXXXXX", path[64], err[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/junit.xml", dir);
    CHECK_EQ_INT(junit_write(res, path, err, sizeof(err)), 0);
    const char *x = slurp(path);
    CHECK(x != NULL && strstr(x, "<testsuites name=\"crashwindow run\" tests=\"4\" "
                                 "failures=\"3\"") != NULL);
    CHECK(x != NULL && strstr(x, "name=\"ok-one\" time=\"1.500\"/>") != NULL);
    /* the first witness, escaped, as the message; the control byte replaced */
    CHECK(x != NULL && strstr(x, "message=\"effect_once: event &lt;x&gt; &amp; &quot;y&quot; "
                                 "applied\xEF\xBF\xBD 2 times\" type=\"effect_once\"") != NULL);
    CHECK(x != NULL && strstr(x, "hostname=\"h&lt;1&gt;\"") != NULL);
    CHECK(x != NULL && strstr(x, "<property name=\"shard\" value=\"2/3\"/>") != NULL);
    CHECK(x != NULL && strstr(x, "\x01") == NULL);
    /* an unwritable place is an error, not a crash */
    CHECK(junit_write(res, "/nonexistent-dir/x.xml", err, sizeof(err)) < 0 &&
          strstr(err, "/nonexistent-dir/x.xml") != NULL);
    unlink(path);
    rmdir(dir);
    cJSON_Delete(res);
}

static void test_load_errors(void)
{
    char dir[] = "/tmp/cwrundirXXXXXX", path[64], err[512];
    CHECK(mkdtemp(dir) != NULL);
    CHECK(rundir_load(dir, err, sizeof(err)) == NULL && strstr(err, "missing") != NULL);
    snprintf(path, sizeof(path), "%s/result.json", dir);
    static const struct { const char *text, *needle; } cases[] = {
        { "", "is empty" },
        { "{\"tool\":\"crashwindow\",\"kind\":\"run\",\"verd", "cut short" },
        { "[1,2]", "not a JSON object" },
        { "{\"tool\":\"other\"}", "not a crashwindow result" },
        { "{\"tool\":\"crashwindow\",\"kind\":\"run\",\"verdict\":\"pass\"}", "\"scenarios\"" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(path, "w");
        fputs(cases[i].text, f);
        fclose(f);
        cJSON *r = rundir_load(dir, err, sizeof(err));
        CHECK(r == NULL && strstr(err, cases[i].needle) != NULL);
        if (r != NULL || strstr(err, cases[i].needle) == NULL)
            fprintf(stderr, "  case %zu: %s\n", i, err);
        cJSON_Delete(r);
    }
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_parse();
    test_env();
    test_split();
    test_plan();
    test_digest();
    test_witness_and_junit();
    test_load_errors();
    return check_report("test_harness_merge");
}
