/* simulator.h -- `crashwindow sim`: seeded randomized fault schedules,
 * replay and shrinking.
 *
 * The scenarios in scenarios/ each aim at one crash window someone thought
 * of.  The simulator looks for the failures nobody wrote a scenario for, in
 * the manner of FoundationDB's simulator, TigerBeetle's VOPR and Jepsen's
 * nemesis: run I of seed S derives a whole schedule from (S, I) alone -- a
 * process layout, a workload and a fault schedule -- renders it as an
 * ordinary scenario (the JSON the runner reads) and runs it through the
 * runner, the same code path as `crashwindow run`.  So:
 *
 *   replay   = generate (S, I) again + run it;
 *   a shrunk failure is a scenario file, ready for scenarios/.
 *
 * The pieces, each in a file of its own:
 *   - a PRNG (xoshiro256**, seeded through splitmix64 from S and I): the
 *     only source of randomness of generation; never rand() or the clock
 *     (simulator_prng.c);
 *   - the fault point catalogue generation draws from
 *     (simulator_catalogue.c);
 *   - a plan (struct sim_plan): processes, faults armed per incarnation,
 *     and a list of actions (payments, settle, kill, pause, resume, restart,
 *     broker switches, database, broker and network faults, the runbook's
 *     retention cleanup and requeue).  Generation fills a plan
 *     (simulator_gen.c); shrinking edits one; a plan in one line and its
 *     size are simulator_describe.c's;
 *   - rendering: plan -> scenario JSON (simulator_render.c).  Rendering
 *     tracks what each process may be doing at every step and leaves out
 *     an action the runner could not perform (kill of a process that may
 *     already have crashed, ...), so that every plan, shrunk ones included,
 *     renders to a scenario whose steps cannot fail for reasons of their
 *     own: a failing run is a broken invariant or a pipeline that does not
 *     converge, never a broken step.  The follow-up of a park (resume or
 *     kill) is rendered after a wait for the park itself ("on_timeout":
 *     "continue": an anchor, not a demand), so every replay takes the two
 *     in the same order; so is the close of a poison window (after its
 *     first dead letter, once nothing is pending) and a requeue (once every
 *     later version of a dead letter is parked);
 *   - shrinking: sim_shrink_variant() enumerates the one-edit-smaller
 *     variants of a plan (simulator_shrink.c); the driver keeps an edit
 *     only when the run still fails on the same invariant (greedy delta
 *     debugging);
 *   - the command: the run loop, replay, the shrinking driver
 *     (simulator.c). */
#ifndef CW_SIMULATOR_H
#define CW_SIMULATOR_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* ---- PRNG ---------------------------------------------------------------- */

struct sim_rng {
    uint64_t s[4];
};

/* Seeds the generator for run `run` of seed `seed`.  Distinct (seed, run)
 * pairs give unrelated streams. */
void sim_rng_init(struct sim_rng *r, uint64_t seed, uint64_t run);
uint64_t sim_rng_next(struct sim_rng *r);
/* Uniform in [0, n) for n >= 1 (0 when n < 1). */
int sim_rng_below(struct sim_rng *r, int n);
/* Uniform in [lo, hi] (lo when hi < lo). */
int sim_rng_range(struct sim_rng *r, int lo, int hi);
/* True with the given probability in percent. */
int sim_rng_chance(struct sim_rng *r, int percent);

/* ---- the fault point catalogue ------------------------------------------- */

enum sim_action { SIM_CRASH = 0, SIM_FAIL, SIM_PARK, SIM_STALL };

#define SIM_MAX_POINTS 64
#define SIM_POINT_MAX 64

struct sim_point {
    char name[SIM_POINT_MAX];    /* component/window */
    unsigned actions;            /* bit (1u << enum sim_action) per allowed action */
};

/* The catalogued points sorted by name, so that generation does not depend
 * on the order of the file. */
struct sim_catalogue {
    int n;
    struct sim_point p[SIM_MAX_POINTS];
    int infra;               /* database and broker faults may be drawn: the
                              * simulator started the cluster (no --pg) */
    int partitions;          /* kernel partitions may be drawn: the cluster
                              * is the simulator's own, and the runs live in
                              * a network namespace of their own */
};

/* Parses fault-points/catalogue.json text.  0, or -1 with a message in err
 * (cat then holds no points). */
int sim_catalogue_parse(struct sim_catalogue *cat, const char *text, char *err, size_t errlen);
/* The same from a file. */
int sim_catalogue_load(struct sim_catalogue *cat, const char *path, char *err, size_t errlen);

/* ---- the plan ------------------------------------------------------------ */

#define SIM_MAX_PROCS 10
#define SIM_MAX_FAULTS 32
#define SIM_MAX_ACTS 48

enum sim_kind { SIM_API = 0, SIM_RELAY, SIM_CONSUMER };

struct sim_proc {
    enum sim_kind kind;
    int group;               /* consumers: 0 accounting, 1 notifications */
    int autostart;
    /* relays */
    int lease_ms, idle_ms, batch, backoff_base_ms, backoff_cap_ms, max_attempts;
    int per_aggregate;       /* --order per-aggregate (else fifo) */
    /* consumers */
    int prefetch, cbatch, retry_delay_ms, gap_delay_ms;
    int gap_park_ms;         /* 0: the consumer's default */
    int bus_timeout_ms;      /* --bus-timeout-ms (heartbeat: half of it); 0: the default */
    /* its clock (libfaketime): offset in seconds, rate in percent (100:
     * real time) */
    int clock_offset_s, clock_rate_pct;
    /* its database call deadline (also its sockets' tcp_user_timeout), in
     * ms; 0: the default.  Shorter than a partition of its link, so that
     * the kernel gives the silent connection up while the link is cut. */
    int db_deadline_ms;
};

struct sim_fault {
    int proc;                /* index into procs */
    int incarnation;         /* -1: the first start; else the index of the
                                SIM_RESTART action whose start arms it */
    char point[SIM_POINT_MAX];
    enum sim_action action;
    int stall_ms;            /* SIM_STALL */
    int hit;                 /* fires on the hit-th pass, >= 1 */
    int every;               /* and on every pass after it */
};

enum sim_act_kind {
    SIM_PAY = 0,   /* a batch of payments through the API */
    SIM_SETTLE,    /* let the pipeline work: until it caught up, at most ms */
    SIM_KILL,      /* SIGKILL */
    SIM_PAUSE,     /* SIGSTOP */
    SIM_RESUME,    /* SIGCONT (a pause, or a park fault) */
    SIM_RESTART,   /* stop (SIGTERM) if running, start again: a fresh incarnation */
    SIM_BROKER,    /* broker switches */
    SIM_REUSE,     /* the first key of the latest batch again, another body: 422 */
    SIM_DB,        /* a fault of PostgreSQL itself: crash, restart, terminate, freeze,
                    * hold_commits, lock */
    SIM_BROKER_CRASH, /* SIGKILL the broker, start it again on its durable store */
    SIM_NET,       /* a fault on one process's link to PostgreSQL or the broker */
    SIM_CLEANUP,   /* the runbook's retention: outboxctl cleanup of published rows
                      older than ms, while the rest of the schedule goes on */
    SIM_REQUEUE,   /* the runbook's recovery: outboxctl requeue --all, every dead
                      letter of the moment sent again under its id */
    SIM_CLEANUP_INBOX, /* outboxctl cleanup-inbox with a retention of ms, inside the
                      redelivery horizon: must be refused (exit 1, "refusing") */
    SIM_BROKER_CLOSE  /* the broker drops every client's connection at once */
};

/* SIM_NET faults, as the runner's "net" step names them. */
enum sim_net { SIM_NET_LATENCY = 0, SIM_NET_BLACKHOLE, SIM_NET_RESET, SIM_NET_BANDWIDTH,
               SIM_NET_SLICER, SIM_NET_CUT, SIM_NET_PARTITION, SIM_NET_DOWN,
               SIM_NET_LIMIT_DATA };

/* SIM_DB actions, as the runner's "db" step names them. */
enum sim_db { SIM_DB_CRASH = 0, SIM_DB_RESTART, SIM_DB_TERMINATE, SIM_DB_FREEZE,
              SIM_DB_HOLD_COMMITS, SIM_DB_LOCK, SIM_DB_REFUSE, SIM_DB_SEVER };

/* The tables a SIM_DB_LOCK may hold (net_a indexes them): each one a
 * process of the pipeline writes. */
#define SIM_LOCK_TABLES 4

/* What a SIM_DB_REFUSE makes PostgreSQL refuse (net_a indexes
 * sim_refusals): a statement of the pipeline's, or the COMMIT after it,
 * with an error every program must survive on a live connection
 * (serialization failures, deadlock victims, a full disk); never a data
 * error, which would make an event poison and park it. */
struct sim_refusal {
    const char *table, *on, *sqlstate;
    int at_commit;
    const char *of;          /* an update's column it must set, or NULL */
};
#define SIM_REFUSALS 9

/* Where a SIM_DB_SEVER ends a process's session (net_a indexes sim_severs,
 * whose sqlstate is NULL): a statement or COMMIT of the pipeline's that no
 * kill or cut link can aim at -- the API's ambiguous COMMIT, a relay's
 * pipelined mark, a consumer's COMMIT. */
#define SIM_SEVERS 7

/* Broker switch values: -1 leaves a switch as it is. */
enum sim_outage { SIM_OUTAGE_OFF = 0, SIM_OUTAGE_REFUSE, SIM_OUTAGE_HANG };

struct sim_act {
    enum sim_act_kind kind;
    int proc;                /* kill, pause, resume, restart */
    /* pay */
    int count, retries, authorize, capture;
    /* settle */
    int ms;
    /* broker switches: -1 leaves one unchanged, except drop (how many
     * publishes drop_before_confirm drops), which 0 leaves unchanged */
    int outage, duplicate, drop, max_payload;
    /* db: which fault; ms is the freeze's, the hold's or the lock's length or the
     * crash's downtime, proc the process whose sessions terminate ends (-1: every
     * process), net_a the locked table (sim_lock_tables), the refusal
     * (sim_refusals) or the sever (sim_severs), count how many statements
     * it refuses or severs */
    enum sim_db db;
    /* net: on proc's link to the broker (net_broker) or PostgreSQL; ms is
     * how long; net_a/net_b the fault's numbers (latency and jitter, rate,
     * slice size and delay, the byte limit; for a cut, net_a 1 means
     * "then reset") */
    enum sim_net net;
    int net_broker, net_a, net_b;
    /* resume, kill, net: the follow-up of a park fault, rendered after a
     * wait for that park (an anchor: every replay takes the two in one
     * order) */
    int after_park;
    /* restart: then a wait until the process has started (a consumer
     * logs its start once subscribed) */
    int await_start;
    /* restart: first a wait until the process has exited, when its
     * incarnation may crash on a fault of its own */
    int after_crash;
    /* settle: until caught up, whatever the events' age, at most ms */
    int caught_up;
};

struct sim_plan {
    uint64_t seed, run;
    int nprocs;
    struct sim_proc procs[SIM_MAX_PROCS];
    /* broker at start */
    int visibility_ms;
    int duplicate, reorder, delay_ms;   /* 0 = off */
    int durable_broker;                 /* the broker's store is a file */
    int nfaults;
    struct sim_fault faults[SIM_MAX_FAULTS];
    int nacts;
    struct sim_act acts[SIM_MAX_ACTS];
};

/* Fills plan with run `run` of seed `seed`: a pure function of (cat, seed,
 * run).  Uses only the points of cat whose component it knows (api/,
 * relay/, consumer/). */
void sim_generate(const struct sim_catalogue *cat, uint64_t seed, uint64_t run,
                  struct sim_plan *plan);

/* The scenario JSON of plan (caller frees), or NULL on out of memory.
 * name must be a valid scenario name ([a-z0-9-], at most 63).  title may
 * be NULL for a generated one.  Byte-identical output for equal plans. */
cJSON *sim_render(const struct sim_plan *plan, const char *name, const char *title);

/* "sim-S-I" into out. */
void sim_scenario_name(uint64_t seed, uint64_t run, char *out, size_t outlen);

/* One line saying what the plan does ("api relay-1 relay-2(held) acct-1 |
 * faults relay-1:relay/before_mark=park@1 | steps pay(4,auth) kill(relay-1)
 * settle(800) ...").  Truncated to outlen. */
void sim_describe(const struct sim_plan *plan, char *out, size_t outlen);

/* A measure of a plan's size: processes + faults + actions + payments (with
 * their retries, authorizations and captures) + the broker's settings at
 * start + (hit - 1) and every of each fault.  Every shrinking edit lowers it. */
long sim_plan_size(const struct sim_plan *plan);

/* The k-th one-edit-smaller variant of in (k = 0, 1, ...): drop a process,
 * an action, a fault, a broker switch, fewer payments, an earlier hit...
 * Returns 1 with the variant in out and its description in what, or 0 when
 * there is no k-th variant.  Every variant has sim_plan_size < that of in. */
int sim_shrink_variant(const struct sim_plan *in, int k, struct sim_plan *out,
                       char *what, size_t whatlen);

/* ---- the command --------------------------------------------------------- */

/* `crashwindow sim --seed S [--runs N] [--time-budget SECONDS] [--out DIR]
 * [--replay S:I] [--shrink] [--shrink-budget SECONDS] [--bin DIR]
 * [--pg CONNINFO] [--max-failures N] [--dry-run] [--keep-passing]`.
 * Exit: 0 every run passed, 1 a run failed (or could not run), 2 bad usage. */
int simulator_main(int argc, char **argv);

#endif
