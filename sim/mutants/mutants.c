/* mutants.c -- `crashwindow mutants`: a harness that cannot fail proves nothing.
 *
 *   crashwindow mutants [--only NAME...] [--full] [--out DIR] [--pg CONNINFO] [--list]
 *
 * Each mutant is a known-wrong variant of the real code, compiled in with
 * -DCW_MUTANT=<name> (which defines CW_MUTANT_<name> for every target) and
 * built into build-mutant-<name>/ next to this binary's build tree.  Only the
 * binaries whose sources mention the mutant are rebuilt; every other binary,
 * and always the fake broker (it is the harness, not the system under test),
 * comes from the unmutated build.
 *
 * The command first runs every scenario against the unmutated build (it must
 * pass: otherwise a "kill" would prove nothing), then each mutant against the
 * scenarios, with the baseline's own timeouts, in a fixed order: those aimed
 * at its mistake first, then every other scenario in file order -- never a
 * chosen subset.  The quick form stops at a mutant's first kill; --full runs
 * every mutant against every scenario and prints the matrix both ways (which
 * scenarios kill each mutant, which mutants each scenario kills).  A cell is
 * killed only when an invariant or an expectation failed; a scenario that
 * failed by a timeout or a harness error alone is "errored", which kills
 * nothing.  The matrix names, for each kill, the invariant (or expectation)
 * that caught it and an offending row.  One throwaway cluster serves every
 * run.
 *
 * Output: DIR/result.json is the baseline run's result with kind "mutants"
 * and a "mutants" array; each mutant's runs live in DIR/mutants/<name>/;
 * DIR/bundles/ holds a failure bundle per surviving mutant (and per failing
 * baseline scenario); --junit FILE writes one test case per mutant.
 *
 * --shard K/N splits the matrix over N machines: share K of the baseline's
 * scenarios and share K of the chosen mutants (each round robin, shard.h).
 * The baseline of the whole is then spread over the shards too; the merged
 * verdict (`crashwindow merge`) still says what an unsharded run says: the
 * whole baseline passed and every mutant was killed.
 * --target PROFILE runs black-box scenarios (scenarios/blackbox/ unless
 * files are named) against each build through a target profile instead:
 * the profile names the build's programs as ${bin:PROGRAM}, which the runner
 * fills from the mutant's tree, else from the unmutated build, exactly as it
 * picks our programs for a white-box run (sim/target/target.h).  What the
 * mutant breaks must then show from outside -- in the mapping's tables, the
 * broker log and what the workload's clients were told -- or it survives.
 * One throwaway RabbitMQ node serves every run, reset between scenarios.
 * Exit status: 0 when the baseline passes and every mutant is killed, 1
 * otherwise, 2 on bad usage. */
#include "mutants.h"
#include "common_fs.h"
#include "runner.h"
#include "cliutil.h"
#include "cwlog.h"
#include "fstree.h"
#include "jobs.h"
#include "procs.h"
#include "rundir.h"
#include "runner_db.h"
#include "shard.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MUTANT_MAX_SCENARIOS 8
#define CCACHE "/usr/bin/ccache"

/* Each mutant and the scenarios that aim at its mistake. */
struct mutant {
    const char *name;
    const char *mistake;
    const char *scenarios[MUTANT_MAX_SCENARIOS];
};

static const struct mutant MUTANTS[] = {
    { "dual_write", "the API publishes straight to the broker and writes no outbox row",
      { "01-command-rollback", "02-crash-after-commit" } },
    { "publish_before_commit", "the API publishes, then commits: a rollback leaves a ghost",
      { "01-command-rollback" } },
    { "capture_without_outbox_row", "a capture commits the payment's change without its outbox row",
      { "30-skewed-api-clock", "10-per-aggregate-order" } },
    { "publish_in_claim_tx", "the relay publishes inside the claim's transaction",
      { "04-crash-after-publish", "09-expired-lease" } },
    { "new_id_per_attempt", "each publish attempt gets a fresh event id (envelope and EventId)",
      { "04-crash-after-publish", "13-stale-worker", "17-backends-terminated" } },
    { "select_then_insert_inbox", "the inbox is checked with SELECT, then INSERTed unarbitrated",
      { "05-concurrent-duplicate" } },
    { "inbox_separate_tx", "the inbox marker commits in its own transaction",
      { "06-crash-before-ack", "17-backends-terminated" } },
    { "ack_before_commit", "the consumer ACKs, then commits",
      { "06-crash-before-ack", "17-backends-terminated" } },
    { "mark_without_owner_check", "marking published ignores lock_id",
      { "13-stale-worker" } },
    { "claim_ignores_lease", "the claim ignores locked_until",
      { "03-two-relays", "13-stale-worker", "18-database-freeze" } },
    { "claim_past_high_water_mark", "the claim skips rows older than the newest published: a late commit or a retry is never claimed",
      { "07-broker-down", "03-two-relays" } },
    { "no_dead_letter_limit", "poison messages retry forever",
      { "08-poison-message" } },
    { "retry_not_persisted", "a failed publish is retried at once, next_attempt_at unchanged",
      { "07-broker-down" } },
    { "trace_as_inbox_key", "the inbox key is the trace id",
      { "02-crash-after-commit", "06-crash-before-ack" } },
    { "blind_version_apply", "the consumer applies any version it receives",
      { "10-per-aggregate-order", "30-skewed-api-clock" } },
    { "unsanitized_last_error", "the raw error, secrets included, goes into last_error",
      { "08-poison-message" } },
    { "lock_timeout_taken_for_key_in_flight",
      "a creation whose statement timed out on a locked table is answered 409 key-in-flight",
      { "46-payments-locked-by-a-migration" } },
    { "idempotency_without_hash", "a reused key with another body replays the old response",
      { "11-http-retry-after-crash" } },
    { "parked_gap_never_applied", "a version parked for a gap stays parked once the gap closes",
      { "23-parked-gap-applied" } },
    { "relay_keeps_dead_db_connection", "the relay keeps using a database connection it lost",
      { "38-idle-relay-session-terminated", "16-postgres-crash-under-load",
        "17-backends-terminated", "19-failover-synchronous", "20-failover-asynchronous-loss",
        "25-relay-pg-silent", "31-relay-pg-partition" } },
    { "relay_stops_on_refused_statement",
      "a statement the database refused (a timeout on a locked table) ends the relay",
      { "47-outbox-locked-by-a-migration" } },
    { "relay_keeps_dead_broker_connection", "the relay keeps using a broker connection that broke",
      { "21-broker-crash-durable", "22-broker-crash-in-memory", "28-confirm-lost",
        "37-relay-broker-partition" } },
    { "unconfirmed_publish_counted_sent", "a publish whose link broke before its confirm counts as sent, as without confirms",
      { "37-relay-broker-partition", "21-broker-crash-durable" } },
    { "relay_ignores_closed_broker_link",
      "an idle relay does not watch its broker link: a dead one is found by a failed publish",
      { "44-idle-relay-broker-link-reset" } },
    { "cleanup_unrecorded", "the retention cleanup deletes published rows without a record",
      { "33-cleanup-under-faults" } },
    { "cleanup_deletes_pending", "the retention cleanup deletes by age alone, pending rows too",
      { "33-cleanup-under-faults" } },
    { "cleanup_inbox_ignores_horizon", "inbox markers are deleted inside the redelivery horizon",
      { "15-inbox-cleanup-horizon" } },
    { "requeue_without_record", "a requeue resets a dead letter and keeps no record of it",
      { "14-dead-letter-requeue" } },
    { "commit_outcome_guessed", "a connection lost during COMMIT is taken for a rollback",
      { "12-ambiguous-commit" } },
    { "inbox_key_per_delivery", "the inbox key is made per delivery, not per event",
      { "05-concurrent-duplicate", "04-crash-after-publish", "06-crash-before-ack" } },
    { "marker_conflict_ignored", "the inbox insert's ON CONFLICT DO NOTHING is never checked",
      { "05-concurrent-duplicate", "04-crash-after-publish" } },
    { "publish_ignores_lease_end", "a publish goes out without its lease end: the broker cannot fence it",
      { "32-slow-broker-link" } },
    { "refused_delivery_acked",
      "a delivery whose statement the database refused (a lock timeout, not its data) is acknowledged",
      { "45-ledger-locked-by-a-migration" } },
    { "zero_amount_accepted", "the API refuses a negative amount but creates a payment of zero",
      { "49-refused-requests-store-nothing" } },
    { "outbox_failure_tolerated",
      "a refused outbox insert is rolled back to a savepoint: the payment's change commits and is answered without its event",
      { "50-api-deadlock-at-the-outbox" } },
    { "retry_keeps_applied",
      "after a deadlock the transaction runs again from the refused delivery: those applied before it are acknowledged with no effect",
      { "48-consumer-deadlock" } },
    { "consumer_keeps_dead_db_connection", "the consumer keeps using a database connection it lost",
      { "26-consumer-pg-silent", "34-consumer-pg-partition", "16-postgres-crash-under-load" } },
    { "sessions_without_idle_timeout", "sessions have no idle-in-transaction bound: a vanished client's locks are held for hours",
      { "34-consumer-pg-partition", "35-api-commit-partition" } },
    { "consumer_ignores_silent_broker", "a subscriber waits on a broker link that went silent, with no heartbeat",
      { "36-consumer-broker-silent" } },
    { "effect_amount_without_cents", "the consumer records a payment's amount without its cents",
      { "02-crash-after-commit" } },
    { "commit_refusal_taken_for_commit",
      "a COMMIT the server refused (a serialization failure, a full disk) is taken for a commit: the API answers 2xx, the consumer acknowledges",
      { "51-api-statements-refused", "52-pipeline-statements-refused" } },
    { "lost_commit_taken_for_commit",
      "a COMMIT whose connection was lost is taken for a commit: the API answers 2xx, the consumer acknowledges",
      { "56-api-and-consumer-sessions-severed" } },
    { "unconfirmed_mark_believed",
      "the relay takes a pipelined mark as done once its rows came back, though its COMMIT was never confirmed",
      { "55-relay-sessions-severed" } },
    { "park_failure_acked",
      "a poison delivery whose park the database refused is acknowledged as though parked",
      { "53-poison-by-a-data-error-park-refused" } },
    { "claim_believed_before_commit",
      "the relay takes a claim's rows as soon as they come back, though the server then refused the COMMIT that would have kept the lease",
      { "54-relay-claim-commit-refused" } },
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
        cw_fmt(path, sizeof(path), "%s/%s", dir, de->d_name);
        found = file_mentions(path, needle);
    }
    closedir(d);
    return found;
}

/* The build targets whose sources name the mutant, into targets[]
 * (a file of a shared folder, src/core or src/bus, means every binary).
 * Returns the count; 0 when no source implements the mutant. */
static int mutant_targets(const char *name, const char **targets)
{
    /* #ifdef CW_MUTANT_<name>, or the hook of mutant.h, CW_MUTANT(<name>) */
    char needle[96], hook[96], src[PATH_MAX], dir[PATH_MAX + 256];
    snprintf(needle, sizeof(needle), "CW_MUTANT_%s", name);
    snprintf(hook, sizeof(hook), "CW_MUTANT(%s)", name);
    cw_fmt(src, sizeof(src), "%s/src", runner_source_dir());
    DIR *d = opendir(src);
    if (d == NULL)
        return 0;
    int want[NTARGETS] = { 0 }, any = 0, shared = 0;
    struct dirent *de;
    for (de = readdir(d); de != NULL; de = readdir(d)) {
        if (de->d_name[0] == '.')
            continue;
        cw_fmt(dir, sizeof(dir), "%s/%s", src, de->d_name);
        if (!dir_mentions(dir, needle) && !dir_mentions(dir, hook))
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

/* Configures a build tree with the cache entry def (blocking: a few
 * seconds), then starts building its targets in the background.  A
 * mutant's build overlaps the previous mutant's scenarios, which mostly
 * wait: jobs 1 leaves a core to the runs.  0 with b running, or -1 with the
 * reason in err. */
static int build_start(const char *def, const char *build_dir, const char **targets, int nt,
                       int jobs, struct proc *b, char *err, size_t errlen)
{
    static char out[65536];
    char jflag[16];
    snprintf(jflag, sizeof(jflag), "-j%d", jobs);
    /* Every build of the matrix compiles the same files, but for the few a
     * hook sits in: with ccache (from Debian, scripts/setup), a file whose
     * preprocessed text the mutant's definitions leave unchanged is a cache
     * hit, so a mutant costs the compile of its own files.  One cache
     * beside the build trees, whatever the user's own. */
    const char *launcher = access(CCACHE, X_OK) == 0 ? "-DCMAKE_C_COMPILER_LAUNCHER=" CCACHE
                                                      : "-UCMAKE_C_COMPILER_LAUNCHER";
    char cache_var[PATH_MAX + 16];
    cw_fmt(cache_var, sizeof(cache_var), "CCACHE_DIR=%s/../build-ccache", build_dir);
    /* Each tree compiles in a directory of its own, which ccache would
     * hash for the debug information's sake: every lookup a miss. */
    const char *env[] = { cache_var, "CCACHE_NOHASHDIR=1", NULL };
    char *conf[] = { (char *)"/usr/bin/cmake", (char *)"-S", (char *)runner_source_dir(),
                     (char *)"-B", (char *)build_dir, (char *)def, (char *)launcher, NULL };
    int rc = proc_run_capture(conf, env, 300000, out, sizeof(out));
    FILE *log = fopen(b->log_path, "w");
    if (log != NULL) {
        fprintf(log, "$ cmake -S %s -B %s %s %s\n", runner_source_dir(), build_dir, def,
                launcher);
        fprintf(log, "%s\n", out);
        fclose(log);
    }
    if (rc != 0) {
        cw_fmt(err, errlen, "cmake configure failed (%d), see %s", rc, b->log_path);
        return -1;
    }
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)"/usr/bin/cmake";
    argv[n++] = (char *)"--build";
    argv[n++] = (char *)build_dir;
    argv[n++] = jflag;
    argv[n++] = (char *)"--target";
    for (int i = 0; i < nt; i++)
        argv[n++] = (char *)targets[i];
    argv[n] = NULL;
    return proc_spawn(b, argv, NULL, env, err, errlen);
}

/* Waits for a background build; 0 when it succeeded. */
static int build_finish(struct proc *b, char *err, size_t errlen)
{
    if (proc_wait_exit(b, 900000) < 0) {
        proc_kill(b);
        cw_fmt(err, errlen, "build did not finish within 15 minutes, see %s", b->log_path);
        return -1;
    }
    char how[64];
    proc_exit_text(b, how, sizeof(how));
    if (strcmp(how, "exit status 0") != 0) {
        cw_fmt(err, errlen, "build failed (%s), see %s", how, b->log_path);
        return -1;
    }
    return 0;
}

/* The matrix the other way round: for each scenario, the mutants it
 * killed (a scenario that killed none is named, since nothing then proves
 * it can fail). */
static void print_by_scenario(const cJSON *mutants, const char *const *cols, int ncols)
{
    printf("scenario -> mutants it kills\n");
    for (int c = 0; c < ncols; c++) {
        printf("  %-34s", cols[c]);
        int n = 0, ran = 0;
        const cJSON *m;
        cJSON_ArrayForEach(m, mutants) {
            const cJSON *s;
            cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(m, "scenarios")) {
                if (strcmp(cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring, cols[c]) != 0)
                    continue;
                ran = 1;
                if (strcmp(cJSON_GetObjectItemCaseSensitive(s, "outcome")->valuestring,
                           "killed") == 0)
                    printf("%s%s", n++ ? ", " : " ",
                           cJSON_GetObjectItemCaseSensitive(m, "name")->valuestring);
            }
        }
        printf("%s\n", n > 0 ? "" : ran ? " NONE" : " (not run)");
    }
    printf("\n");
}

/* A scenario's column: its number ("01" of 01-command-rollback, of
 * bb01-baseline-under-load too), or its name's start when it has none. */
static const char *column_label(const char *name)
{
    const char *p = name;
    while (*p != '\0' && (*p < '0' || *p > '9'))
        p++;
    return *p != '\0' ? p : name;
}

static void print_matrix(cJSON *mutants, const char *const *cols, int ncols)
{
    printf("\nmutant x scenario (K killed, E errored: failed by a timeout or a harness error "
           "alone, . survived, - unreached: runs as the real code there, blank not run)\n");
    printf("%-26s", "");
    for (int c = 0; c < ncols; c++)
        printf(" %.2s", column_label(cols[c]));
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
                const char *oc = cJSON_GetObjectItemCaseSensitive(s, "outcome")->valuestring;
                cell = strcmp(oc, "killed") == 0      ? " K"
                       : strcmp(oc, "errored") == 0   ? " E"
                       : strcmp(oc, "unreached") == 0 ? " -"
                                                      : " .";
            }
            printf(" %s", cell);
        }
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(m, "error");
        const cJSON *oc = cJSON_GetObjectItemCaseSensitive(m, "outcome");
        printf("   %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "killed")) ? "killed"
                          : cJSON_IsString(err) ? "ERROR"
                          : cJSON_IsString(oc) && strcmp(oc->valuestring, "errored") == 0
                              ? "ERRORED" : "SURVIVED");
    }
    printf("\n");
    print_by_scenario(mutants, cols, ncols);
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

/* Is inv one a hazard scenario expects to fail (its "hazard" caught_by)?
 * Those fail in the unmutated build too: they prove nothing about a mutant. */
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
        /* Only "fail" kills: a hazard's invariant fails only on a violation
         * the hazard does not explain (catching the hazard's own loss is
         * "hazard caught"), and on a target an invariant its mapping cannot
         * show is "not examined", a known finding "finding reproduced". */
        const char *v = cJSON_GetObjectItemCaseSensitive(it, "verdict")->valuestring;
        if (strcmp(v, "fail") != 0)
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
    /* A kill is an invariant or an expectation that failed; a failure by a
     * timeout or a harness error alone proves nothing about the mistake. */
    int proved = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, by)
        proved |= strcmp(b->valuestring, "error") != 0;
    if (strcmp(verdict, "fail") == 0 && cJSON_GetArraySize(by) == 0)
        cJSON_AddItemToArray(by, cJSON_CreateString("verdict"));
    cJSON_AddStringToObject(cell, "outcome", strcmp(verdict, "fail") != 0 ? "survived"
                                             : proved ? "killed" : "errored");
    if (witness != NULL)
        cJSON_AddStringToObject(cell, "witness", witness);
    else
        cJSON_AddNullToObject(cell, "witness");
    return cell;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: crashwindow mutants [--only NAME...] [--full [--reach DIR]] [--out DIR]\n"
        "                           [--pg CONNINFO] [--list] [--shard K/N|env] [--junit FILE]\n"
        "                           [--broker fake|rabbitmq]\n"
        "                           [--jobs N [--shares M]] [--target PROFILE] [SCENARIO.json...]\n"
        "  --only NAME  this mutant only (repeatable)\n"
        "  --full       every mutant against every scenario (default: in the fixed order,\n"
        "               aimed scenarios first, until its first kill); a scenario whose\n"
        "               run on the reach build never evaluates one of the mutant's hooks\n"
        "               runs as the real code does: its cell is \"unreached\", not run\n"
        "  --reach DIR  the reach run to read (a run of the same scenarios against a build\n"
        "               made with -DCW_MUTANT_REACH=ON; default with --full: made first,\n"
        "               into OUT.reach)\n"
        "  --out DIR    output directory (default reports/mutants-<timestamp>)\n"
        "  --pg         use this PostgreSQL server instead of a throwaway cluster\n"
        "  --pg-dir DIR with --pg: the directory scripts/pg-cluster started it in, so that\n"
        "               the scenarios' \"db\" steps may crash and restart it\n"
        "  --list       print the mutants and the scenarios aimed at each, do nothing\n"
        "  --shard K/N  share K of N of the baseline scenarios and of the mutants (see\n"
        "               crashwindow run --help for 'env'); crashwindow merge joins them\n"
        "  --jobs N     the N shards side by side on this machine, merged into --out\n"
        "  --shares M   with --jobs: split into M shards, N at a time (default: one per\n"
        "               mutant)\n"
        "  --junit FILE write JUnit XML (one test case per mutant and baseline scenario)\n"
        "  --broker B   fake (default) or rabbitmq (crashwindow run --help); a mutant whose\n"
        "               scenarios all need a fake-broker control is not applicable there\n"
        "  --target P   black-box: run the scenarios (default: scenarios/blackbox/*.json)\n"
        "               against each build through target profile P, which names the build's\n"
        "               programs as ${bin:PROGRAM} (docs/targets.md); on RabbitMQ\n"
        "  SCENARIO.json  only these scenarios, for every build (default: every scenario of\n"
        "               scenarios/, or with --target of scenarios/blackbox/); a mutant none\n"
        "               of them kills survives this matrix, not necessarily the whole one\n"
        "exit status: 0 the unmutated build passes and every mutant is killed, 1 not, 2 bad usage\n");
}

/* What the command line asked for. */
struct mutants_opts {
    const char *only[NMUTANTS + 1];
    int nonly;
    int list;
    const char *out;         /* --out, or NULL */
    const char *pg;          /* --pg, or NULL: a throwaway cluster */
    const char *pg_dir;      /* --pg-dir: where scripts/pg-cluster started --pg's server */
    struct shard shard;      /* --shard, or 0/0 */
    const char *junit;       /* --junit, or NULL */
    int full;                /* --full: every mutant against every scenario */
    const char *broker;      /* --broker fake|rabbitmq, or NULL (the fake broker) */
    const char *target;      /* --target PROFILE, or NULL: the white-box scenarios */
    const char **files;      /* with --target: the scenario files named (argv's) */
    int nfiles;
    const char *reach;       /* --reach DIR, or NULL */
};

static int take_only(const char *n, void *ctx, char *err, size_t errlen)
{
    struct mutants_opts *o = ctx;
    int known = 0;
    for (int k = 0; k < NMUTANTS; k++)
        known |= strcmp(MUTANTS[k].name, n) == 0;
    if (!known || o->nonly == NMUTANTS) {
        snprintf(err, errlen, "unknown mutant '%s' (see --list)", n);
        return -1;
    }
    o->only[o->nonly++] = n;
    return 0;
}

static int take_broker(const char *v, void *ctx, char *err, size_t errlen)
{
    struct mutants_opts *o = ctx;
    o->broker = v;
    if (strcmp(v, "fake") != 0 && strcmp(v, "rabbitmq") != 0) {
        snprintf(err, errlen, "--broker takes fake or rabbitmq, not '%s'", v);
        return -1;
    }
    return 0;
}

static int take_shard(const char *v, void *ctx, char *err, size_t errlen)
{
    struct mutants_opts *o = ctx;
    return shard_arg(v, &o->shard, err, errlen);
}

/* A scenario file named on the command line. */
static int take_file(const char *v, void *ctx, char *err, size_t errlen)
{
    struct mutants_opts *o = ctx;
    if (o->nfiles == 64) {
        snprintf(err, errlen, "more than 64 scenario files");
        return -1;
    }
    o->files[o->nfiles++] = v;
    return 0;
}

/* 0 to go on, 1 after --help (usage printed), -1 on bad usage (message
 * printed). */
static int parse_args(struct mutants_opts *o, int argc, char **argv)
{
    memset(o, 0, sizeof(*o));
    static const char *files[64];
    o->files = files;
    /* Anything starting with '-' is an option; the rest are scenario files. */
    const struct cw_opts_style mutants_style = {
        .prefix = "-",
        .help = CW_HELP_LONG | CW_HELP_SHORT,
        .unknown = "unknown option or missing value: '%s'",
        .missing = "unknown option or missing value: '%s'",
        .positional = take_file,
        .positional_ctx = o,
    };
    const struct cw_opt opts[] = {
        CW_OPT_CALL("--only", take_only, o),
        CW_OPT_STRING("--out", &o->out),
        CW_OPT_STRING("--pg", &o->pg),
        CW_OPT_STRING("--pg-dir", &o->pg_dir),
        CW_OPT_STRING("--junit", &o->junit),
        CW_OPT_CALL("--broker", take_broker, o),
        CW_OPT_CALL("--shard", take_shard, o),
        CW_OPT_STRING("--target", &o->target),
        CW_OPT_FLAG("--list", &o->list),
        CW_OPT_FLAG("--full", &o->full),
        CW_OPT_STRING("--reach", &o->reach),
    };
    char err[4096];
    int rc = cw_opts_parse(opts, CW_NOPTS(opts), &mutants_style, argc, argv, NULL, err,
                           sizeof(err));
    if (rc == CW_OPTS_HELP) {
        usage(stdout);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "crashwindow mutants: %s\n", err);
        /* A value refused is the whole story; a mistake of form gets the usage. */
        if (rc == CW_OPTS_USAGE)
            usage(stderr);
        return -1;
    }
    if (o->target != NULL) {
        if (o->broker != NULL && strcmp(o->broker, "rabbitmq") != 0) {
            fprintf(stderr, "crashwindow mutants: a target speaks AMQP: --target runs on "
                    "RabbitMQ, not --broker %s\n", o->broker);
            return -1;
        }
        o->broker = "rabbitmq";
        if (access(o->target, R_OK) != 0) {
            fprintf(stderr, "crashwindow mutants: --target %s: %s\n", o->target,
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void print_list(void)
{
    for (int k = 0; k < NMUTANTS; k++) {
        printf("%-26s %s\n%-26s scenarios:", MUTANTS[k].name, MUTANTS[k].mistake, "");
        for (int j = 0; j < MUTANT_MAX_SCENARIOS && MUTANTS[k].scenarios[j]; j++)
            printf(" %s", MUTANTS[k].scenarios[j]);
        printf("\n");
    }
}

/* One invocation: where things are, the mutants chosen, their background
 * builds, and the matrix so far. */
struct mrun {
    char build[PATH_MAX];    /* this (unmutated) build tree */
    char parent[PATH_MAX];   /* its parent: build-mutant-<name>/ go there */
    char out[PATH_MAX];
    char mroot[PATH_MAX];    /* out/mutants */
    const char *pg;
    const char *pg_dir;      /* the cluster's directory when this command started it */
    struct shard shard;      /* --shard, or 0/0 */
    const char *broker;      /* --broker, or NULL */
    cJSON *all_chosen;       /* with --shard: every chosen mutant's name */
    int ok;                  /* the exit verdict so far */
    int chosen[NMUTANTS];    /* indexes into MUTANTS */
    int nchosen;
    struct proc builds[NMUTANTS];
    char build_err[NMUTANTS][512];
    int started[NMUTANTS];   /* 1 build spawned, 2 failed before running */
    cJSON *mutants;          /* the "mutants" array of result.json */
    cJSON *not_applicable;   /* its "not_applicable" array: mutants this broker cannot test */
    const char *cols[64];    /* the matrix's scenario columns */
    int ncols;
    int full;                /* --full */
    char **all;              /* every scenario file, sorted (runner_all_scenarios), or
                              * with --target the black-box ones, or those named */
    int nall;
    int named;               /* the scenarios were named on the command line */
    const char *target;      /* --target PROFILE, or NULL */
    char rabbit_tmp[PATH_MAX]; /* with --target: the shared RabbitMQ node's folder */
    char rabbit_dir[PATH_MAX + 16]; /* the node's directory in it, or "" */
    char names[64][64];      /* their names, the matrix's columns */
    char reach[PATH_MAX];    /* --full: the reach run's directory, or "" */
    char *reach_of[64];      /* per scenario of all: "\n" and the hooks it reached, a
                              * line each; NULL when the reach run lacks it */
    double reach_ms[64];     /* and how long it ran there (0: not known) */
};

/* This build, the parent folder of the mutants' build trees and the output
 * directory.  0, or -1 when this build's location is unknown. */
static int locate(struct mrun *r, const char *out_arg)
{
    if (runner_build_dir(r->build, sizeof(r->build)) < 0)
        return -1;
    snprintf(r->parent, sizeof(r->parent), "%s", r->build);
    char *slash = strrchr(r->parent, '/');
    if (slash != NULL)
        *slash = '\0';
    if (out_arg != NULL) {
        snprintf(r->out, sizeof(r->out), "%s", out_arg);
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        char stamp[32];
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
        cw_fmt(r->out, sizeof(r->out), "%s/reports/mutants-%s", runner_source_dir(), stamp);
    }
    return 0;
}

/* A run of every scenario of the matrix against the build in bin, into
 * out, one line a scenario, on the matrix's cluster and broker. */
static void every_scenario(const struct mrun *r, struct run_opts *o, const char *out,
                           const char *bin)
{
    memset(o, 0, sizeof(*o));
    o->all = r->target == NULL && !r->named;
    o->files = (const char *const *)r->all;
    o->nfiles = o->all ? 0 : r->nall;
    o->target = r->target;
    o->rabbit_dir = r->rabbit_dir[0] != '\0' ? r->rabbit_dir : NULL;
    o->pg = r->pg;
    o->pg_dir = r->pg_dir;
    o->out = out;
    o->bin = bin;
    o->repeat = 1;
    o->brief = 1;
    o->broker = r->broker;
}

/* Every scenario against the unmutated build, into out.  Returns the
 * runner's status, with *result its result (NULL when it could not start). */
static int run_baseline(const struct mrun *r, cJSON **result)
{
    if (r->target != NULL)
        printf("crashwindow mutants: baseline: %d black-box scenario%s against %s through "
               "target profile %s\n", r->nall, r->nall == 1 ? "" : "s", r->build, r->target);
    else if (r->named)
        printf("crashwindow mutants: baseline: the %d scenario%s named against %s\n", r->nall,
               r->nall == 1 ? "" : "s", r->build);
    else
        printf("crashwindow mutants: baseline: every scenario against %s\n", r->build);
    fflush(stdout);
    struct run_opts base;
    every_scenario(r, &base, r->out, r->build);
    base.shard_index = r->shard.index;
    base.shard_count = r->shard.count;
    /* More shares than scenarios (a few scenarios, one share per mutant):
     * the last shares run no baseline scenario, only their mutants. */
    base.share_may_be_empty = 1;
    *result = NULL;
    return runner_run(&base, result);
}

/* 1 when mutant k is among those --only names (every one without it). */
static int named_by_only(const struct mutants_opts *o, int k)
{
    int c = o->nonly == 0;
    for (int j = 0; j < o->nonly; j++)
        c |= strcmp(o->only[j], MUTANTS[k].name) == 0;
    return c;
}

/* The mutants --only names (all without it), each with its folder under
 * out/mutants/ and a build handle logging there. */
static void choose_mutants(struct mrun *r, const struct mutants_opts *o)
{
    long seen = 0;
    if (r->shard.count > 0)
        r->all_chosen = cJSON_CreateArray();
    for (int k = 0; k < NMUTANTS; k++) {
        if (!named_by_only(o, k))
            continue;
        if (r->all_chosen != NULL)
            cJSON_AddItemToArray(r->all_chosen, cJSON_CreateString(MUTANTS[k].name));
        if (shard_mine(&r->shard, seen++))
            r->chosen[r->nchosen++] = k;
    }
    cw_fmt(r->mroot, sizeof(r->mroot), "%s/mutants", r->out);
    mkdir(r->out, 0755);
    mkdir(r->mroot, 0755);
    for (int i = 0; i < r->nchosen; i++) {
        const struct mutant *m = &MUTANTS[r->chosen[i]];
        char mdir[PATH_MAX];
        cw_fmt(mdir, sizeof(mdir), "%s/%s", r->mroot, m->name);
        mkdir(mdir, 0755);
        memset(&r->builds[i], 0, sizeof(r->builds[i]));
        snprintf(r->builds[i].name, sizeof(r->builds[i].name), "build");
        cw_fmt(r->builds[i].log_path, sizeof(r->builds[i].log_path), "%s/build.log", mdir);
        r->build_err[i][0] = '\0';
    }
}

/* Mutant i's build (started one round ago, or now), then the next one's in
 * the background, where it overlaps mutant i's scenarios. */
static void start_builds(struct mrun *r, int i)
{
    for (int j = i; j <= i + 1 && j < r->nchosen; j++) {
        if (r->started[j])
            continue;
        r->started[j] = 1;
        const char *name = MUTANTS[r->chosen[j]].name;
        char def[128];
        snprintf(def, sizeof(def), "-DCW_MUTANT=%s", name);
        const char *targets[NTARGETS];
        int nt = mutant_targets(name, targets);
        char mbuild[PATH_MAX];
        cw_fmt(mbuild, sizeof(mbuild), "%s/build-mutant-%s", r->parent, name);
        if (nt == 0)
            snprintf(r->build_err[j], sizeof(r->build_err[j]),
                     "no source file implements this mutant");
        else if (build_start(def, mbuild, targets, nt, 1, &r->builds[j], r->build_err[j],
                             sizeof(r->build_err[j])) < 0)
            r->started[j] = 2; /* failed before running */
    }
}

/* Waits for mutant i's build and notes its rebuilt targets in mo.  0 when
 * it built; -1 with the error in mo (and printed). */
static int await_build(struct mrun *r, int i, cJSON *mo)
{
    const struct mutant *m = &MUTANTS[r->chosen[i]];
    const char *targets[NTARGETS];
    int nt = mutant_targets(m->name, targets);
    cJSON *tj = cJSON_AddArrayToObject(mo, "rebuilt");
    for (int t = 0; t < nt; t++)
        cJSON_AddItemToArray(tj, cJSON_CreateString(targets[t]));
    if (r->build_err[i][0] == '\0')
        build_finish(&r->builds[i], r->build_err[i], sizeof(r->build_err[i]));
    if (r->build_err[i][0] == '\0')
        return 0;
    cJSON_AddBoolToObject(mo, "killed", 0);
    cJSON_AddStringToObject(mo, "error", r->build_err[i]);
    printf("    %s\n", r->build_err[i]);
    return -1;
}

/* The order m meets the scenarios: those aimed at its mistake first, then
 * every other one in file order -- all of them, never a chosen subset.
 * Fills order[] with indexes into r->all; returns the count. */
static int mutant_order(const struct mrun *r, const struct mutant *m, int *order)
{
    int n = 0;
    for (int j = 0; j < MUTANT_MAX_SCENARIOS && m->scenarios[j] != NULL; j++)
        for (int k = 0; k < r->nall; k++)
            if (strcmp(r->names[k], m->scenarios[j]) == 0)
                order[n++] = k;
    for (int k = 0; k < r->nall; k++) {
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = order[j] == k;
        if (!seen)
            order[n++] = k;
    }
    return n;
}

/* The reach build (src/core/mutant.h): the real code whose hooks note
 * their names, in build-reach/ beside this build tree; every program a
 * hook may sit in is rebuilt, the rest (the fake broker) comes from this
 * build.  Blocking, with every core.  0, or -1 with the reason in err. */
static int build_reach(const char *parent, char *dir, size_t dirlen, char *err, size_t errlen)
{
    cw_fmt(dir, dirlen, "%s/build-reach", parent);
    const char *targets[NTARGETS];
    for (int i = 0; i < NTARGETS; i++)
        targets[i] = TARGETS[i].target;
    struct proc b;
    memset(&b, 0, sizeof(b));
    snprintf(b.name, sizeof(b.name), "build");
    cw_fmt(b.log_path, sizeof(b.log_path), "%s/build.log", dir);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("crashwindow mutants: the reach build in %s\n", dir);
    fflush(stdout);
    if (build_start("-DCW_MUTANT_REACH=ON", dir, targets, NTARGETS, cores > 0 ? (int)cores : 1,
                    &b, err, errlen) < 0)
        return -1;
    return build_finish(&b, err, errlen);
}

/* Reads what each scenario reached in the reach run r->reach into
 * r->reach_of.  A scenario the run lacks stays unknown (its cells run).
 * 0, or -1 with err when the directory holds no reach record at all: not
 * a run of a reach build, whose every cell would be skipped. */
static int load_reach(struct mrun *r, char *err, size_t errlen)
{
    cJSON *res = rundir_load(r->reach, err, errlen);
    if (res == NULL)
        return -1;
    int records = 0;
    for (int k = 0; k < r->nall; k++) {
        /* A scenario that failed on the reach build may have stopped short
         * of what the real code reaches: unknown. */
        int passed = 0;
        const char *dir = NULL;
        const cJSON *sc;
        cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(res, "scenarios")) {
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(sc, "name");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(sc, "verdict");
            const cJSON *ms = cJSON_GetObjectItemCaseSensitive(sc, "duration_ms");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(sc, "dir");
            if (!cJSON_IsString(nm) || strcmp(nm->valuestring, r->names[k]) != 0)
                continue;
            passed = cJSON_IsString(v) && strcmp(v->valuestring, "pass") == 0;
            r->reach_ms[k] = cJSON_IsNumber(ms) ? ms->valuedouble : 0;
            /* The scenario's folder as the run (or its merge) recorded it. */
            dir = cJSON_IsString(d) && rundir_safe_rel(d->valuestring) ? d->valuestring : NULL;
        }
        if (!passed || dir == NULL)
            continue;
        char path[PATH_MAX + 64];
        cw_fmt(path, sizeof(path), "%s/%s/%s", r->reach, dir, RUNNER_REACH_FILE);
        size_t len = 0;
        enum cw_slurp_error why;
        char *text = cw_slurp(path, 1 << 20, &len, &why);
        if (text == NULL && !(why == CW_SLURP_OPEN && errno == ENOENT)) {
            cw_fmt(err, errlen, "--reach %s: cannot read %s", r->reach, path);
            cJSON_Delete(res);
            return -1;
        }
        records += text != NULL;
        /* No file: the scenario's processes evaluated no hook at all. */
        size_t n = strlen(text != NULL ? text : "");
        r->reach_of[k] = malloc(n + 2);
        if (r->reach_of[k] == NULL) {
            free(text);
            cJSON_Delete(res);
            cw_fmt(err, errlen, "out of memory");
            return -1;
        }
        r->reach_of[k][0] = '\n';
        memcpy(r->reach_of[k] + 1, text != NULL ? text : "", n + 1);
        free(text);
    }
    cJSON_Delete(res);
    if (records == 0) {
        cw_fmt(err, errlen, "--reach %s: no scenario of it has a %s: not a run against a "
               "build made with -DCW_MUTANT_REACH=ON", r->reach, RUNNER_REACH_FILE);
        return -1;
    }
    return 0;
}

/* 0 when the reach run shows scenario k never evaluating a hook of mutant
 * m (its run under m is the real code's), else 1 (reached, or unknown). */
static int reaches(const struct mrun *r, int k, const struct mutant *m)
{
    if (r->reach_of[k] == NULL)
        return 1;
    char line[96];
    snprintf(line, sizeof(line), "\n%s\n", m->name);
    return strstr(r->reach_of[k], line) != NULL;
}

/* --full without --reach, in one process: the reach build, then every
 * scenario against it into OUT.reach.  0, or -1 (printed). */
static int reach_run(struct mrun *r)
{
    char bdir[PATH_MAX], err[1024];
    if (build_reach(r->parent, bdir, sizeof(bdir), err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow mutants: the reach build: %s\n", err);
        return -1;
    }
    cw_fmt(r->reach, sizeof(r->reach), "%s.reach", r->out);
    printf("crashwindow mutants: the reach run: the scenarios against %s, into %s\n", bdir,
           r->reach);
    fflush(stdout);
    struct run_opts o;
    every_scenario(r, &o, r->reach, bdir);
    o.bin_fallback = r->build;
    cJSON *res = NULL;
    runner_run(&o, &res);
    if (res == NULL) {
        fprintf(stderr, "crashwindow mutants: the reach run could not start\n");
        return -1;
    }
    cJSON_Delete(res);
    return 0;
}

/* files against m's build tree, into outdir, with the baseline's own
 * timeouts: a mutant is judged as the unmutated build is.  The run's
 * result (caller frees), or NULL when it could not start. */
static cJSON *run_scenarios(const struct mrun *r, const struct mutant *m, const char **files,
                            int nfiles, const char *outdir)
{
    char mbuild[PATH_MAX];
    cw_fmt(mbuild, sizeof(mbuild), "%s/build-mutant-%s", r->parent, m->name);
    struct run_opts o;
    memset(&o, 0, sizeof(o));
    o.files = files;
    o.nfiles = nfiles;
    o.pg = r->pg;
    o.pg_dir = r->pg_dir;
    o.out = outdir;
    o.bin = mbuild;
    o.bin_fallback = r->build;
    o.mutant = m->name;
    o.broker = r->broker;
    o.target = r->target;
    o.rabbit_dir = r->rabbit_dir[0] != '\0' ? r->rabbit_dir : NULL;
    o.repeat = 1;
    o.brief = 1;
    /* A mutant is killed by a failed invariant or expectation, never by a
     * failed step alone; once an invariant no later event can undo has
     * failed, the kill is proved: waits and the heal stop there. */
    o.stop_when_decided = 1;
    cJSON *mres = NULL;
    runner_run(&o, &mres);
    return mres;
}

/* Runs built mutant m against the scenarios (all with --full, else in
 * order until the first kill), a cell per scenario into scj, the verdict
 * into mo.  Returns 1 when a scenario killed it. */
static int run_mutant(struct mrun *r, const struct mutant *m, cJSON *mo, cJSON *scj)
{
    int order[64];
    int norder = mutant_order(r, m, order);
    const char *files[64];
    int n = 0, unreached = 0;
    for (int k = 0; k < norder; k++) {
        if (reaches(r, order[k], m)) {
            files[n++] = r->all[order[k]];
            continue;
        }
        /* Never evaluated a hook of m on the real code: m's program is the
         * real one there, and passes as it did. */
        cJSON *cell = cJSON_CreateObject();
        cJSON_AddStringToObject(cell, "name", r->names[order[k]]);
        cJSON_AddStringToObject(cell, "verdict", "unreached");
        cJSON_AddArrayToObject(cell, "killed_by");
        cJSON_AddStringToObject(cell, "outcome", "unreached");
        cJSON_AddNullToObject(cell, "witness");
        cJSON_AddItemToArray(scj, cell);
        unreached++;
    }
    if (unreached > 0) {
        printf("    %d of %d scenarios never reach its hooks on the real code: not run\n",
               unreached, norder);
        fflush(stdout);
    }
    char mdir[PATH_MAX];
    cw_fmt(mdir, sizeof(mdir), "%s/%s", r->mroot, m->name);
    int killed = 0, errored = 0, started = 1, ran = 0;
    char skip_reason[256] = "";
    for (int k = 0; k < n && !killed && started && !runner_interrupted();
         k += r->full ? n : 1) {
        cJSON *mres = run_scenarios(r, m, files + k, r->full ? n : 1, mdir);
        started = mres != NULL;
        /* A scenario this broker cannot run is skipped, with its reason. */
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(mres, "skipped"), 0), "reason");
        if (cJSON_IsString(why) && skip_reason[0] == '\0')
            snprintf(skip_reason, sizeof(skip_reason), "%s", why->valuestring);
        const cJSON *sc;
        cJSON_ArrayForEach(sc, cJSON_GetObjectItemCaseSensitive(mres, "scenarios")) {
            ran++;
            cJSON *cell = scenario_cell(sc);
            const char *oc = cJSON_GetObjectItemCaseSensitive(cell, "outcome")->valuestring;
            killed |= strcmp(oc, "killed") == 0;
            errored |= strcmp(oc, "errored") == 0;
            cJSON_AddItemToArray(scj, cell);
        }
        cJSON_Delete(mres);
    }
    cJSON_AddBoolToObject(mo, "killed", killed);
    cJSON_AddStringToObject(mo, "outcome", killed ? "killed" : errored ? "errored" : "survived");
    cJSON_AddNumberToObject(mo, "unreached", unreached);
    cJSON_AddStringToObject(mo, "dir", mdir + strlen(r->out) + 1);
    /* Not one scenario could run on this broker (each needs a fake-broker
     * control): not run, so neither killed nor survived. */
    if (started && ran == 0 && skip_reason[0] != '\0') {
        cJSON_AddStringToObject(mo, "not_applicable", skip_reason);
        return -1;
    }
    if (!started) {
        cJSON_AddStringToObject(mo, "error", "the mutant's run could not start");
        r->ok = 0;
    }
    return killed;
}

/* Mutant i of the chosen: its build, then its scenarios; its entry goes
 * into r->mutants, and r->ok falls unless it is killed. */
static void try_mutant(struct mrun *r, int i)
{
    const struct mutant *m = &MUTANTS[r->chosen[i]];
    cJSON *mo = cJSON_CreateObject();
    cJSON_AddStringToObject(mo, "name", m->name);
    cJSON_AddStringToObject(mo, "mistake", m->mistake);
    cJSON_AddItemToArray(r->mutants, mo);
    cJSON *scj = cJSON_AddArrayToObject(mo, "scenarios");
    printf("[%d/%d] mutant %s: %s\n", i + 1, r->nchosen, m->name, m->mistake);
    fflush(stdout);
    start_builds(r, i);
    if (await_build(r, i, mo) < 0) {
        r->ok = 0;
        return;
    }
    int killed = run_mutant(r, m, mo, scj);
    if (killed < 0) {
        /* Out of the matrix (whose readers count an unkilled mutant as a
         * survivor), into a list of its own with the reason. */
        printf("    -> not applicable on this broker: %s\n",
               cJSON_GetObjectItemCaseSensitive(mo, "not_applicable")->valuestring);
        fflush(stdout);
        cJSON *na = cJSON_CreateObject();
        cJSON_AddStringToObject(na, "name", m->name);
        cJSON_AddStringToObject(na, "reason",
                                cJSON_GetObjectItemCaseSensitive(mo, "not_applicable")->valuestring);
        cJSON_AddItemToArray(r->not_applicable, na);
        cJSON_DeleteItemFromArray(r->mutants, cJSON_GetArraySize(r->mutants) - 1);
        return;
    }
    printf("    -> %s\n", killed ? "killed"
                            : strcmp(cJSON_GetObjectItemCaseSensitive(mo, "outcome")->valuestring,
                                     "errored") == 0 ? "ERRORED (no invariant or expectation "
                                                       "failed)" : "SURVIVED");
    fflush(stdout);
    r->ok &= killed;
}

/* The baseline's result becomes the command's: kind "mutants", the overall
 * verdict, the mutants array (taken over).  Written to out/result.json,
 * whose name goes into path. */
static void write_result(struct mrun *r, cJSON *result, int base_rc, int64_t t0, char *path,
                         size_t pathlen)
{
    cJSON_ReplaceItemInObjectCaseSensitive(result, "kind", cJSON_CreateString("mutants"));
    cJSON_ReplaceItemInObjectCaseSensitive(result, "verdict",
                                           cJSON_CreateString(r->ok ? "pass" : "fail"));
    cJSON_ReplaceItemInObjectCaseSensitive(result, "duration_ms",
                                           cJSON_CreateNumber((double)(cw_mono_ms() - t0)));
    cJSON_AddStringToObject(result, "baseline_verdict", base_rc == 0 ? "pass" : "fail");
    if (r->reach[0] != '\0')
        cJSON_AddStringToObject(result, "reach", r->reach);
    cJSON_AddItemToObject(result, "mutants", r->mutants);
    r->mutants = NULL;
    if (cJSON_GetArraySize(r->not_applicable) > 0)
        cJSON_AddItemToObject(result, "not_applicable", r->not_applicable);
    else
        cJSON_Delete(r->not_applicable);
    r->not_applicable = NULL;
    cJSON *sh = cJSON_GetObjectItemCaseSensitive(result, "shard");
    if (cJSON_IsObject(sh) && r->all_chosen != NULL) {
        cJSON_AddItemToObject(sh, "mutants", r->all_chosen);
        r->all_chosen = NULL;
    }
    cw_fmt(path, pathlen, "%s/result.json", r->out);
    char *text = cJSON_Print(result);
    char err[256];
    /* A result that cannot be written shows as a missing result.json. */
    if (text != NULL)
        (void)cw_write_text(path, text, 1, err, sizeof(err));
    cJSON_free(text);
}

/* The scenario files every build meets, into r->all with their names as
 * the matrix's columns: those named, else every scenario of scenarios/ (with
 * --target scenarios/blackbox/'s), copied so that all are freed alike.  0,
 * or -1 with the reason printed. */
static int list_scenarios(struct mrun *r, const struct mutants_opts *o)
{
    r->named = o->nfiles > 0;
    if (o->nfiles > 0) {
        r->all = calloc((size_t)o->nfiles, sizeof(char *));
        for (int k = 0; r->all != NULL && k < o->nfiles; k++)
            if ((r->all[r->nall++] = strdup(o->files[k])) == NULL)
                return -1;
    } else {
        r->nall = o->target != NULL ? runner_scenarios_in("scenarios/blackbox", &r->all)
                                    : runner_all_scenarios(&r->all);
    }
    if (r->nall <= 0) {
        fprintf(stderr, "crashwindow mutants: no scenario files in %s/%s\n",
                runner_source_dir(), o->target != NULL ? "scenarios/blackbox" : "scenarios");
        return -1;
    }
    if (r->nall > 64)
        r->nall = 64;
    for (int k = 0; k < r->nall; k++) {
        const char *base = strrchr(r->all[k], '/');
        snprintf(r->names[k], sizeof(r->names[k]), "%s", base ? base + 1 : r->all[k]);
        char *dot = strrchr(r->names[k], '.');
        if (dot != NULL)
            *dot = '\0';
        r->cols[r->ncols++] = r->names[k];
    }
    return 0;
}

static void free_scenarios(struct mrun *r)
{
    for (int k = 0; k < r->nall; k++) {
        free(r->all[k]);
        free(r->reach_of[k]);
        r->reach_of[k] = NULL;
    }
    free(r->all);
    r->all = NULL;
    r->nall = 0;
}

/* The RabbitMQ node every run of a target shares (scripts/rabbit-node in
 * a folder of its own).  0, or -1 with err. */
static int rabbit_start(struct mrun *r, char *err, size_t errlen)
{
    cw_fmt(r->rabbit_tmp, sizeof(r->rabbit_tmp), "/tmp/cwmutXXXXXX");
    if (mkdtemp(r->rabbit_tmp) == NULL) {
        cw_fmt(err, errlen, "mkdtemp: %s", strerror(errno));
        r->rabbit_tmp[0] = '\0';
        return -1;
    }
    cw_fmt(r->rabbit_dir, sizeof(r->rabbit_dir), "%s/rabbit", r->rabbit_tmp);
    char script[PATH_MAX];
    cw_fmt(script, sizeof(script), "%s/scripts/rabbit-node", runner_source_dir());
    char *argv[] = { script, (char *)"start", r->rabbit_dir, NULL };
    char out[4096];
    int64_t t0 = cw_mono_ms();
    if (proc_run_capture(argv, NULL, 120000, out, sizeof(out)) != 0) {
        cw_fmt(err, errlen, "could not start a RabbitMQ node: %.600s", out);
        r->rabbit_dir[0] = '\0';
        fstree_remove(r->rabbit_tmp);
        return -1;
    }
    printf("crashwindow mutants: one RabbitMQ node for every run, ready in %.1f s\n",
           (double)(cw_mono_ms() - t0) / 1000.0);
    fflush(stdout);
    return 0;
}

static void rabbit_stop(struct mrun *r)
{
    if (r->rabbit_dir[0] == '\0')
        return;
    char script[PATH_MAX];
    cw_fmt(script, sizeof(script), "%s/scripts/rabbit-node", runner_source_dir());
    char *argv[] = { script, (char *)"stop", r->rabbit_dir, NULL };
    char out[1024];
    if (proc_run_capture(argv, NULL, 120000, out, sizeof(out)) != 0)
        fprintf(stderr, "crashwindow mutants: stopping the RabbitMQ node: %.300s\n", out);
    r->rabbit_dir[0] = '\0';
    fstree_remove(r->rabbit_tmp);
}

/* The order the shares of a full matrix start in, one share per chosen
 * mutant: the costliest first (longest processing time first), so that the
 * last to start are short and no long one holds the end alone.  A mutant's
 * cost is what its cells ran for on the reach build, unreached cells
 * excluded; a scenario of unknown reach counts 10 s. */
static int cost_order(const struct mrun *r, const struct mutants_opts *o, int *order)
{
    double cost[NMUTANTS];
    int n = 0;
    for (int k = 0; k < NMUTANTS; k++) {
        if (!named_by_only(o, k))
            continue;
        cost[n] = 0;
        for (int s = 0; s < r->nall; s++)
            if (reaches(r, s, &MUTANTS[k]))
                cost[n] += r->reach_ms[s] > 0 ? r->reach_ms[s] : 10000;
        /* Insertion, stable: equal costs keep the catalogue's order. */
        int at = n;
        while (at > 0 && cost[order[at - 1]] < cost[n]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = n++;
    }
    return n;
}

int mutants_jobs_reach(int argc, char **argv, char ***argv_out, const int **order_out)
{
    *argv_out = NULL;
    *order_out = NULL;
    int shares_given = 0;
    /* The options --jobs takes for itself, apart; the rest is checked by
     * the mutants' own parser, as each share will. */
    const char *jobs = NULL, *out = NULL;
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    if (rest == NULL)
        return 1;
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        int val = i + 1 < argc;
        if (val && strcmp(argv[i], "--jobs") == 0)
            jobs = argv[++i];
        else if (val && strcmp(argv[i], "--out") == 0)
            out = argv[++i];
        else if (val && (strcmp(argv[i], "--shares") == 0 || strcmp(argv[i], "--junit") == 0))
            shares_given |= strcmp(argv[i++], "--shares") == 0;
        else
            rest[nrest++] = argv[i];
    }
    struct mutants_opts o;
    int pr = parse_args(&o, nrest, rest);
    free(rest);
    if (pr != 0 || !o.full || o.reach != NULL || o.list || jobs == NULL)
        return pr < 0 ? 2 : 0;
    static struct mrun run;
    struct mrun *r = &run;
    memset(r, 0, sizeof(*r));
    char err[1024] = "no scenario list";
    if (locate(r, out) < 0) {
        fprintf(stderr, "crashwindow mutants: cannot tell where this build is\n");
        return 2;
    }
    size_t len = strlen(r->out);
    while (len > 1 && r->out[len - 1] == '/')
        r->out[--len] = '\0';
    cw_fmt(r->reach, sizeof(r->reach), "%s.reach", r->out);
    char bdir[PATH_MAX];
    if (build_reach(r->parent, bdir, sizeof(bdir), err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow mutants: the reach build: %s\n", err);
        return 1;
    }
    /* The reach run: the scenarios the shares meet, as a run --jobs. */
    char **files = NULL;
    int nfiles = o.nfiles == 0 && o.target != NULL
                     ? runner_scenarios_in("scenarios/blackbox", &files) : 0;
    if (nfiles < 0)
        nfiles = 0;
    const char **full = calloc((size_t)(o.nfiles + nfiles + 16), sizeof(char *));
    if (full == NULL)
        return 1;
    int n = 0;
    full[n++] = "run";
    for (int k = 0; k < o.nfiles; k++)
        full[n++] = o.files[k];
    for (int k = 0; k < nfiles; k++)
        full[n++] = files[k];
    if (o.nfiles + nfiles == 0)
        full[n++] = "--all";
    full[n++] = "--bin";
    full[n++] = bdir;
    full[n++] = "--out";
    full[n++] = r->reach;
    full[n++] = "--brief";
    full[n++] = "--jobs";
    full[n++] = jobs;
    if (o.broker != NULL) {
        full[n++] = "--broker";
        full[n++] = o.broker;
    }
    if (o.target != NULL) {
        full[n++] = "--target";
        full[n++] = o.target;
    }
    full[n] = NULL;
    printf("crashwindow mutants: the reach run: the scenarios against %s, into %s\n", bdir,
           r->reach);
    fflush(stdout);
    int rc = jobs_main(n, (char **)full, runner_source_dir(), 0,
                       runner_share_count(n, (char **)full), NULL, 0);
    free(full);
    for (int k = 0; k < nfiles; k++)
        free(files[k]);
    free(files);
    if (rc > 1) {
        fprintf(stderr, "crashwindow mutants: the reach run did not finish (exit status %d)\n",
                rc);
        return 1;
    }
    /* A reach run that recorded nothing (a target whose processes do not
     * pass the environment on) is no reason to stop: every cell runs. */
    r->target = o.target;
    int loaded = list_scenarios(r, &o) == 0 && load_reach(r, err, sizeof(err)) == 0;
    if (!loaded)
        fprintf(stderr, "crashwindow mutants: %s; without a reach record, every cell runs\n",
                err);
    /* With one share per mutant, the costliest start first. */
    static int order[NMUTANTS];
    if (loaded && !shares_given && cost_order(r, &o, order) == mutants_chosen_count(argc, argv)) {
        *order_out = order;
        printf("crashwindow mutants: the shares start costliest first: share");
        for (int k = 0; k < mutants_chosen_count(argc, argv); k++)
            printf(" %d", order[k] + 1);
        printf("\n");
        fflush(stdout);
    }
    free_scenarios(r);
    /* The shares get --out (made up here when absent, so that the reach
     * run's name matches it) and --reach. */
    char **next = calloc((size_t)argc + 5, sizeof(char *));
    if (next == NULL)
        return 1;
    int m = 0;
    for (int i = 0; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--out") == 0) {
            i++;
            continue;
        }
        next[m++] = argv[i];
    }
    static char out_arg[PATH_MAX], reach_arg[PATH_MAX];
    cw_fmt(out_arg, sizeof(out_arg), "%s", r->out);
    cw_fmt(reach_arg, sizeof(reach_arg), "%s", r->reach);
    next[m++] = (char *)"--out";
    next[m++] = out_arg;
    if (loaded) {
        next[m++] = (char *)"--reach";
        next[m++] = reach_arg;
    }
    next[m] = NULL;
    *argv_out = next;
    return 0;
}

int mutants_chosen_count(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--only") == 0) {
            n++;
            i++;
        }
    return n > 0 ? n : NMUTANTS;
}

int mutants_main(int argc, char **argv)
{
    struct mutants_opts opts;
    int pr = parse_args(&opts, argc, argv);
    if (pr != 0)
        return pr < 0 ? 2 : 0;
    if (opts.list) {
        print_list();
        return 0;
    }
    runner_install_signals();
    int64_t t0 = cw_mono_ms();
    /* Static: the build handles alone take over 100 KB. */
    static struct mrun run;
    struct mrun *r = &run;
    memset(r, 0, sizeof(*r));
    r->shard = opts.shard;
    char err[1024];
    if (locate(r, opts.out) < 0) {
        fprintf(stderr, "crashwindow mutants: cannot tell where this build is\n");
        return 2;
    }

    r->target = opts.target;
    if (list_scenarios(r, &opts) < 0)
        return 2;
    if (opts.reach != NULL) {
        cw_fmt(r->reach, sizeof(r->reach), "%s", opts.reach);
        if (load_reach(r, err, sizeof(err)) < 0) {
            fprintf(stderr, "crashwindow mutants: %s\n", err);
            free_scenarios(r);
            return 2;
        }
    }
    if (r->target != NULL || r->named) {
        /* A bad scenario file or profile, or a scenario no target can run,
         * is refused before anything starts. */
        struct run_opts pre;
        memset(&pre, 0, sizeof(pre));
        pre.files = (const char *const *)r->all;
        pre.nfiles = r->nall;
        pre.target = r->target;
        pre.pg = opts.pg;
        int rc = runner_preflight(&pre);
        if (rc != 0) {
            free_scenarios(r);
            return rc;
        }
    }

    /* One cluster for every run. */
    struct rdb db;
    memset(&db, 0, sizeof(db));
    char script[PATH_MAX];
    cw_fmt(script, sizeof(script), "%s/scripts/pg-cluster", runner_source_dir());
    if (opts.pg == NULL && rdb_start_cluster(&db, script, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow mutants: %s\n", err);
        free_scenarios(r);
        return 1;
    }
    r->pg = opts.pg != NULL ? opts.pg : db.admin;
    r->pg_dir = opts.pg != NULL ? opts.pg_dir : db.cluster_dir;
    r->broker = opts.broker;
    /* And one RabbitMQ node for a target's: a node takes longer to start
     * than most black-box scenarios take to run. */
    if (r->target != NULL && rabbit_start(r, err, sizeof(err)) < 0) {
        fprintf(stderr, "crashwindow mutants: %s\n", err);
        if (opts.pg == NULL)
            rdb_finish(&db, script, 0);
        free_scenarios(r);
        return 1;
    }

    /* The unmutated build must pass everything first. */
    cJSON *result;
    int base_rc = run_baseline(r, &result);
    if (result == NULL) {
        fprintf(stderr, "crashwindow mutants: the baseline run could not start\n");
        rabbit_stop(r);
        if (opts.pg == NULL)
            rdb_finish(&db, script, 0);
        free_scenarios(r);
        return base_rc == 2 ? 2 : 1;
    }
    r->ok = base_rc == 0;
    if (!r->ok)
        printf("crashwindow mutants: the UNMUTATED build fails; kills below prove nothing\n");

    r->full = opts.full;
    /* Without a reach record every cell runs, as it did before one existed. */
    if (r->full && opts.reach == NULL) {
        int ran = reach_run(r) == 0;
        int loaded = ran && load_reach(r, err, sizeof(err)) == 0;
        if (ran && !loaded)
            fprintf(stderr, "crashwindow mutants: %s\n", err);
        if (!loaded) {
            fprintf(stderr, "crashwindow mutants: without a reach record, every cell runs\n");
            r->reach[0] = '\0';
        }
    }
    choose_mutants(r, &opts);
    r->mutants = cJSON_CreateArray();
    r->not_applicable = cJSON_CreateArray();
    for (int i = 0; i < r->nchosen && !runner_interrupted(); i++)
        try_mutant(r, i);
    /* A build still running (interrupted): stop it. */
    for (int i = 0; i < r->nchosen; i++)
        if (r->started[i] == 1 && r->builds[i].running)
            proc_kill(&r->builds[i]);
    if (runner_interrupted())
        r->ok = 0;
    print_matrix(r->mutants, r->cols, r->ncols);

    int nkilled = 0;
    int nna = cJSON_GetArraySize(r->not_applicable);
    const cJSON *m;
    cJSON_ArrayForEach(m, r->mutants) {
        nkilled += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "killed"));
    }
    char path[PATH_MAX + 32];
    write_result(r, result, base_rc, t0, path, sizeof(path));
    cJSON_Delete(result);
    cJSON_Delete(r->all_chosen);
    free_scenarios(r);
    if (rundir_outputs(r->out, opts.junit, 1, "crashwindow mutants") < 0)
        r->ok = 0;
    rabbit_stop(r);
    if (opts.pg == NULL)
        rdb_finish(&db, script, 0);
    printf("crashwindow mutants: %s: baseline %s, %d/%d mutants killed in %.1f s\nresult: %s\n",
           r->ok ? "PASS" : "FAIL", base_rc == 0 ? "passes" : "FAILS", nkilled,
           r->nchosen - nna, (double)(cw_mono_ms() - t0) / 1000.0, path);
    return r->ok ? 0 : 1;
}
