/* netproxy.c -- the TCP fault proxy's event loop; see netproxy.h.
 *
 * One thread polls every listening socket and every connection.  A
 * connection is a pair of sockets (client, server) and two directions; each
 * direction is a queue of chunks, each with the monotonic time before which
 * it must not be written: latency, bandwidth and the slicer only choose
 * those times, so order within a direction always holds.  A direction stops
 * reading while QUEUE_CAP bytes wait in it, so a slow peer slows its sender
 * instead of growing the queue.
 *
 * The faults of a link sit behind the proxy's mutex: the daemon's control
 * thread writes them, the loop reads them once per pass and on every chunk.  A
 * pipe wakes the loop when they change.
 *
 * Windows: every PostgreSQL and AMQP connection is scanned both ways
 * (np_wire, netproxy_frames.c), so that a window set on a live connection
 * knows where frames begin.  While a window is armed in a direction, the
 * bytes of a frame that may still turn out to be its frame wait in the
 * direction's stash until the scanner decides; when a window fires, the
 * stash keeps everything from the frame's first byte on ("held").  A kill
 * drops it and closes the connection once what came before has gone out; a
 * pause keeps it until the process is seen running again (the loop reads
 * its state in /proc every few milliseconds), then passes it.  Releasing
 * at the resume rather than right after SIGSTOP is what keeps a frame the
 * client sent from reaching the server while the client is stopped. */
#include "netproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 64
#define MAX_FAULTS 4
#define QUEUE_CAP (256 * 1024)
#define READ_MAX 65536
#define HOLD_POLL_MS 5       /* how often a paused window looks at its process */
#define HOLD_STOP_MS 1000    /* a process never seen stopped in this long is running */

struct chunk {
    struct chunk *next;
    int64_t due;             /* mono ms: not written before */
    size_t len, off;
    unsigned char data[];
};

struct dir {
    int from, to;            /* indices 0 client, 1 server */
    struct chunk *head, *tail;
    size_t queued;
    int64_t last_due;        /* order: no chunk due before the one ahead */
    int sink;                /* the fd written to, for the direct path */
    int64_t bw_next;
    long long sent;          /* bytes passed, for limit_data */
    int eof;                 /* its source closed: shut the sink once drained */
    int shut;
    int cut;                 /* a cut fired: this direction swallows everything */
    struct np_pgscan pg;
    struct np_linescan lines;
    unsigned char *stash;    /* read, not passed yet: an undecided frame, or held */
    size_t stashlen, stashcap;
    long long stash_at;      /* the stream offset of stash[0] */
    long long stash_gap;     /* heartbeats taken out of the held stash after stash[0] */
    int held;                /* a window fired: nothing passes but heartbeats */
};

struct conn {
    struct conn *next;
    struct link *link;
    int fd[2];
    struct dir d[2];         /* 0: up (client -> server), 1: down */
    int reset_after[2];      /* a cut with reset: reset once direction i drained */
    int commit_seen;         /* cut commit: the answer to drop is the next one */
    int dead;
    struct np_wire wire;     /* the frames both ways, for the windows */
    int hold_pid;            /* a paused window holds this connection for it */
    int hold_stopped;        /* it was seen stopped */
    int64_t hold_since;      /* mono ms: when it fired */
    int close_after[2];      /* a kill: close once direction i drained */
};

struct link {
    char name[64];
    enum np_proto proto;
    int lfd;
    char upstream[160];
    struct np_fault faults[MAX_FAULTS];
    int64_t until[MAX_FAULTS];   /* mono ms; 0: no end */
    int cuts_left[MAX_FAULTS];   /* cut, window: firings left */
    int skip_left[MAX_FAULTS];   /* window: matching frames still to let pass */
    int nfaults;
    int kill_now;                /* reset or down: act on the open connections */
    struct np_stats stats;
    struct np_firing fired[NP_MAX_FIRINGS];  /* the last ones, a ring */
    long long nfired;                        /* every firing so far */
};

struct netproxy {
    pthread_t thread;
    pthread_mutex_t lock;
    int wake[2];
    int stop;
    struct link links[MAX_LINKS];
    int nlinks;
    struct conn *conns;
    unsigned rnd;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- addresses ----------------------------------------------------------- */

/* Fills sa from "tcp:HOST:PORT" or "unix:PATH".  0 or -1. */
static int parse_addr(const char *addr, struct sockaddr_storage *sa, socklen_t *len)
{
    memset(sa, 0, sizeof(*sa));
    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)sa;
        if (strlen(addr + 5) >= sizeof(un->sun_path))
            return -1;
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, addr + 5);
        *len = sizeof(*un);
        return 0;
    }
    if (strncmp(addr, "tcp:", 4) != 0)
        return -1;
    char host[64];
    const char *colon = strrchr(addr + 4, ':');
    if (colon == NULL || (size_t)(colon - addr - 4) >= sizeof(host))
        return -1;
    memcpy(host, addr + 4, (size_t)(colon - addr - 4));
    host[colon - addr - 4] = '\0';
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
        return -1;
    *len = sizeof(*in);
    return 0;
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* fails on Unix: fine */
}

/* Closes fd so that its peer sees a reset (TCP) rather than an orderly end. */
static void close_reset(int fd)
{
    struct linger lg = { 1, 0 };
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
}

/* ---- faults as the loop sees them --------------------------------------- */

/* The fault of kind k acting on direction di (0 up, 1 down), or NULL.
 * Called with the lock held. */
static struct np_fault *fault_on(struct link *l, enum np_kind k, int di)
{
    for (int i = 0; i < l->nfaults; i++) {
        struct np_fault *f = &l->faults[i];
        if (f->kind == k && (f->dir == NP_BOTH || (int)f->dir == di + 1))
            return f;
    }
    return NULL;
}

/* Drops faults whose time ran out.  Lock held. */
static void expire_faults(struct link *l, int64_t now)
{
    for (int i = 0; i < l->nfaults;) {
        if ((l->until[i] > 0 && now >= l->until[i]) ||
            ((l->faults[i].kind == NP_CUT || l->faults[i].kind == NP_WINDOW) &&
             l->cuts_left[i] <= 0)) {
            l->nfaults--;
            l->faults[i] = l->faults[l->nfaults];
            l->until[i] = l->until[l->nfaults];
            l->cuts_left[i] = l->cuts_left[l->nfaults];
            l->skip_left[i] = l->skip_left[l->nfaults];
        } else {
            i++;
        }
    }
}

/* ---- connections --------------------------------------------------------- */

/* The statement text a window of l marks transactions by, or NULL: one
 * per link (netproxy_set refuses a second).  Lock held. */
static const char *link_mark(const struct link *l)
{
    for (int i = 0; i < l->nfaults; i++)
        if (l->faults[i].kind == NP_WINDOW && l->faults[i].transaction_with[0] != '\0')
            return l->faults[i].transaction_with;
    return NULL;
}

static void conn_close(struct conn *c, int reset)
{
    if (c->dead)
        return;
    for (int i = 0; i < 2; i++) {
        if (c->fd[i] >= 0) {
            if (reset)
                close_reset(c->fd[i]);
            else
                close(c->fd[i]);
            c->fd[i] = -1;
        }
        struct chunk *ch = c->d[i].head;
        while (ch != NULL) {
            struct chunk *nx = ch->next;
            free(ch);
            ch = nx;
        }
        c->d[i].head = c->d[i].tail = NULL;
        c->d[i].queued = 0;
        free(c->d[i].stash);
        c->d[i].stash = NULL;
        c->d[i].stashlen = c->d[i].stashcap = 0;
    }
    c->dead = 1;
}

static void accept_one(struct netproxy *np, struct link *l)
{
    int cfd = accept4(l->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0)
        return;
    pthread_mutex_lock(&np->lock);
    int refused = fault_on(l, NP_DOWN, 0) != NULL;
    l->stats.accepted++;
    pthread_mutex_unlock(&np->lock);
    struct sockaddr_storage sa;
    socklen_t salen;
    int sfd = -1;
    if (!refused && parse_addr(l->upstream, &sa, &salen) == 0) {
        sfd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        /* Loopback and Unix connects finish at once or fail at once (a
         * refused port, a missing socket): the client then sees its
         * connection closed, as it would with the server down. */
        if (sfd >= 0 && connect(sfd, (struct sockaddr *)&sa, salen) < 0 &&
            errno != EINPROGRESS) {
            close(sfd);
            sfd = -1;
        }
    }
    struct conn *c = sfd < 0 ? NULL : calloc(1, sizeof(*c));
    if (c == NULL) {
        if (sfd >= 0)
            close(sfd);
        close_reset(cfd);
        return;
    }
    set_nodelay(cfd);
    set_nodelay(sfd);
    c->link = l;
    c->fd[0] = cfd;
    c->fd[1] = sfd;
    c->d[0].from = 0;
    c->d[0].to = 1;
    c->d[1].from = 1;
    c->d[1].to = 0;
    c->d[0].sink = sfd;
    c->d[1].sink = cfd;
    np_wire_init(&c->wire, l->proto);
    np_wire_mark(&c->wire, link_mark(l));
    c->next = np->conns;
    np->conns = c;
}

static void enqueue(struct dir *d, const unsigned char *buf, size_t n, int64_t due,
                    int64_t now)
{
    if (n == 0)
        return;
    if (due <= now && d->head == NULL) {
        /* Nothing waits ahead and nothing holds these bytes back: straight
         * to the sink, and only what it did not take is queued. */
        ssize_t w = send(d->sink, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            if (n == 0)
                return;
        }
    }
    struct chunk *ch = malloc(sizeof(*ch) + n);
    if (ch == NULL)
        return;
    if (due < d->last_due)
        due = d->last_due;
    d->last_due = due;
    ch->next = NULL;
    ch->due = due;
    ch->len = n;
    ch->off = 0;
    memcpy(ch->data, buf, n);
    if (d->tail)
        d->tail->next = ch;
    else
        d->head = ch;
    d->tail = ch;
    d->queued += n;
}

/* Queues n bytes read in direction di, shaped by the link's faults.
 * Lock held. */
static void shape(struct netproxy *np, struct conn *c, int di, const unsigned char *buf,
                  size_t n, int64_t now)
{
    struct dir *d = &c->d[di];
    struct link *l = c->link;
    int64_t due = now;
    struct np_fault *f = fault_on(l, NP_LATENCY, di);
    if (f != NULL) {
        int jitter = f->jitter_ms > 0 ? (int)(rand_r(&np->rnd) % (2u * f->jitter_ms + 1)) -
                                        f->jitter_ms : 0;
        /* now is the millisecond the bytes arrived in, truncated: one more
         * makes the delay never shorter than asked, at most 1 ms longer */
        due = now + f->latency_ms + jitter + 1;
    }
    f = fault_on(l, NP_BANDWIDTH, di);
    if (f != NULL) {
        if (d->bw_next < due)
            d->bw_next = due;
        d->bw_next += (int64_t)n / f->rate_kbps; /* kB/s is bytes per ms */
        due = d->bw_next;
    }
    f = fault_on(l, NP_SLICER, di);
    if (f != NULL) {
        for (size_t at = 0; at < n; at += (size_t)f->slice_bytes) {
            size_t k = n - at < (size_t)f->slice_bytes ? n - at : (size_t)f->slice_bytes;
            enqueue(d, buf + at, k, due, now);
            due = d->last_due + f->slice_delay_ms;
        }
        return;
    }
    enqueue(d, buf, n, due, now);
}

/* A cut fires on c in direction di: what follows is dropped, then the
 * connection is blackholed or reset.  Lock held. */
static void cut_fire(struct conn *c, struct np_fault *f, int idx)
{
    c->link->cuts_left[idx]--;
    c->link->stats.cuts++;
    if (f->then == NP_THEN_RESET)
        c->link->stats.resets++;
    c->d[0].cut = c->d[1].cut = 1;
}

/* The protocol-aware cut of the link on bytes just read in direction di:
 * how many of them may pass (n when no cut fires).  Lock held. */
static size_t cut_scan(struct conn *c, int di, const unsigned char *buf, size_t n,
                       int *reset)
{
    struct link *l = c->link;
    for (int i = 0; i < l->nfaults; i++) {
        struct np_fault *f = &l->faults[i];
        if (f->kind != NP_CUT || l->cuts_left[i] <= 0)
            continue;
        if (f->cut_after == NP_CUT_COMMIT) {
            if (di == 0) {
                if (np_pgscan_feed(&c->d[0].pg, buf, n) >= 0)
                    c->commit_seen = 1;
                return n;
            }
            if (!c->commit_seen)
                return n;
            /* the answer to the COMMIT: dropped whole */
            cut_fire(c, f, i);
            *reset = f->then == NP_THEN_RESET;
            return 0;
        }
        int want = f->cut_after == NP_CUT_CONFIRM ? 1 : 0;
        if (di != want)
            return n;
        long at = np_linescan_feed(&c->d[di].lines,
                                   f->cut_after == NP_CUT_CONFIRM ? "confirm" : "ack",
                                   (const char *)buf, n);
        if (at < 0)
            return n;
        cut_fire(c, f, i);
        *reset = f->then == NP_THEN_RESET;
        return (size_t)at;
    }
    /* No cut armed: keep the PostgreSQL scanner in step anyway, so a cut
     * set on a live connection knows where messages begin. */
    if (l->proto == NP_PG && di == 0)
        np_pgscan_feed(&c->d[0].pg, buf, n);
    return n;
}

/* ---- windows ------------------------------------------------------------- */

/* Whether a window of link l waits for a frame travelling in direction di.
 * Lock held. */
static int window_armed(const struct link *l, int di)
{
    for (int i = 0; i < l->nfaults; i++)
        if (l->faults[i].kind == NP_WINDOW && l->cuts_left[i] > 0 &&
            np_frame_dir(l->faults[i].frame) == di)
            return 1;
    return 0;
}

/* Appends n bytes that begin at stream offset at to d's stash.  0, or -1
 * when out of memory. */
static int stash_put(struct dir *d, long long at, const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (d->stashlen == 0) {
        d->stash_at = at;
        d->stash_gap = 0;
    }
    if (d->stashlen + n > d->stashcap) {
        size_t cap = d->stashcap ? d->stashcap * 2 : 256;
        while (cap < d->stashlen + n)
            cap *= 2;
        unsigned char *grown = realloc(d->stash, cap);
        if (grown == NULL)
            return -1;
        d->stash = grown;
        d->stashcap = cap;
    }
    memcpy(d->stash + d->stashlen, p, n);
    d->stashlen += n;
    return 0;
}

/* Moves the stash's bytes [from, to) (stream offsets, at or after every
 * heartbeat taken out before) to out + *o. */
static void stash_move(struct dir *d, long long from, long long to, unsigned char *out,
                       size_t *o)
{
    long long a = from - d->stash_at - d->stash_gap, b = to - d->stash_at - d->stash_gap;
    if (a < 0)
        a = 0;
    if (b > (long long)d->stashlen)
        b = (long long)d->stashlen;
    if (b <= a)
        return;
    size_t k = (size_t)(b - a);
    memcpy(out + *o, d->stash + a, k);
    *o += k;
    memmove(d->stash + a, d->stash + a + k, d->stashlen - (size_t)a - k);
    d->stashlen -= k;
    if (a == 0)
        d->stash_at += (long long)k; /* from the front: never while a heartbeat is out */
    else
        d->stash_gap += (long long)k;
}

/* Records a firing of window f of link l, sends its signal (a drop sends
 * none) and, for a pause, makes c wait for the process.  Lock held. */
static void window_fire(struct conn *c, struct np_fault *f, int idx)
{
    struct link *l = c->link;
    l->cuts_left[idx]--;
    l->stats.windows++;
    int e = 0;
    if (f->action != NP_ACTION_DROP &&
        kill(f->pid, f->action == NP_ACTION_PAUSE ? SIGSTOP : SIGKILL) != 0)
        e = errno;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct np_firing *fr = &l->fired[l->nfired++ % NP_MAX_FIRINGS];
    fr->ts_us = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    fr->frame = f->frame;
    fr->action = f->action;
    fr->pid = f->pid;
    fr->signal_errno = e;
    if (f->action == NP_ACTION_PAUSE) {
        c->hold_pid = f->pid;
        c->hold_stopped = 0;
        c->hold_since = mono_ms();
    }
}

/* The window of c's link that frame hit fires, if any: its action, or -1
 * (none waits for it, or it let the frame pass as one to skip).  Lock held. */
static int window_match(struct conn *c, int di, const struct np_hit *hit)
{
    struct link *l = c->link;
    (void)di; /* a frame travels one way: its window's */
    for (int i = 0; i < l->nfaults; i++) {
        struct np_fault *f = &l->faults[i];
        if (f->kind != NP_WINDOW || (int)f->frame != hit->frame || l->cuts_left[i] <= 0)
            continue;
        if (f->transaction_with[0] != '\0' && !hit->marked)
            continue; /* a COMMIT of another transaction: not this window's */
        if (l->skip_left[i] > 0) {
            l->skip_left[i]--;
            return -1;
        }
        window_fire(c, f, i);
        return f->action;
    }
    return -1;
}

/* The windows on n bytes just read in direction di: what may pass now into
 * out (room for the stash and n), the rest kept in the stash.  Returns 1
 * when a kill or a drop fired (what follows the frame is dropped), else 0.
 * Lock held. */
static int window_filter(struct conn *c, int di, const unsigned char *buf, size_t n,
                         unsigned char *out, size_t *outlen)
{
    struct dir *d = &c->d[di];
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        struct np_hit hit;
        long long at = c->wire.s[di].pos;
        size_t k = np_wire_feed(&c->wire, di, buf + i, n - i, &hit);
        if (stash_put(d, at, buf + i, k) < 0) {
            /* no memory to hold: the bytes pass, the window may miss */
            stash_move(d, d->stash_at, at, out, &o);
            memcpy(out + o, buf + i, k);
            o += k;
            i += k;
            continue;
        }
        i += k;
        /* a frame whose first bytes passed already cannot be held */
        int whole = hit.at >= d->stash_at && d->stashlen > 0;
        if (hit.frame == NP_FRAME_HEARTBEAT && d->held && whole) {
            stash_move(d, hit.at, hit.end, out, &o);
        } else if (hit.frame >= 0 && hit.frame != NP_FRAME_HEARTBEAT && !d->held && whole) {
            int action = window_match(c, di, &hit);
            if (action >= 0) {
                stash_move(d, d->stash_at, hit.at, out, &o);
                d->held = 1;
                if (action == NP_ACTION_KILL || action == NP_ACTION_DROP) {
                    d->stashlen = 0;
                    *outlen = o;
                    return 1;
                }
            }
        }
        if (!d->held)
            stash_move(d, d->stash_at, np_wire_safe(&c->wire, di), out, &o);
    }
    *outlen = o;
    return 0;
}

/* Keeps the scanner of direction di in step with bytes that pass
 * unfiltered (no window waits on that direction). */
static void window_follow(struct conn *c, int di, const unsigned char *buf, size_t n)
{
    struct np_hit hit;
    for (size_t i = 0; i < n;)
        i += np_wire_feed(&c->wire, di, buf + i, n - i, &hit);
}

/* A paused window's connection: dropped and closed when its process is
 * gone, released when it runs again.  Lock held. */
static void hold_check(struct netproxy *np, struct conn *c, int64_t now)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", c->hold_pid);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fgets(stat, sizeof(stat), f) == NULL)
            stat[0] = '\0';
        fclose(f);
    }
    const char *paren = strrchr(stat, ')');
    char state = paren != NULL && paren[1] == ' ' ? paren[2] : 0;
    if (state == 0 || state == 'Z' || state == 'X') {
        conn_close(c, 0); /* the process died holding: what it had not read is gone */
        return;
    }
    if (state == 'T' || state == 't') {
        c->hold_stopped = 1;
        return;
    }
    if (!c->hold_stopped && now - c->hold_since < HOLD_STOP_MS)
        return; /* SIGSTOP not delivered yet */
    c->hold_pid = 0;
    for (int di = 0; di < 2; di++) {
        struct dir *d = &c->d[di];
        if (!d->held)
            continue;
        d->held = 0;
        shape(np, c, di, d->stash, d->stashlen, now);
        d->sent += (long long)d->stashlen;
        d->stash_at += (long long)d->stashlen;
        d->stashlen = 0;
    }
}

/* Reads what direction di's source has and queues it.  Returns -1 when the
 * connection must close (reset set when it must be reset). */
static int pump_in(struct netproxy *np, struct conn *c, int di, int64_t now, int *reset)
{
    struct dir *d = &c->d[di];
    unsigned char buf[READ_MAX];
    ssize_t got = read(c->fd[d->from], buf, sizeof(buf));
    if (got < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : (*reset = 1, -1);
    if (got == 0) {
        d->eof = 1;
        pthread_mutex_lock(&np->lock);
        if (!d->held && d->stashlen > 0 && !d->cut) {
            /* an undecided frame that will never end: it passes as it is */
            shape(np, c, di, d->stash, d->stashlen, now);
            d->stash_at += (long long)d->stashlen;
            d->stashlen = 0;
        }
        pthread_mutex_unlock(&np->lock);
        return 0;
    }
    size_t n = (size_t)got;
    pthread_mutex_lock(&np->lock);
    struct link *l = c->link;
    if (di == 0)
        l->stats.bytes_up += (long long)n;
    else
        l->stats.bytes_down += (long long)n;
    int rc = 0;
    unsigned char *filtered = NULL;
    const unsigned char *pass_buf = buf;
    if (!d->cut && (d->held || d->stashlen > 0 || window_armed(l, di))) {
        filtered = malloc(d->stashlen + n);
        size_t len = 0;
        if (filtered == NULL) {
            window_follow(c, di, buf, n); /* no memory to hold: the window may miss */
        } else if (window_filter(c, di, buf, n, filtered, &len)) {
            /* a kill or a drop: what came before the frame goes out, then
             * the connection closes; nothing else passes either way */
            shape(np, c, di, filtered, len, now);
            d->sent += (long long)len;
            c->d[0].cut = c->d[1].cut = 1;
            c->close_after[di] = 1;
            c->d[1 - di].stashlen = 0;
        } else {
            pass_buf = filtered;
            n = len;
        }
    } else {
        window_follow(c, di, buf, n);
    }
    if (!d->cut) {
        int cut_reset = 0;
        size_t pass = cut_scan(c, di, pass_buf, n, &cut_reset);
        struct np_fault *lim = fault_on(l, NP_LIMIT_DATA, di);
        if (lim != NULL && d->sent + (long long)pass >= lim->limit_bytes) {
            pass = (size_t)(lim->limit_bytes - d->sent > 0 ? lim->limit_bytes - d->sent : 0);
            d->eof = 1; /* drain what is allowed, then close */
            c->d[1 - di].eof = 1;
        }
        if (fault_on(l, NP_BLACKHOLE, di) == NULL) {
            shape(np, c, di, pass_buf, pass, now);
            d->sent += (long long)pass;
        }
        if (cut_reset)
            c->reset_after[di] = 1; /* what came before the cut still goes out */
    }
    pthread_mutex_unlock(&np->lock);
    free(filtered);
    return rc;
}

/* Writes what is due in direction di.  -1 when the sink failed. */
static int pump_out(struct conn *c, int di, int64_t now)
{
    struct dir *d = &c->d[di];
    while (d->head != NULL && d->head->due <= now) {
        struct chunk *ch = d->head;
        ssize_t w = send(c->fd[d->to], ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL);
        if (w < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        ch->off += (size_t)w;
        d->queued -= (size_t)w;
        if (ch->off < ch->len)
            return 0;
        d->head = ch->next;
        if (d->head == NULL)
            d->tail = NULL;
        free(ch);
    }
    if (d->eof && d->head == NULL && !d->held && !d->shut) {
        shutdown(c->fd[d->to], SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

/* ---- the loop ------------------------------------------------------------ */

/* Applies reset and down to the open connections, drops spent faults.
 * Returns the earliest fault end (mono ms), or 0. */
static int64_t apply_link_faults(struct netproxy *np, int64_t now)
{
    int64_t next = 0;
    pthread_mutex_lock(&np->lock);
    for (int i = 0; i < np->nlinks; i++) {
        struct link *l = &np->links[i];
        expire_faults(l, now);
        if (l->kill_now) {
            for (struct conn *c = np->conns; c != NULL; c = c->next)
                if (c->link == l && !c->dead) {
                    l->stats.resets++;
                    conn_close(c, 1);
                }
            l->kill_now = 0;
        }
        for (int k = 0; k < l->nfaults; k++)
            if (l->until[k] > 0 && (next == 0 || l->until[k] < next))
                next = l->until[k];
    }
    pthread_mutex_unlock(&np->lock);
    return next;
}

static void reap(struct netproxy *np)
{
    struct conn **pp = &np->conns;
    while (*pp != NULL) {
        struct conn *c = *pp;
        int done = c->d[0].shut && c->d[1].shut;
        if (done)
            conn_close(c, 0);
        if (c->dead) {
            *pp = c->next;
            free(c);
        } else {
            pp = &c->next;
        }
    }
}

/* One connection's share of a poll pass: its events in, its data out. */
static void serve_conn(struct netproxy *np, struct conn *c, const struct pollfd *pf,
                       int64_t now)
{
    for (int di = 0; di < 2 && !c->dead; di++) {
        const struct pollfd *p = &pf[c->d[di].from];
        int reset = 0;
        if (p->fd >= 0 && (p->revents & (POLLIN | POLLHUP | POLLERR)) &&
            pump_in(np, c, di, now, &reset) < 0)
            conn_close(c, reset);
    }
    for (int di = 0; di < 2 && !c->dead; di++) {
        if (pump_out(c, di, now) < 0 || (c->reset_after[di] && c->d[di].head == NULL))
            conn_close(c, 1);
        else if (c->close_after[di] && c->d[di].head == NULL)
            conn_close(c, 0); /* a window's kill: the peer sees the client vanish */
    }
}

/* Fills one connection's two pollfds; the earliest due chunk into *wake. */
static void conn_pollfds(struct conn *c, struct pollfd *pf, int64_t *wake)
{
    for (int i = 0; i < 2; i++) {
        pf[i].fd = c->fd[i];
        pf[i].events = 0;
        pf[i].revents = 0;
    }
    for (int di = 0; di < 2; di++) {
        struct dir *d = &c->d[di];
        if (!d->eof && d->queued + d->stashlen < QUEUE_CAP)
            pf[d->from].events |= POLLIN;
        if (d->head != NULL) {
            pf[d->to].events |= POLLOUT;
            if (*wake == 0 || d->head->due < *wake)
                *wake = d->head->due;
        }
    }
    if (pf[0].events == 0)
        pf[0].fd = -1;
    if (pf[1].events == 0)
        pf[1].fd = -1;
}

static void *loop(void *arg)
{
    struct netproxy *np = arg;
    struct pollfd *pf = NULL;
    size_t cap = 0;
    while (!np->stop) {
        int64_t now = mono_ms();
        int64_t wake = apply_link_faults(np, now);
        reap(np);
        pthread_mutex_lock(&np->lock);
        int nlinks = np->nlinks;
        pthread_mutex_unlock(&np->lock);
        size_t nc = 0;
        for (struct conn *c = np->conns; c != NULL; c = c->next)
            nc++;
        size_t need = 1 + (size_t)nlinks + 2 * nc;
        if (need > cap) {
            struct pollfd *grown = realloc(pf, need * 2 * sizeof(*pf));
            if (grown == NULL)
                break;
            pf = grown;
            cap = need * 2;
        }
        pf[0] = (struct pollfd){ .fd = np->wake[0], .events = POLLIN };
        for (int i = 0; i < nlinks; i++)
            pf[1 + i] = (struct pollfd){ .fd = np->links[i].lfd, .events = POLLIN };
        size_t at = 1 + (size_t)nlinks;
        int holding = 0;
        pthread_mutex_lock(&np->lock);
        for (struct conn *c = np->conns; c != NULL; c = c->next)
            if (c->hold_pid > 0 && !c->dead) {
                hold_check(np, c, now);
                holding |= c->hold_pid > 0;
            }
        pthread_mutex_unlock(&np->lock);
        for (struct conn *c = np->conns; c != NULL; c = c->next, at += 2)
            conn_pollfds(c, pf + at, &wake);
        int timeout = holding ? HOLD_POLL_MS : 200;
        if (wake > 0)
            timeout = wake <= now ? 0 : (int)(wake - now < timeout ? wake - now : timeout);
        /* Links added after this pass began are polled from the next one. */
        if (poll(pf, at, timeout) < 0 && errno != EINTR)
            break;
        if (pf[0].revents & POLLIN) {
            char drain[64];
            while (read(np->wake[0], drain, sizeof(drain)) > 0) {
            }
        }
        now = mono_ms();
        at = 1 + (size_t)nlinks;
        for (struct conn *c = np->conns; c != NULL; c = c->next, at += 2)
            serve_conn(np, c, pf + at, now);
        for (int i = 0; i < nlinks; i++)
            if (pf[1 + i].revents & POLLIN)
                accept_one(np, &np->links[i]);
    }
    free(pf);
    return NULL;
}

/* ---- the API -------------------------------------------------------------- */

static void wake(netproxy *np)
{
    ssize_t w = write(np->wake[1], "x", 1);
    (void)w; /* a full pipe already wakes the loop */
}

netproxy *netproxy_new(char *err, size_t errlen)
{
    netproxy *np = calloc(1, sizeof(*np));
    if (np == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    np->rnd = (unsigned)mono_ms();
    if (pipe2(np->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        free(np);
        return NULL;
    }
    pthread_mutex_init(&np->lock, NULL);
    if (pthread_create(&np->thread, NULL, loop, np) != 0) {
        snprintf(err, errlen, "cannot start the proxy thread");
        close(np->wake[0]);
        close(np->wake[1]);
        pthread_mutex_destroy(&np->lock);
        free(np);
        return NULL;
    }
    return np;
}

void netproxy_free(netproxy *np)
{
    if (np == NULL)
        return;
    np->stop = 1;
    wake(np);
    pthread_join(np->thread, NULL);
    while (np->conns != NULL) {
        struct conn *c = np->conns;
        np->conns = c->next;
        conn_close(c, 0);
        free(c);
    }
    for (int i = 0; i < np->nlinks; i++)
        close(np->links[i].lfd); /* a Unix listener's path is its creator's to remove */
    close(np->wake[0]);
    close(np->wake[1]);
    pthread_mutex_destroy(&np->lock);
    free(np);
}

/* Opens the listening socket of listen_at; its bound address into bound. */
static int open_listener(const char *listen_at, char *bound, size_t boundlen, char *err,
                         size_t errlen)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    if (parse_addr(listen_at, &sa, &salen) < 0) {
        snprintf(err, errlen, "bad listen address %s", listen_at);
        return -1;
    }
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0 && sa.ss_family == AF_INET)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa.ss_family == AF_UNIX)
        unlink(((struct sockaddr_un *)&sa)->sun_path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, salen) < 0 || listen(fd, 128) < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", listen_at, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (sa.ss_family == AF_INET) {
        struct sockaddr_in in;
        socklen_t inlen = sizeof(in);
        getsockname(fd, (struct sockaddr *)&in, &inlen);
        snprintf(bound, boundlen, "tcp:127.0.0.1:%d", ntohs(in.sin_port));
    } else {
        snprintf(bound, boundlen, "%s", listen_at);
    }
    return fd;
}

int netproxy_add_link(netproxy *np, const char *name, enum np_proto proto,
                      const char *listen_at, const char *upstream,
                      char *bound, size_t boundlen, char *err, size_t errlen)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    if (strlen(name) >= sizeof(np->links[0].name) ||
        strlen(upstream) >= sizeof(np->links[0].upstream) ||
        parse_addr(upstream, &sa, &salen) < 0) {
        snprintf(err, errlen, "link %.64s: bad name or upstream %.160s", name, upstream);
        return -1;
    }
    pthread_mutex_lock(&np->lock);
    int full = np->nlinks >= MAX_LINKS;
    pthread_mutex_unlock(&np->lock);
    if (full) {
        snprintf(err, errlen, "link %s: at most %d links", name, MAX_LINKS);
        return -1;
    }
    int fd = open_listener(listen_at, bound, boundlen, err, errlen);
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&np->lock);
    struct link *l = &np->links[np->nlinks];
    memset(l, 0, sizeof(*l));
    snprintf(l->name, sizeof(l->name), "%s", name);
    snprintf(l->upstream, sizeof(l->upstream), "%s", upstream);
    l->proto = proto;
    l->lfd = fd;
    np->nlinks++;
    pthread_mutex_unlock(&np->lock);
    wake(np);
    return 0;
}

static struct link *find_link(netproxy *np, const char *name)
{
    for (int i = 0; i < np->nlinks; i++)
        if (strcmp(np->links[i].name, name) == 0)
            return &np->links[i];
    return NULL;
}

int netproxy_set(netproxy *np, const char *name, const struct np_fault *f, char *err,
                 size_t errlen)
{
    pthread_mutex_lock(&np->lock);
    struct link *l = find_link(np, name);
    int rc = -1;
    if (l == NULL) {
        snprintf(err, errlen, "no link %s", name);
    } else if (f->kind == NP_RESET) {
        l->kill_now = 1; /* an instant, not a state */
        rc = 0;
    } else if (f->kind == NP_WINDOW && (f->pid <= 1 || f->pid == (int)getpid())) {
        /* kill(0) or kill(-1) would reach far more than the link's client */
        snprintf(err, errlen, "link %s: a window needs the pid of the process at the client "
                 "end of the link, not %d", name, f->pid);
    } else if (f->kind == NP_WINDOW && np_frame_proto(f->frame) != l->proto) {
        snprintf(err, errlen, "link %s: frame %s is not of its protocol (%s)", name,
                 np_frame_name(f->frame), np_proto_name(l->proto));
    } else {
        int slot = l->nfaults;
        for (int i = 0; i < l->nfaults; i++)
            if (l->faults[i].kind == f->kind && l->faults[i].dir == f->dir &&
                (f->kind != NP_WINDOW || l->faults[i].frame == f->frame))
                slot = i;
        const char *other = NULL; /* another window's text, unlike this one's */
        for (int i = 0; i < l->nfaults && f->transaction_with[0] != '\0'; i++)
            if (i != slot && l->faults[i].kind == NP_WINDOW &&
                l->faults[i].transaction_with[0] != '\0' &&
                strcasecmp(l->faults[i].transaction_with, f->transaction_with) != 0)
                other = l->faults[i].transaction_with;
        if (other != NULL) {
            snprintf(err, errlen, "link %s: another window marks transactions by \"%s\": a link "
                     "marks them by one text at a time", name, other);
        } else if (slot == MAX_FAULTS) {
            snprintf(err, errlen, "link %s: at most %d faults at once", name, MAX_FAULTS);
        } else {
            l->faults[slot] = *f;
            l->until[slot] = f->ms > 0 ? mono_ms() + f->ms : 0;
            l->cuts_left[slot] = f->times > 0 ? f->times : 1;
            l->skip_left[slot] = f->skip;
            if (slot == l->nfaults)
                l->nfaults++;
            /* the open connections mark by the new text from here on; one
             * that already marks by it keeps the transaction under way */
            for (struct conn *c = np->conns; f->transaction_with[0] != '\0' && c != NULL;
                 c = c->next)
                if (c->link == l && strcasecmp(c->wire.mark, f->transaction_with) != 0)
                    np_wire_mark(&c->wire, f->transaction_with);
            if (f->kind == NP_DOWN)
                l->kill_now = 1;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&np->lock);
    wake(np);
    return rc;
}

int netproxy_clear(netproxy *np, const char *name)
{
    pthread_mutex_lock(&np->lock);
    struct link *l = find_link(np, name);
    if (l != NULL)
        l->nfaults = 0;
    pthread_mutex_unlock(&np->lock);
    wake(np);
    return l == NULL ? -1 : 0;
}

int netproxy_firings(netproxy *np, const char *name, struct np_firing *out, int max)
{
    pthread_mutex_lock(&np->lock);
    struct link *l = find_link(np, name);
    long long kept = l == NULL ? 0 : l->nfired < NP_MAX_FIRINGS ? l->nfired : NP_MAX_FIRINGS;
    int n = l == NULL ? -1 : kept < max ? (int)kept : max;
    /* the most recent n, oldest first */
    for (int i = 0; i < n; i++)
        out[i] = l->fired[(l->nfired - n + i) % NP_MAX_FIRINGS];
    pthread_mutex_unlock(&np->lock);
    return n;
}

int netproxy_set_pid(netproxy *np, const char *name, int pid)
{
    pthread_mutex_lock(&np->lock);
    struct link *l = find_link(np, name);
    for (int i = 0; l != NULL && pid > 1 && i < l->nfaults; i++)
        if (l->faults[i].kind == NP_WINDOW)
            l->faults[i].pid = pid;
    pthread_mutex_unlock(&np->lock);
    return l == NULL ? -1 : 0;
}

int netproxy_stats(netproxy *np, const char *name, struct np_stats *out)
{
    pthread_mutex_lock(&np->lock);
    struct link *l = find_link(np, name);
    if (l != NULL) {
        *out = l->stats;
        out->open = 0;
        for (const struct conn *c = np->conns; c != NULL; c = c->next)
            out->open += c->link == l && !c->dead;
    }
    pthread_mutex_unlock(&np->lock);
    return l == NULL ? -1 : 0;
}
