/* fault.h -- named crash windows, compiled in with CW_FAULTS=ON.
 *
 * Every crash window of the pipeline is a libfiu point named
 * "component/window" (relay/after_publish, consumer/after_commit, ...), listed
 * in fault-points/catalogue.json.  A code site marks its window with
 *
 *     CW_FAULT("relay/before_mark", goto fail);
 *
 * which expands to libfiu's fiu_do_on: without FIU_ENABLE nothing remains.
 * When the point fires, fault_fire() writes a fault_hit event and performs the
 * action; the second argument runs only for the "fail" action.
 *
 * Actions (the failinfo of the libfiu point, so fiu-ctrl can pick one):
 *   failinfo 0   crash  raise(SIGKILL): no atexit, no flush, no cleanup
 *   failinfo 1   fail   the code site takes its error path
 *   failinfo 2   park   raise(SIGSTOP): the runner acts while the process is
 *                       frozen exactly at the window, then SIGCONT or SIGKILL
 *   failinfo N>2 stall  sleep N milliseconds, then go on
 *
 * At start, fault_init() reads CW_FAULTS from the environment and removes it
 * (so a restarted process does not re-fire a one-time fault by inheritance):
 *
 *   CW_FAULTS="relay/after_publish=crash@2;consumer/apply_fail=fail@1+"
 *
 * each item NAME=ACTION[:MS][@N][+]: fire on the Nth hit (default 1), once,
 * or on every hit from the Nth on with '+'.  fault_init() also opens libfiu's
 * remote control FIFOs, PREFIX-PID.in/.out, mode 0600, in a directory only
 * this user can use: CW_FIU_FIFO gives the prefix (its directory must be
 * ours, mode 0700, or remote control stays off), else a fresh mkdtemp
 * directory $TMPDIR/cwfiuXXXXXX (mode 0700) holds prefix "fiu", removed at
 * exit.  fault_fifo_prefix() names the prefix, and every program puts it in
 * its "start" event ("fault_fifo"), so that
 *
 *   fiu-ctrl -f /tmp/cwfiuAbC123/fiu -c "enable name=relay/after_publish,failinfo=2" PID
 *
 * parks a running relay at that window. */
#ifndef CW_FAULT_H
#define CW_FAULT_H

#include <stddef.h>

/* A build without fault points (CW_FAULTS=OFF) needs neither libfiu's header
 * nor its library: CW_FAULT compiles to nothing. */
#ifdef FIU_ENABLE
#include <fiu.h>
#endif

enum fault_action {
    FAULT_CRASH = 0,
    FAULT_FAIL = 1,
    FAULT_PARK = 2,
    FAULT_STALL = 3 /* any failinfo above 2: milliseconds to sleep */
};

/* Parses CW_FAULTS, enables its points and starts remote control.  Returns 0,
 * or -1 with a message in err naming the bad item (nothing is enabled then). */
int fault_init(char *err, size_t errlen);

/* The prefix of this process's control FIFOs (PREFIX-PID.in/.out), or NULL
 * when remote control is off (or the build has no fault points). */
const char *fault_fifo_prefix(void);

/* Called by CW_FAULT when its point fires.  Returns -1 when the action is
 * "fail", 0 otherwise (after a stall or a park has ended). */
int fault_fire(const char *name);

/* ---- the CW_FAULTS grammar ------------------------------------------------
 *
 * One parser serves every reader of the grammar: fault_init (what a process
 * accepts) and the scenario files (sim/scenario), which validate and
 * describe the values they hand to the processes, so that no scenario can
 * validate a value its process would refuse.  Its limits: */
#define FAULT_MAX_ITEMS 32          /* items in one value */
#define FAULT_ITEM_MAX 160          /* an item is shorter than this */
#define FAULT_NAME_MAX 96           /* a point name is shorter than this */
#define FAULT_HIT_MAX 1000000L      /* @N: 1 <= N <= this */
#define FAULT_STALL_MIN_MS 3L       /* stall:MS: MS within [min, max], */
#define FAULT_STALL_MAX_MS 3600000L /* written in fewer than 16 characters */

/* One item of a CW_FAULTS value. */
struct fault_item {
    char name[FAULT_NAME_MAX];  /* the point, "component/window" */
    enum fault_action action;
    long stall_ms;              /* FAULT_STALL: how long; 0 otherwise */
    long hit;                   /* fires on this hit (1-based; default 1) */
    int persistent;             /* '+': and on every hit after it */
};

/* Parses a CW_FAULTS value -- NAME=ACTION[:MS][@N][+] items separated by
 * ';', empty items skipped -- into items, without enabling anything.
 * Returns the number of items (0 for an empty value), or -1 with a message
 * in err naming the bad item (without a "CW_FAULTS: " prefix). */
int fault_parse_items(const char *spec, struct fault_item items[FAULT_MAX_ITEMS],
                      char *err, size_t errlen);

/* Parses one ACTION: "crash", "fail", "park" or "stall:MS" (*stall_ms is
 * then MS, else 0).  0, or -1 when text is none of them. */
int fault_parse_action(const char *text, enum fault_action *action, long *stall_ms);

/* Parses a CW_FAULTS value with fault_parse_items and enables its points
 * (fault_init's work; exposed for unit tests): the process's table holds
 * FAULT_MAX_ITEMS points in all, and a point beyond it is not enabled.
 * Returns the number of items, or -1 with "CW_FAULTS: ..." in err (nothing
 * is enabled then). */
int fault_parse_spec(const char *spec, char *err, size_t errlen);

#ifdef FIU_ENABLE
#define CW_FAULT(name, on_fail) \
    fiu_do_on(name, if (fault_fire(name) < 0) { on_fail; })
#else
#define CW_FAULT(name, on_fail) do { } while (0)
#endif

#endif
