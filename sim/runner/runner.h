/* runner.h -- `crashwindow run`: scenarios against the real binaries.
 *
 * For each scenario the runner
 *   1. clones a fresh database from the run's migrated template (a
 *      scenario with a standby gets a primary and a standby of its own),
 *   2. starts the broker (the fake broker, or with --broker rabbitmq
 *      rabbit-bridge in front of a RabbitMQ node) and the declared
 *      processes (payments-api, outbox-relay, accounting-consumer) with
 *      their events files and the database's connection string in CW_DB
 *      (never on a command line),
 *   3. drives the steps: workload over HTTP, faults fired through CW_FAULTS
 *      or libfiu's remote control, kills, pauses at fault points, restarts,
 *      broker switches, operator commands, database, broker and network
 *      faults, and bounded waits,
 *   4. heals: faults off, broker switches reset, every process running
 *      again; then waits until the pipeline converges (liveness),
 *   5. runs the invariant checker and the scenario's expectations; a fault
 *      it armed that never fired fails the scenario (it never reached its
 *      window) unless the scenario says "faults_optional",
 *   6. stops everything and writes DIR/<scenario>/ (scenario.json as run,
 *      each process's events, broker.events.jsonl, timeline.jsonl,
 *      metrics.jsonl, history/) and DIR/result.json.
 *
 * Every wait is a condition polled against a deadline and fails with a
 * message naming what it waited for; nothing sleeps for a fixed time but
 * what the scenario asks to last (a "sleep" step, a fault's down time).
 *
 * Exit codes: 0 every invariant and expectation of every scenario held,
 * 1 one did not (or a scenario could not run), 2 bad usage or a bad
 * scenario file. */
#ifndef CW_RUNNER_H
#define CW_RUNNER_H

#include <cjson/cJSON.h>
#include <stddef.h>

struct run_opts {
    const char *const *files;  /* scenario files (ignored with all) */
    int nfiles;
    int all;                   /* every .json file in the source tree's scenarios/ */
    const char *pg;            /* an existing server, or NULL for a throwaway cluster */
    const char *pg_dir;        /* with pg: the directory scripts/pg-cluster started it in,
                                * when the caller owns it ("db" steps may crash it) */
    const char *out;           /* run directory, or NULL for reports/run-<timestamp> */
    const char *bin;           /* where the binaries are, or NULL for this build */
    const char *bin_fallback;  /* a binary missing from bin is taken from here (NULL: none) */
    const char *mutant;        /* recorded in result.json; NULL for none */
    int heal_cap_ms;           /* > 0: no heal phase waits longer than this */
    int wait_cap_ms;           /* > 0: no wait step waits longer than this */
    int stop_when_decided;     /* a mutant's run: once an invariant no later event can
                                * undo has failed, waits and the heal stop
                                * (runner_verdict_decided) */
    int keep;
    int dry_run;
    int repeat;                /* >= 1 */
    int brief;                 /* progress: one line per scenario, no step lines */
    const char *report;        /* write the HTML report here when done, or NULL */
    int shard_index;           /* --shard K/N: only share K (1..N) of the scenarios; */
    int shard_count;           /*   0/0: all of them */
    int share_may_be_empty;    /* a mutant matrix's baseline: N may exceed the scenarios,
                                * its shards' mutants still run (a run refuses it) */
    const char *shard_weights; /* a run directory whose durations weigh the split, or NULL */
    const char *junit;         /* write JUnit XML here when done, or NULL */
    int bundles;               /* write DIR/bundles/ for what failed */
    const char *broker;        /* "fake" (NULL: the default) or "rabbitmq" */
    const char *target;        /* a target profile (sim/target/target.h), or NULL: our pipeline */
    const char *rabbit_dir;    /* with target: a node scripts/rabbit-node started in this
                                * directory, which the caller owns and runs share (a
                                * target's scenarios each reset it); NULL: the run starts
                                * and stops a throwaway node of its own */
};

/* `crashwindow run [SCENARIO.json...|--all] [--pg CONNINFO] [--out DIR]
 * [--keep] [--dry-run] [--repeat N] [--bin DIR] [--report FILE.html]
 * [--shard K/N|env] [--shard-weights DIR] [--junit FILE] [--broker B]
 * [--target PROFILE]`:
 * returns the exit code.  With --shard the run takes scenario i (from 0, in
 * the list's order: --all sorts it) when i % N == K-1, or with
 * --shard-weights the share shard_plan gives it (shard.h), and result.json
 * records the whole list in "shard" so that `crashwindow merge` can check
 * the shards fit. */
int runner_main(int argc, char **argv);

/* Runs with parsed options.  When result is not NULL it receives the
 * result.json object (caller frees).  Returns the exit code. */
int runner_run(const struct run_opts *o, cJSON **result);

/* The source tree (scenarios/, scripts/, fault-points/): $CW_SOURCE_DIR, or
 * the tree this binary was built from. */
const char *runner_source_dir(void);

/* The build tree this binary lives in (its directory's parent). */
int runner_build_dir(char *out, size_t outlen);

/* The scenario files of the source tree, sorted (caller frees the array and
 * each string).  Returns the count, or -1. */
int runner_all_scenarios(char ***files);
/* The same for another folder of the source tree ("scenarios/blackbox"). */
int runner_scenarios_in(const char *folder, char ***files);

/* Before a caller starts what several runs of o->files share (`crashwindow
 * mutants` with scenarios named, or --target): every scenario, and the
 * profile o->target when there is one, checked as `run` checks them, and
 * the process moved into a network namespace of its own when a scenario
 * partitions a link (runner_net_isolate).  0; 2 with the reason printed (a
 * bad file); 1 when the namespace could not be made. */
int runner_preflight(const struct run_opts *o);

struct target;

/* CW_PG_SETTINGS for scripts/pg-cluster: the server settings target needs
 * (wal_level = logical...), for every cluster this process or its children
 * start from now on.  A caller that starts its own cluster for a target
 * (the simulator, the mutant matrix) sets it first.  0, or -1 with the
 * reason printed. */
int runner_target_env(const struct target *t);

/* How many scenarios a `run` command line (argv[0] "run") shares out: its
 * scenario files, or with --all every scenario of scenarios/; 0 when it
 * names none. */
int runner_share_count(int argc, char **argv);

/* Pins the source's commit for the shards a --jobs parent starts (they
 * inherit RUNNER_COMMIT_ENV): each records the commit the command began at,
 * so that a commit made while they run does not keep them from merging. */
#define RUNNER_COMMIT_ENV "CW_SOURCE_COMMIT"
void runner_pin_commit(void);

/* In each scenario's directory: the mutant hooks its processes evaluated,
 * one name a line, written by a reach build alone (src/core/mutant.h). */
#define RUNNER_REACH_FILE "mutant-reach.log"

/* The catalogued fault point names, NULL-terminated (caller frees with
 * runner_free_points), or NULL when the catalogue cannot be read. */
char **runner_load_points(void);
void runner_free_points(char **points);

/* What a real broker cannot do (`run --broker rabbitmq` skips the scenario,
 * `sim --broker rabbitmq` leaves the part out): the fake broker's switches,
 * its visibility timeout, fault-proxy links that speak its protocol, and
 * the loss of its in-memory store.  Each returns the reason (written into
 * why) or NULL when a real broker can take it:
 *   runner_rabbit_setup_skip  the scenario's "broker" settings;
 *   runner_rabbit_step_skip   one of its steps;
 *   runner_rabbit_skip        the whole scenario (settings, then steps). */
struct scenario;
struct sc_step;
const char *runner_rabbit_setup_skip(const struct scenario *sc, char *why, size_t whylen);
const char *runner_rabbit_step_skip(const struct scenario *sc, const struct sc_step *st,
                                    char *why, size_t whylen);
const char *runner_rabbit_skip(const struct scenario *sc, char *why, size_t whylen);

/* A scenario the simulator generated, fitted to target t (sim/target):
 * what cannot be done from outside is taken out of the JSON -- fault
 * points, program flags, steps a target refuses, consumers beyond the one
 * the profile's queue serves, invariants its mapping cannot judge.
 * Returns how many parts went, or -1 with err when what is left still is
 * not a scenario the target can run. */
int runner_target_fit(const struct target *t, cJSON *scenario, char *err, size_t errlen);

/* What only a real broker can take (`run` on the fake broker skips the
 * scenario): a kernel partition of a broker link, which is a Unix socket
 * with the fake broker and loopback TCP with RabbitMQ.  NULL, or why. */
const char *runner_fake_skip(const struct scenario *sc, char *why, size_t whylen);

/* Moves this process into a network namespace of its own, loopback up,
 * where partition faults may add nftables rules without ever touching the
 * host's: before any thread and any child (they inherit it), and before
 * PostgreSQL starts (it must listen there).  Once per process; 0, or -1
 * with the reason printed. */
int runner_net_unshare(void);

/* Set by SIGINT/SIGTERM: every wait gives up, the scenario is torn down,
 * nothing is judged, and the run ends with RUNNER_EXIT_INTERRUPTED. */
int runner_interrupted(void);

/* The exit status of an interrupted run: 128 + SIGINT, as a shell reports it. */
#define RUNNER_EXIT_INTERRUPTED 130
void runner_install_signals(void);

#endif
