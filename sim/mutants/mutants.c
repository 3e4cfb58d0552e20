/* mutants.c -- `crashwindow mutants`: a harness that cannot fail proves nothing.
 *
 *   crashwindow mutants [--only NAME...] [--out DIR] [--pg CONNINFO] [--list]
 *
 * Each mutant is a known-wrong variant of the real code, compiled in with
 * -DCW_MUTANT=<name> (which defines CW_MUTANT_<name> for every target) and
 * built into build-mutant-<name>/ next to this binary's build tree.  Only the
 * binaries whose sources mention the mutant are rebuilt; every other binary,
 * and always the fake broker (it is the harness, not the system under test),
 * comes from the unmutated build.
 *
 * The command first runs every scenario against the unmutated build (it must
 * pass: otherwise a "kill" would prove nothing), then, for each mutant, the
 * scenarios that aim at its mistake.  A mutant is killed when at least one of
 * them fails; the matrix names, for each kill, the invariant (or
 * expectation) that caught it and an offending row.  One throwaway cluster
 * serves every run.
 *
 * Output: DIR/result.json is the baseline run's result with kind "mutants"
 * and a "mutants" array; each mutant's runs live in DIR/mutants/<name>/.
 * Exit status: 0 when the baseline passes and every mutant is killed, 1
 * otherwise, 2 on bad usage. */
#include "mutants.h"
#include "runner.h"
#include "cwlog.h"
#include "procs.h"
#include "runner_db.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Each mutant and the scenarios that aim at its mistake. */
struct mutant {
    const char *name;
    const char *mistake;
    const char *scenarios[4];
};

static const struct mutant MUTANTS[] = {
    { "dual_write", "the API publishes straight to the broker and writes no outbox row",
      { "01-command-rollback", "02-crash-after-commit" } },
    { "publish_before_commit", "the API publishes, then commits: a rollback leaves a ghost",
      { "01-command-rollback" } },
    { "publish_in_claim_tx", "the relay publishes inside the claim's transaction",
      { "04-crash-after-publish", "09-expired-lease" } },
    { "new_id_per_attempt", "each publish attempt gets a fresh message id",
      { "04-crash-after-publish", "13-stale-worker" } },
    { "select_then_insert_inbox", "the inbox is checked with SELECT, then INSERTed unarbitrated",
      { "05-concurrent-duplicate" } },
    { "inbox_separate_tx", "the inbox marker commits in its own transaction",
      { "06-crash-before-ack" } },
    { "ack_before_commit", "the consumer ACKs, then commits",
      { "06-crash-before-ack" } },
    { "mark_without_owner_check", "marking published ignores lock_id",
      { "13-stale-worker" } },
    { "claim_ignores_lease", "the claim ignores locked_until",
      { "03-two-relays", "13-stale-worker" } },
    { "no_dead_letter_limit", "poison messages retry forever",
      { "08-poison-message" } },
    { "retry_not_persisted", "a failed publish is retried at once, next_attempt_at unchanged",
      { "07-broker-down" } },
    { "trace_as_inbox_key", "the inbox key is the trace id",
      { "02-crash-after-commit", "06-crash-before-ack" } },
    { "blind_version_apply", "the consumer applies any version it receives",
      { "10-per-aggregate-order" } },
    { "unsanitized_last_error", "the raw error, secrets included, goes into last_error",
      { "08-poison-message" } },
    { "idempotency_without_hash", "a reused key with another body replays the old response",
      { "11-http-retry-after-crash" } },
};
#define NMUTANTS ((int)(sizeof(MUTANTS) / sizeof(MUTANTS[0])))

/* Binaries of the system under test, by the src/ folder that builds them. */
static const struct {
    const char *dir;
    const char *target;
} TARGETS[] = {
    { "api", "payments-api" },
    { "relay", "outbox-relay" },
    { "consumer", "accounting-consumer" },
    { "outboxctl", "outboxctl" },
};
#define NTARGETS ((int)(sizeof(TARGETS) / sizeof(TARGETS[0])))

__attribute__((format(printf, 3, 4)))
static int fmt(char *out, size_t outlen, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int n = vsnprintf(out, outlen, format, ap);
    va_end(ap);
    return n;
}

static int file_mentions(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* 1 when a .c file of folder dir mentions needle. */
static int dir_mentions(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int found = 0;
    struct dirent *de;
    for (de = readdir(d); de != NULL && !found; de = readdir(d)) {
        size_t len = strlen(de->d_name);
        if (len < 3 || strcmp(de->d_name + len - 2, ".c") != 0)
            continue;
        char path[PATH_MAX + 256];
        fmt(path, sizeof(path), "%s/%s", dir, de->d_name);
        found = file_mentions(path, needle);
    }
    closedir(d);
    return found;
}

/* The build targets whose sources mention CW_MUTANT_<name>, into targets[]
 * (a file of a shared folder, src/core or src/bus, means every binary).
 * Returns the count; 0 when no source implements the mutant. */
static int mutant_targets(const char *name, const char **targets)
{
    char needle[96], src[PATH_MAX], dir[PATH_MAX + 256];
    snprintf(needle, sizeof(needle), "CW_MUTANT_%s", name);
    fmt(src, sizeof(src), "%s/src", runner_source_dir());
    DIR *d = opendir(src);
    if (d == NULL)
        return 0;
    int want[NTARGETS] = { 0 }, any = 0, shared = 0;
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d)) {
        if (de->d_name[0] == '.')
            continue;
        fmt(dir, sizeof(dir), "%s/%s", src, de->d_name);
        if (!dir_mentions(dir, needle))
            continue;
        any = 1;
        int matched = 0;
        for (int i = 0; i < NTARGETS; i++) {
            if (strcmp(de->d_name, TARGETS[i].dir) == 0) {
                want[i] = 1;
                matched = 1;
            }
        }
        shared |= !matched;
    }
    closedir(d);
    int n = 0;
    for (int i = 0; i < NTARGETS && any; i++)
        if (want[i] || shared)
            targets[n++] = TARGETS[i].target;
    return n;
}

/* Configures a mutant's build tree (blocking: a few seconds), then starts
 * building its targets in the background, so the build overlaps the previous
 * mutant's scenarios, which mostly wait.  -j1 leaves a core to the runs.
 * 0 with b running, or -1 with the reason in err. */
static int build_start(const char *name, const char *build_dir, const char **targets, int nt,
                       struct proc *b, char *err, size_t errlen)
{
    static char out[65536];
    char def[128];
    snprintf(def, sizeof(def), "-DCW_MUTANT=%s", name);
    char *conf[] = { (char *)"/usr/bin/cmake", (char *)"-S", (char *)runner_source_dir(),
                     (char *)"-B", (char *)build_dir, def, NULL };
    int rc = proc_run_capture(conf, NULL, 300000, out, sizeof(out));
    FILE *log = fopen(b->log_path, "w");
    if (log != NULL) {
        fprintf(log, "$ cmake -S %s -B %s %s\n", runner_source_dir(), build_dir, def);
        fprintf(log, "%s\n", out);
        fclose(log);
    }
    if (rc != 0) {
        fmt(err, errlen, "cmake configure failed (%d), see %s", rc, b->log_path);
        return -1;
    }
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)"/usr/bin/cmake";
    argv[n++] = (char *)"--build";
    argv[n++] = (char *)build_dir;
    argv[n++] = (char *)"-j1";
    argv[n++] = (char *)"--target";
    for (int i = 0; i < nt; i++)
        argv[n++] = (char *)targets[i];
    argv[n] = NULL;
    return proc_spawn(b, argv, NULL, NULL, err, errlen);
}

/* Waits for a background build; 0 when it succeeded. */
static int build_finish(struct proc *b, char *err, size_t errlen)
{
    if (proc_wait_exit(b, 900000) < 0) {
        proc_kill(b);
        fmt(err, errlen, "build did not finish within 15 minutes, see %s", b->log_path);
        return -1;
    }
    char how[64];
    proc_exit_text(b, how, sizeof(how));
    if (strcmp(how, "exit status 0") != 0) {
        fmt(err, errlen, "build failed (%s), see %s", how, b->log_path);
        return -1;
    }
    return 0;
}

static void print_matrix(cJSON *mutants, const char *const *cols, int ncols)
{
    printf("\nmutant x scenario (K killed, . survived, blank not run)\n");
    printf("%-26s", "");
    for (int c = 0; c < ncols; c++)
        printf(" %.2s", cols[c]);
    printf("   verdict\n");
    const cJSON *m;
    cJSON_ArrayForEach(m, mutants) {
        printf("%-26s", cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring);
        const cJSON *scs = cJSON_GetObjectItemCaseSensitive(m, "scenarios");
        for (int c = 0; c < ncols; c++) {
            const char *cell = "  ";
            const cJSON *s;
            cJSON_ArrayForEach(s, scs) {
                if (strcmp(cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring, cols[c]) != 0)
                    continue;
                cell = strcmp(cJSON_GetObjectItemCaseSensitive(s, "verdict")->valuestring, "fail") == 0
                           ? " K" : " .";
            }
            printf(" %s", cell);
        }
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(m, "error");
        printf("   %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "killed")) ? "killed"
                          : cJSON_IsString(err) ? "ERROR" : "SURVIVED");
    }
    printf("\n");
    cJSON_ArrayForEach(m, mutants) {
        const char *name = cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring;
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(m, "error");
        if (cJSON_IsString(err)) {
            printf("%s: %s\n", name, err->valuestring);
            continue;
        }
        const cJSON *s;
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(m, "scenarios")) {
            const cJSON *by = cJSON_GetObjectItemCaseSensitive(s, "killed_by");
            if (cJSON_GetArraySize(by) == 0)
                continue;
            printf("%s: killed by %s: ", name,
                   cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring);
            const cJSON *b;
            int first = 1;
            cJSON_ArrayForEach(b, by) {
                printf("%s%s", first ? "" : ", ", b->valuestring);
                first = 0;
            }
            const cJSON *w = cJSON_GetObjectItemCaseSensitive(s, "witness");
            printf("\n    e.g. %s\n", cJSON_IsString(w) ? w->valuestring : "");
        }
    }
}

/* What made one scenario of a mutant run fail: invariant names, then
 * "expect:<check>" and "error"; the witness is the first concrete row. */
static cJSON *scenario_cell(const cJSON *sc)
{
    cJSON *cell = cJSON_CreateObject();
    cJSON_AddStringToObject(cell, "name", cJSON_GetObjectItemCaseSensitive(sc, "name")->valuestring);
    const char *verdict = cJSON_GetObjectItemCaseSensitive(sc, "verdict")->valuestring;
    cJSON_AddStringToObject(cell, "verdict", verdict);
    cJSON *by = cJSON_AddArrayToObject(cell, "killed_by");
    const char *witness = NULL;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sc, "invariants")) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "verdict")->valuestring, "pass") == 0)
            continue;
        cJSON_AddItemToArray(by, cJSON_CreateString(
            cJSON_GetObjectItemCaseSensitive(it, "name")->valuestring));
        const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "witnesses"), 0);
        if (witness == NULL && cJSON_IsString(w))
            witness = w->valuestring;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sc, "expect")) {
        if (strcmp(cJSON_GetObjectItemCaseSensitive(it, "verdict")->valuestring, "pass") == 0)
            continue;
        char name[128];
        snprintf(name, sizeof(name), "expect:%s",
                 cJSON_GetObjectItemCaseSensitive(it, "check")->valuestring);
        cJSON_AddItemToArray(by, cJSON_CreateString(name));
        if (witness == NULL)
            witness = cJSON_GetObjectItemCaseSensitive(it, "detail")->valuestring;
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(sc, "error");
    if (cJSON_IsString(err)) {
        cJSON_AddItemToArray(by, cJSON_CreateString("error"));
        if (witness == NULL)
            witness = err->valuestring;
    }
    if (strcmp(verdict, "fail") == 0 && cJSON_GetArraySize(by) == 0)
        cJSON_AddItemToArray(by, cJSON_CreateString("verdict"));
    if (witness != NULL)
        cJSON_AddStringToObject(cell, "witness", witness);
    else
        cJSON_AddNullToObject(cell, "witness");
    return cell;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow mutants [--only NAME...] [--out DIR] [--pg CONNINFO] [--list]\n"
        "  --only NAME  this mutant only (repeatable)\n"
        "  --out DIR    output directory (default reports/mutants-<timestamp>)\n"
        "  --pg         use this PostgreSQL server instead of a throwaway cluster\n"
        "  --list       print the mutants and the scenarios aimed at each, do nothing\n"
        "exit status: 0 the unmutated build passes and every mutant is killed, 1 not, 2 bad usage\n");
}

int mutants_main(int argc, char **argv)
{
    const char *only[NMUTANTS + 1];
    int nonly = 0, list = 0;
    const char *out_arg = NULL, *pg_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            const char *n = argv[++i];
            int known = 0;
            for (int k = 0; k < NMUTANTS; k++)
                known |= strcmp(MUTANTS[k].name, n) == 0;
            if (!known || nonly == NMUTANTS) {
                fprintf(stderr, "crashwindow mutants: unknown mutant '%s' (see --list)\n", n);
                return 2;
            }
            only[nonly++] = n;
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_arg = argv[++i];
        } else if (strcmp(argv[i], "--pg") == 0 && i + 1 < argc) {
            pg_arg = argv[++i];
        } else if (strcmp(argv[i], "--list") == 0) {
            list = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "crashwindow mutants: unknown option or missing value: '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (list) {
        for (int k = 0; k < NMUTANTS; k++) {
            printf("%-26s %s\n%-26s scenarios:", MUTANTS[k].name, MUTANTS[k].mistake, "");
            for (int j = 0; j < 4 && MUTANTS[k].scenarios[j]; j++)
                printf(" %s", MUTANTS[k].scenarios[j]);
            printf("\n");
        }
        return 0;
    }
    runner_install_signals();
    int64_t t0 = cw_mono_ms();
    char build[PATH_MAX], parent[PATH_MAX], out[PATH_MAX], err[1024];
    if (runner_build_dir(build, sizeof(build)) < 0) {
        fprintf(stderr, "crashwindow mutants: cannot tell where this build is\n");
        return 2;
    }
    snprintf(parent, sizeof(parent), "%s", build);
    char *slash = strrchr(parent, '/');
    if (slash != NULL)
        *slash = '\0';
    if (out_arg != NULL) {
        snprintf(out, sizeof(out), "%s", out_arg);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        fmt(out, sizeof(out), "%s/reports/mutants-%s", runner_source_dir(), stamp);
    }

    /* One cluster for every run. */
    struct rdb db;
    memset(&db, 0, sizeof(db));
    char script[PATH_MAX];
    fmt(script, sizeof(script), "%s/scripts/pg-cluster", runner_source_dir());
    if (pg_arg == NULL && rdb_start_cluster(&db, script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow mutants: %s\n", err);
        return 1;
    }
    const char *pg = pg_arg != NULL ? pg_arg : db.admin;

    /* The unmutated build must pass everything first. */
    printf("crashwindow mutants: baseline: every scenario against %s\n", build);
    fflush(stdout);
    struct run_opts base;
    memset(&base, 0, sizeof(base));
    base.all = 1;
    base.pg = pg;
    base.out = out;
    base.bin = build;
    base.repeat = 1;
    base.brief = 1;
    cJSON *result = NULL;
    int base_rc = runner_run(&base, &result);
    if (result == NULL) {
        fprintf(stderr, "crashwindow mutants: the baseline run could not start\n");
        if (pg_arg == NULL)
            rdb_finish(&db, script, 0);
        return base_rc == 2 ? 2 : 1;
    }
    int ok = base_rc == 0;
    if (!ok)
        printf("crashwindow mutants: the UNMUTATED build fails; kills below prove nothing\n");

    /* The chosen mutants, their build trees and background builds. */
    int chosen[NMUTANTS], nchosen = 0;
    for (int k = 0; k < NMUTANTS; k++) {
        int c = nonly == 0;
        for (int j = 0; j < nonly; j++)
            c |= strcmp(only[j], MUTANTS[k].name) == 0;
        if (c)
            chosen[nchosen++] = k;
    }
    static struct proc builds[NMUTANTS];
    char build_err[NMUTANTS][512];
    int started[NMUTANTS] = { 0 };
    char mroot[PATH_MAX];
    fmt(mroot, sizeof(mroot), "%s/mutants", out);
    mkdir(out, 0755);
    mkdir(mroot, 0755);
    for (int i = 0; i < nchosen; i++) {
        const struct mutant *m = &MUTANTS[chosen[i]];
        char mdir[PATH_MAX];
        fmt(mdir, sizeof(mdir), "%s/%s", mroot, m->name);
        mkdir(mdir, 0755);
        memset(&builds[i], 0, sizeof(builds[i]));
        snprintf(builds[i].name, sizeof(builds[i].name), "build");
        fmt(builds[i].log_path, sizeof(builds[i].log_path), "%s/build.log", mdir);
        build_err[i][0] = '\0';
    }

    cJSON *mutants = cJSON_CreateArray();
    const char *cols[32];
    int ncols = 0;
    for (int i = 0; i < nchosen && !runner_interrupted(); i++) {
        const struct mutant *m = &MUTANTS[chosen[i]];
        cJSON *mo = cJSON_CreateObject();
        cJSON_AddStringToObject(mo, "name", m->name);
        cJSON_AddStringToObject(mo, "mistake", m->mistake);
        cJSON_AddItemToArray(mutants, mo);
        cJSON *scj = cJSON_AddArrayToObject(mo, "scenarios");
        printf("[%d/%d] mutant %s: %s\n", i + 1, nchosen, m->name, m->mistake);
        fflush(stdout);
        /* This mutant's build (started one round ago, or now), then the
         * next one's in the background. */
        for (int j = i; j <= i + 1 && j < nchosen; j++) {
            if (started[j])
                continue;
            started[j] = 1;
            const char *targets[NTARGETS];
            int nt = mutant_targets(MUTANTS[chosen[j]].name, targets);
            char mbuild[PATH_MAX];
            fmt(mbuild, sizeof(mbuild), "%s/build-mutant-%s", parent, MUTANTS[chosen[j]].name);
            if (nt == 0)
                snprintf(build_err[j], sizeof(build_err[j]), "no source file implements this mutant");
            else if (build_start(MUTANTS[chosen[j]].name, mbuild, targets, nt, &builds[j],
                                 build_err[j], sizeof(build_err[j])) < 0)
                started[j] = 2; /* failed before running */
        }
        const char *targets[NTARGETS];
        int nt = mutant_targets(m->name, targets);
        cJSON *tj = cJSON_AddArrayToObject(mo, "rebuilt");
        for (int t = 0; t < nt; t++)
            cJSON_AddItemToArray(tj, cJSON_CreateString(targets[t]));
        if (build_err[i][0] == '\0')
            build_finish(&builds[i], build_err[i], sizeof(build_err[i]));
        if (build_err[i][0] != '\0') {
            cJSON_AddBoolToObject(mo, "killed", 0);
            cJSON_AddStringToObject(mo, "error", build_err[i]);
            printf("    %s\n", build_err[i]);
            ok = 0;
            continue;
        }
        char files[4][PATH_MAX];
        const char *fp[4];
        int nf = 0;
        for (int j = 0; j < 4 && m->scenarios[j] != NULL; j++) {
            fmt(files[nf], sizeof(files[nf]), "%s/scenarios/%s.json", runner_source_dir(),
                m->scenarios[j]);
            fp[nf] = files[nf];
            nf++;
            int seen = 0;
            for (int c = 0; c < ncols; c++)
                seen |= strcmp(cols[c], m->scenarios[j]) == 0;
            if (!seen && ncols < 32)
                cols[ncols++] = m->scenarios[j];
        }
        char mdir[PATH_MAX], mbuild[PATH_MAX];
        fmt(mdir, sizeof(mdir), "%s/%s", mroot, m->name);
        fmt(mbuild, sizeof(mbuild), "%s/build-mutant-%s", parent, m->name);
        struct run_opts o;
        memset(&o, 0, sizeof(o));
        o.files = fp;
        o.nfiles = nf;
        o.pg = pg;
        o.out = mdir;
        o.bin = mbuild;
        o.bin_fallback = build;
        o.mutant = m->name;
        o.repeat = 1;
        o.brief = 1;
        /* A mutant only has to be caught, not waited out: bounded waits keep
         * the whole matrix within minutes.  Kills by a timeout alone are
         * shown as such ("error"), next to the invariants that broke. */
        o.heal_cap_ms = 6000;
        o.wait_cap_ms = 6000;
        cJSON *mres = NULL;
        runner_run(&o, &mres);
        int killed = 0;
        const cJSON *sc;
        cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(mres, "scenarios")) {
            cJSON *cell = scenario_cell(sc);
            killed |= strcmp(cJSON_GetObjectItemCaseSensitive(cell, "verdict")->valuestring,
                             "fail") == 0;
            cJSON_AddItemToArray(scj, cell);
        }
        cJSON_AddBoolToObject(mo, "killed", killed);
        cJSON_AddStringToObject(mo, "dir", mdir + strlen(out) + 1);
        if (mres == NULL) {
            cJSON_AddStringToObject(mo, "error", "the mutant's run could not start");
            ok = 0;
        }
        cJSON_Delete(mres);
        printf("    -> %s\n", killed ? "killed" : "SURVIVED");
        fflush(stdout);
        ok &= killed;
    }
    /* A build still running (interrupted): stop it. */
    for (int i = 0; i < nchosen; i++)
        if (started[i] == 1 && builds[i].running)
            proc_kill(&builds[i]);
    int total = nchosen;
    if (runner_interrupted())
        ok = 0;
    print_matrix(mutants, cols, ncols);

    int nkilled = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, mutants) {
        nkilled += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "killed"));
    }
    cJSON_ReplaceItemInObjectCaseSensitive(result, "kind", cJSON_CreateString("mutants"));
    cJSON_ReplaceItemInObjectCaseSensitive(result, "verdict", cJSON_CreateString(ok ? "pass" : "fail"));
    cJSON_ReplaceItemInObjectCaseSensitive(result, "duration_ms",
                                           cJSON_CreateNumber((double)(cw_mono_ms() - t0)));
    cJSON_AddStringToObject(result, "baseline_verdict", base_rc == 0 ? "pass" : "fail");
    cJSON_AddItemToObject(result, "mutants", mutants);
    char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
    fmt(path, sizeof(path), "%s/result.json", out);
    fmt(tmp, sizeof(tmp), "%s/.result.json.tmp", out);
    char *text = cJSON_Print(result);
    FILE *f = text ? fopen(tmp, "w") : NULL;
    if (f != NULL) {
        fputs(text, f);
        fputc('\n', f);
        if (fclose(f) == 0)
            rename(tmp, path);
    }
    cJSON_free(text);
    cJSON_Delete(result);
    if (pg_arg == NULL)
        rdb_finish(&db, script, 0);
    printf("crashwindow mutants: %s: baseline %s, %d/%d mutants killed in %.1f s\nresult: %s\n",
           ok ? "PASS" : "FAIL", base_rc == 0 ? "passes" : "FAILS", nkilled, total,
           (double)(cw_mono_ms() - t0) / 1000.0, path);
    return ok ? 0 : 1;
}
