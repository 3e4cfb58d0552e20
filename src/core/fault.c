/* fault.c -- firing named crash windows; see fault.h for the actions.
 *
 * Hit counting ("on the Nth hit") is not something libfiu does by itself, so
 * points enabled from CW_FAULTS use fiu_enable_external with a callback that
 * counts the hits of its point and says "fail" only on the chosen one(s).
 * Points enabled from outside with fiu-ctrl bypass the table: they fire on
 * every hit until disabled, which is what an operator at a terminal expects.
 *
 * libfiu's remote control obeys whoever can write its FIFO, and creates it
 * with mkfifo(PREFIX-PID.in, 0600) but also accepts one that already exists:
 * under a predictable path in /tmp another user could make the FIFO first,
 * world-writable, and crash or freeze the process.  So the FIFOs only ever
 * go into a directory that is this user's alone (mode 0700): one made with
 * mkdtemp when CW_FIU_FIFO is unset, or, when it is set, a directory that is
 * checked to be ours and closed to others; otherwise remote control is off. */
#include "fault.h"
#include "cwlog.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <pthread.h>

#ifdef FIU_ENABLE
#include <fiu-control.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

/* The prefix of this process's control FIFOs; "" while remote control is off. */
static char fifo_prefix[PATH_MAX + 8];

/* A point enabled from CW_FAULTS, with its hits counted so far. */
struct fault_spec {
    char name[FAULT_NAME_MAX];
    long hit;        /* fire on this hit (1-based) */
    int persistent;  /* keep firing on every later hit */
    long seen;       /* hits counted so far */
};

static struct fault_spec specs[FAULT_MAX_ITEMS];
static int nspecs;
static pthread_mutex_t spec_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *action_name(uintptr_t info)
{
    switch (info) {
    case FAULT_CRASH: return "crash";
    case FAULT_FAIL: return "fail";
    case FAULT_PARK: return "park";
    default: return "stall";
    }
}

#ifdef FIU_ENABLE
static int spec_cb(const char *name, int *failnum, void **failinfo,
                   unsigned int *flags)
{
    int fire = 0;
    pthread_mutex_lock(&spec_lock);
    for (int i = 0; i < nspecs; i++) {
        if (strcmp(specs[i].name, name) != 0)
            continue;
        specs[i].seen++;
        fire = specs[i].seen == specs[i].hit ||
               (specs[i].persistent && specs[i].seen > specs[i].hit);
        break;
    }
    pthread_mutex_unlock(&spec_lock);
    return fire;
}
#endif

int fault_parse_action(const char *text, enum fault_action *action, long *stall_ms)
{
    *stall_ms = 0;
    if (strcmp(text, "crash") == 0) {
        *action = FAULT_CRASH;
    } else if (strcmp(text, "fail") == 0) {
        *action = FAULT_FAIL;
    } else if (strcmp(text, "park") == 0) {
        *action = FAULT_PARK;
    } else if (strncmp(text, "stall:", 6) == 0 && text[6] != '\0') {
        /* strtol of a bounded copy: 16 characters hold any valid MS, and a
         * longer text (leading zeros, say) is refused rather than read. */
        char buf[16];
        size_t n = strlen(text + 6);
        if (n >= sizeof(buf))
            return -1;
        memcpy(buf, text + 6, n + 1);
        char *end;
        long ms = strtol(buf, &end, 10);
        if (*end != '\0' || ms < FAULT_STALL_MIN_MS || ms > FAULT_STALL_MAX_MS)
            return -1;
        *action = FAULT_STALL;
        *stall_ms = ms;
    } else {
        return -1;
    }
    return 0;
}

int fault_parse_items(const char *spec, struct fault_item items[FAULT_MAX_ITEMS],
                      char *err, size_t errlen)
{
    int n = 0;
    const char *p = spec;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0) {
            p = end ? end + 1 : NULL;
            continue;
        }
        if (n == FAULT_MAX_ITEMS) {
            snprintf(err, errlen, "more than %d items", FAULT_MAX_ITEMS);
            return -1;
        }
        char item[FAULT_ITEM_MAX];
        if (len >= sizeof(item)) {
            snprintf(err, errlen, "item too long (at most %d characters)", FAULT_ITEM_MAX - 1);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';

        struct fault_item *it = &items[n];
        memset(it, 0, sizeof(*it));
        it->hit = 1;
        char *eq = strchr(item, '=');
        if (eq == NULL || eq == item) {
            snprintf(err, errlen, "'%s' is not NAME=ACTION", item);
            return -1;
        }
        *eq = '\0';
        if (strlen(item) >= sizeof(it->name)) {
            snprintf(err, errlen, "point name '%.40s...' too long (at most %d characters)",
                     item, FAULT_NAME_MAX - 1);
            return -1;
        }
        memcpy(it->name, item, strlen(item) + 1); /* its length was checked above */
        char *act = eq + 1;
        size_t alen = strlen(act);
        if (alen > 0 && act[alen - 1] == '+') {
            it->persistent = 1;
            act[--alen] = '\0';
        }
        char *at = strchr(act, '@');
        if (at != NULL) {
            char *e;
            it->hit = strtol(at + 1, &e, 10);
            if (*e != '\0' || it->hit < 1 || it->hit > FAULT_HIT_MAX) {
                snprintf(err, errlen, "bad hit number for %s (want @N, 1 <= N <= %ld)",
                         it->name, FAULT_HIT_MAX);
                return -1;
            }
            *at = '\0';
        }
        if (fault_parse_action(act, &it->action, &it->stall_ms) < 0) {
            snprintf(err, errlen, "bad action '%s' for %s (crash, fail, park, stall:MS)",
                     act, it->name);
            return -1;
        }
        n++;
        p = end ? end + 1 : NULL;
    }
    return n;
}

int fault_parse_spec(const char *spec, char *err, size_t errlen)
{
    struct fault_item items[FAULT_MAX_ITEMS];
    char why[256];
    int n = fault_parse_items(spec, items, why, sizeof(why));
    if (n < 0) {
        snprintf(err, errlen, "CW_FAULTS: %s", why);
        return -1;
    }

    pthread_mutex_lock(&spec_lock);
    for (int i = 0; i < n && nspecs < FAULT_MAX_ITEMS; i++) {
        struct fault_spec *fs = &specs[nspecs++];
        memset(fs, 0, sizeof(*fs));
        memcpy(fs->name, items[i].name, sizeof(fs->name)); /* both FAULT_NAME_MAX */
        fs->hit = items[i].hit;
        fs->persistent = items[i].persistent;
#ifdef FIU_ENABLE
        /* The failinfo fault_fire decodes: the action, or a stall's ms. */
        uintptr_t info = items[i].action == FAULT_STALL ? (uintptr_t)items[i].stall_ms
                                                        : (uintptr_t)items[i].action;
        fiu_enable_external(items[i].name, 1, (void *)info, 0, spec_cb);
#endif
    }
    pthread_mutex_unlock(&spec_lock);
    return n;
}

#ifdef FIU_ENABLE
/* The directory made for this process's FIFOs when CW_FIU_FIFO is unset;
 * removed at exit, after libfiu's own atexit handler has removed the FIFOs
 * (handlers run in reverse order of registration). */
static char own_dir[PATH_MAX];

static void remove_own_dir(void)
{
    if (own_dir[0] != '\0')
        rmdir(own_dir);
}

/* Is the directory of prefix a real directory (not a link), owned by us,
 * that no one else may enter?  0, or -1 with the reason in why. */
static int dir_is_private(const char *prefix, char *why, size_t whylen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(prefix, '/');
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == prefix)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - prefix), prefix);
    struct stat st;
    if (lstat(dir, &st) < 0) {
        snprintf(why, whylen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        snprintf(why, whylen, "%s is not a directory of this user's with mode 0700", dir);
        return -1;
    }
    return 0;
}

/* Makes PREFIX-PID.in/.out exactly 0600, whatever the umask made of them. */
static void tighten_fifos(const char *prefix)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof(path), "%s-%d.in", prefix, (int)getpid());
    chmod(path, 0600);
    snprintf(path, sizeof(path), "%s-%d.out", prefix, (int)getpid());
    chmod(path, 0600);
}

/* Opens libfiu's remote control in a private directory (fault_fifo_prefix
 * names it afterwards).  A failure turns remote control off, with a
 * warning: the process still runs, its CW_FAULTS still fire. */
static void start_remote_control(void)
{
    char prefix[PATH_MAX + 8], why[PATH_MAX + 64];
    const char *given = getenv("CW_FIU_FIFO");
    if (given != NULL && given[0] != '\0') {
        snprintf(prefix, sizeof(prefix), "%s", given);
        if (dir_is_private(prefix, why, sizeof(why)) < 0) {
            cwlog_warn("fault control off: CW_FIU_FIFO=%s: %s", prefix, why);
            return;
        }
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(own_dir, sizeof(own_dir), "%s/cwfiuXXXXXX",
                 tmp != NULL && tmp[0] == '/' ? tmp : "/tmp");
        if (mkdtemp(own_dir) == NULL) {
            cwlog_warn("fault control off: mkdtemp %s: %s", own_dir, strerror(errno));
            own_dir[0] = '\0';
            return;
        }
        atexit(remove_own_dir);
        snprintf(prefix, sizeof(prefix), "%s/fiu", own_dir);
    }
    if (fiu_rc_fifo(prefix) < 0) {
        cwlog_warn("could not open fault control fifo %s (remote control off)", prefix);
        return;
    }
    tighten_fifos(prefix);
    snprintf(fifo_prefix, sizeof(fifo_prefix), "%s", prefix);
}
#endif

const char *fault_fifo_prefix(void)
{
    return fifo_prefix[0] != '\0' ? fifo_prefix : NULL;
}

int fault_init(char *err, size_t errlen)
{
#ifdef FIU_ENABLE
    fiu_init(0);
    const char *spec = getenv("CW_FAULTS");
    if (spec != NULL) {
        char *copy = strdup(spec);
        /* Remove it before anything else runs: a restarted process gets a
         * fresh environment from its parent, never this one's faults. */
        unsetenv("CW_FAULTS");
        int rc = fault_parse_spec(copy, err, errlen);
        free(copy);
        if (rc < 0)
            return -1;
    }
    start_remote_control();
#else
    (void)err;
    (void)errlen;
    if (getenv("CW_FAULTS") != NULL) {
        snprintf(err, errlen, "CW_FAULTS is set but this build has no fault points (CW_FAULTS=OFF)");
        return -1;
    }
#endif
    return 0;
}

#ifdef CW_COVERAGE
void __gcov_dump(void); /* libgcov's, linked by --coverage */
#endif

int fault_fire(const char *name)
{
#ifdef FIU_ENABLE
    uintptr_t info = (uintptr_t)fiu_failinfo();
#else
    uintptr_t info = FAULT_FAIL;
#endif
    cJSON *ev = cwlog_begin("fault_hit");
    cJSON_AddStringToObject(ev, "point", name);
    cJSON_AddStringToObject(ev, "action", action_name(info));
    if (info > FAULT_PARK)
        cJSON_AddNumberToObject(ev, "stall_ms", (double)info);
    cwlog_emit(ev);

    switch (info) {
    case FAULT_CRASH:
#ifdef CW_COVERAGE
        /* SIGKILL writes no gcov counters: a coverage build saves them
         * first, or every path up to a crash window would count as never
         * run (scripts/coverage). */
        __gcov_dump();
#endif
        raise(SIGKILL);
        return 0; /* not reached */
    case FAULT_FAIL:
        return -1;
    case FAULT_PARK:
        raise(SIGSTOP);
        cwlog_simple("fault_resumed", "point", name);
        return 0;
    default: {
        struct timespec ts = { (time_t)(info / 1000), (long)(info % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) != 0)
            ;
        return 0;
    }
    }
}
