/* fakebroker_store.c -- the fake broker's state on SQLite, and the delivery
 * state machine drawn in fakebroker.h (READY -> IN_FLIGHT -> ACKED | DROPPED,
 * back to READY when the last outstanding delivery ends without an ack).
 *
 * Tables:
 *   messages     one row per stored publish; offset = rowid, never reused
 *   groups       one row per (topic, group), with its ordering flag
 *   group_msgs   per group and message: state, delivery count, copies
 *                outstanding, visible_at (ms on CLOCK_MONOTONIC)
 *   deliveries   (TEMP) one row per delivery tag still out: owner connection
 *                and deadline.  Connections do not survive a restart, so
 *                neither do these; fb_store_recover() puts their messages back
 *   meta         a bound above every delivery tag handed out, so tags stay
 *                unique across restarts (tags are reserved in blocks, so the
 *                bound is written once per block, not once per delivery)
 *   log          the broker's log lines, for dump_log
 *
 * Every statement is prepared once (sqlite3_prepare_v2) and bound; no SQL is
 * ever built from data.  The caller groups work into transactions with
 * fb_store_begin/commit (the server: one per event-loop round).
 *
 * The choice of the next message is one indexed query per delivery.  In an
 * ordered group, a READY row is eligible when no row of its key is IN_FLIGHT
 * and no READY row of its key has a smaller offset (I4): two NOT EXISTS
 * probes on gm_key (gid, pkey, off).  A partition blocked behind a delayed
 * message is skipped row by row, which is cheap at the sizes the harness
 * uses and keeps the rule in one readable statement.
 *
 * The indexes are chosen so that a state change touches as few of them as
 * possible (they were most of the cost of a delivery): gm_ready holds only
 * READY rows, gm_key has no state column, gm_due holds only delayed READY
 * rows (visible_at 0 means "at once").  The pick queries name their indexes
 * (INDEXED BY): without statistics SQLite would walk the primary key through
 * every acked row, turning each pick into a full scan. */
#include "fakebroker.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    S_PUBLISH,
    S_GM_INSERT,
    S_GROUP_INSERT,
    S_GROUP_FILL,
    S_PICK_UNORDERED,
    S_PICK_ORDERED,
    S_PICK_REORDER,
    S_MARK_DELIVERED,
    S_MARK_COPY,
    S_DELIVERY_INSERT,
    S_MESSAGE_GET,
    S_DELIVERY_GET,
    S_DELIVERY_DELETE,
    S_GM_GET,
    S_GM_SET,
    S_MESSAGE_ID,
    S_DELIVERIES_OF_CONN,
    S_DELIVERIES_DUE,
    S_NEXT_VISIBLE,
    S_NEXT_DEADLINE,
    S_INFLIGHT_ALL,
    S_RECOVER_STATE,
    S_RECOVER_DELAY,
    S_STATS_GROUPS,
    S_STATS_TOPICS,
    S_LOG_INSERT,
    S_LOG_LAST,
    S_LOG_READ,
    S_META_SET,
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_COUNT
};

static const char *const sql_text[S_COUNT] = {
    [S_PUBLISH] =
        "INSERT INTO messages(topic, message_id, type, pkey, headers, payload, client,"
        " sha256, stored_us) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [S_GM_INSERT] =
        "INSERT INTO group_msgs(gid, off, pkey, visible_at) VALUES(?1, ?2, ?3, ?4)",
    [S_GROUP_INSERT] = "INSERT INTO groups(topic, name, ordered) VALUES(?1, ?2, ?3)",
    [S_GROUP_FILL] =
        "INSERT INTO group_msgs(gid, off, pkey, visible_at)"
        " SELECT ?1, off, pkey, 0 FROM messages WHERE topic = ?2",
    [S_PICK_UNORDERED] =
        "SELECT off FROM group_msgs INDEXED BY gm_ready"
        " WHERE gid = ?1 AND state = 0 AND +visible_at <= ?2"
        " ORDER BY off LIMIT 1",
    /* An older message of the partition blocks only while it is visible: one
     * nacked with a delay gives up its turn, so a consumer that saw v2 before
     * v1 (published out of order) and nacked it gets v1 next, not v2 again. */
    [S_PICK_ORDERED] =
        "SELECT g.off FROM group_msgs g INDEXED BY gm_ready WHERE g.gid = ?1 AND g.state = 0"
        " AND +g.visible_at <= ?2 AND (g.pkey IS NULL OR ("
        "  NOT EXISTS (SELECT 1 FROM group_msgs h INDEXED BY gm_key"
        "              WHERE h.gid = ?1 AND h.pkey = g.pkey"
        "              AND h.state = 1)"
        "  AND NOT EXISTS (SELECT 1 FROM group_msgs h INDEXED BY gm_key"
        "              WHERE h.gid = ?1 AND h.pkey = g.pkey"
        "              AND h.state = 0 AND h.off < g.off"
        "              AND h.visible_at <= ?2)))"
        " ORDER BY g.off LIMIT 1",
    /* reorder: the newest never-delivered visible message of a partition */
    [S_PICK_REORDER] =
        "SELECT g.off FROM group_msgs g INDEXED BY gm_ready WHERE g.gid = ?1 AND g.state = 0"
        " AND +g.visible_at <= ?2 AND g.dcount = 0 AND (g.pkey IS NULL OR ("
        "  NOT EXISTS (SELECT 1 FROM group_msgs h INDEXED BY gm_key"
        "              WHERE h.gid = ?1 AND h.pkey = g.pkey"
        "              AND h.state = 1)"
        "  AND NOT EXISTS (SELECT 1 FROM group_msgs h INDEXED BY gm_key"
        "              WHERE h.gid = ?1 AND h.pkey = g.pkey"
        "              AND h.state = 0 AND h.off > g.off AND h.dcount = 0"
        "              AND h.visible_at <= ?2)))"
        " ORDER BY g.off LIMIT 1",
    [S_MARK_DELIVERED] =
        "UPDATE group_msgs SET state = 1, dcount = dcount + 1, outstanding = outstanding + 1"
        " WHERE gid = ?1 AND off = ?2 AND state = 0 RETURNING dcount",
    [S_MARK_COPY] =
        "UPDATE group_msgs SET outstanding = outstanding + 1"
        " WHERE gid = ?1 AND off = ?2 AND state = 1",
    [S_DELIVERY_INSERT] =
        "INSERT INTO deliveries(tag, gid, off, conn, deadline, message_id)"
        " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [S_MESSAGE_GET] =
        "SELECT topic, message_id, type, pkey, headers, payload FROM messages WHERE off = ?1",
    [S_DELIVERY_GET] = "SELECT gid, off, conn, message_id FROM deliveries WHERE tag = ?1",
    [S_DELIVERY_DELETE] = "DELETE FROM deliveries WHERE tag = ?1",
    [S_GM_GET] = "SELECT state, outstanding FROM group_msgs WHERE gid = ?1 AND off = ?2",
    [S_GM_SET] =
        "UPDATE group_msgs SET state = ?3, outstanding = ?4,"
        " visible_at = CASE WHEN ?5 >= 0 THEN ?5 ELSE visible_at END"
        " WHERE gid = ?1 AND off = ?2",
    [S_MESSAGE_ID] = "SELECT message_id FROM messages WHERE off = ?1",
    [S_DELIVERIES_OF_CONN] = "SELECT tag, gid, off, conn, message_id FROM deliveries"
                             " WHERE conn = ?1"
                             " ORDER BY tag",
    [S_DELIVERIES_DUE] = "SELECT tag, gid, off, conn, message_id FROM deliveries"
                         " WHERE deadline <= ?1"
                         " ORDER BY deadline, tag",
    [S_NEXT_VISIBLE] =
        "SELECT min(visible_at) FROM group_msgs INDEXED BY gm_due"
        " WHERE state = 0 AND visible_at > 0 AND visible_at > ?1",
    [S_NEXT_DEADLINE] = "SELECT min(deadline) FROM deliveries",
    [S_INFLIGHT_ALL] = "SELECT gid, off FROM group_msgs WHERE state = 1 ORDER BY gid, off",
    [S_RECOVER_STATE] = "UPDATE group_msgs SET state = 0, outstanding = 0 WHERE state = 1",
    [S_RECOVER_DELAY] = "UPDATE group_msgs SET visible_at = 0 WHERE visible_at > 0",
    [S_STATS_GROUPS] =
        "SELECT gid, state, visible_at > ?1, count(*) FROM group_msgs GROUP BY 1, 2, 3",
    [S_STATS_TOPICS] = "SELECT topic, count(*) FROM messages GROUP BY topic",
    [S_LOG_INSERT] = "INSERT INTO log(line) VALUES(?1)",
    [S_LOG_LAST] = "SELECT coalesce(max(id), 0) FROM log",
    [S_LOG_READ] = "SELECT id, line FROM log WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
    [S_META_SET] = "INSERT OR REPLACE INTO meta(k, v) VALUES('next_tag', ?1)",
    [S_BEGIN] = "BEGIN",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS messages(off INTEGER PRIMARY KEY, topic TEXT NOT NULL,"
    " message_id TEXT NOT NULL, type TEXT NOT NULL, pkey TEXT, headers TEXT, payload TEXT,"
    " client TEXT, sha256 TEXT, stored_us INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS messages_topic ON messages(topic, off);"
    "CREATE TABLE IF NOT EXISTS groups(gid INTEGER PRIMARY KEY, topic TEXT NOT NULL,"
    " name TEXT NOT NULL, ordered INTEGER NOT NULL, UNIQUE(topic, name));"
    "CREATE TABLE IF NOT EXISTS group_msgs(gid INTEGER NOT NULL, off INTEGER NOT NULL,"
    " pkey TEXT, state INTEGER NOT NULL DEFAULT 0, dcount INTEGER NOT NULL DEFAULT 0,"
    " outstanding INTEGER NOT NULL DEFAULT 0, visible_at INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY(gid, off)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS gm_ready ON group_msgs(gid, off) WHERE state = 0;"
    "CREATE INDEX IF NOT EXISTS gm_key ON group_msgs(gid, pkey, off) WHERE pkey IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS gm_due ON group_msgs(visible_at)"
    " WHERE state = 0 AND visible_at > 0;"
    "CREATE TABLE IF NOT EXISTS log(id INTEGER PRIMARY KEY, line TEXT NOT NULL);"
    "CREATE TEMP TABLE IF NOT EXISTS deliveries(tag INTEGER PRIMARY KEY,"
    " gid INTEGER NOT NULL, off INTEGER NOT NULL, conn INTEGER NOT NULL,"
    " deadline INTEGER NOT NULL, message_id TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS temp.deliveries_conn ON deliveries(conn);"
    "CREATE INDEX IF NOT EXISTS temp.deliveries_deadline ON deliveries(deadline);";

struct fb_store {
    sqlite3 *db;
    sqlite3_stmt *stmt[S_COUNT];
    struct fb_group *groups;
    int ngroups;
    uint64_t next_tag;   /* the next delivery tag handed out */
    uint64_t tag_limit;  /* tags below this may be in use: persisted (I5) */
    int tag_dirty;
    int in_tx;
    int64_t committed_gid; /* the last group id known committed */
};

/* ---- helpers ---------------------------------------------------------- */

/* The statement, reset and unbound, ready for new parameters. */
static sqlite3_stmt *stmt(fb_store *st, int i)
{
    sqlite3_stmt *s = st->stmt[i];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

static void bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Runs a statement that returns no row.  0 or -1. */
static int run(sqlite3_stmt *s)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

static char *col_dup(sqlite3_stmt *s, int i, size_t *len)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL) {
        if (len != NULL)
            *len = 0;
        return NULL;
    }
    const unsigned char *t = sqlite3_column_text(s, i);
    int n = sqlite3_column_bytes(s, i);
    char *out = malloc((size_t)n + 1);
    if (out == NULL)
        abort();
    memcpy(out, t ? (const char *)t : "", (size_t)n);
    out[n] = '\0';
    if (len != NULL)
        *len = (size_t)n;
    return out;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        abort();
    return d;
}

static int load_groups(fb_store *st)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->db, "SELECT gid, topic, name, ordered FROM groups ORDER BY gid",
                           -1, &s, NULL) != SQLITE_OK)
        return -1;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct fb_group *g = realloc(st->groups, sizeof(*g) * (size_t)(st->ngroups + 1));
        if (g == NULL)
            abort();
        st->groups = g;
        g = &st->groups[st->ngroups++];
        g->id = sqlite3_column_int64(s, 0);
        g->topic = xstrdup((const char *)sqlite3_column_text(s, 1));
        g->name = xstrdup((const char *)sqlite3_column_text(s, 2));
        g->ordered = sqlite3_column_int(s, 3);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int load_next_tag(fb_store *st)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(st->db, "SELECT v FROM meta WHERE k = 'next_tag'", -1, &s,
                           NULL) != SQLITE_OK)
        return -1;
    int rc = sqlite3_step(s);
    st->next_tag = 1;
    if (rc == SQLITE_ROW && sqlite3_column_int64(s, 0) > 0)
        st->next_tag = (uint64_t)sqlite3_column_int64(s, 0);
    st->tag_limit = st->next_tag;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

/* ---- open / close / transactions -------------------------------------- */

fb_store *fb_store_open(const char *path, char *err, size_t errlen)
{
    fb_store *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int in_memory = path == NULL || strcmp(path, ":memory:") == 0;
    /* Memory statistics cost a global mutex on every allocation and the
     * broker never reads them.  Only possible before SQLite initializes;
     * later calls fail harmlessly. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    if (sqlite3_open_v2(in_memory ? ":memory:" : path, &st->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                            SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "could not open store %s: %s", in_memory ? ":memory:" : path,
                 st->db ? sqlite3_errmsg(st->db) : "out of memory");
        goto fail;
    }
    /* WAL + synchronous=NORMAL: a commit is in the OS before the confirm
     * goes out, so a killed broker keeps every confirmed message. */
    const char *pragmas = in_memory ? "PRAGMA temp_store=MEMORY;"
                                    : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                                      "PRAGMA temp_store=MEMORY; PRAGMA busy_timeout=2000;";
    char *msg = NULL;
    if (sqlite3_exec(st->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
        sqlite3_exec(st->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "could not prepare store %s: %s", in_memory ? ":memory:" : path,
                 msg ? msg : sqlite3_errmsg(st->db));
        sqlite3_free(msg);
        goto fail;
    }
    for (int i = 0; i < S_COUNT; i++) {
        if (sqlite3_prepare_v2(st->db, sql_text[i], -1, &st->stmt[i], NULL) != SQLITE_OK) {
            snprintf(err, errlen, "could not prepare statement %d: %s", i,
                     sqlite3_errmsg(st->db));
            goto fail;
        }
    }
    if (load_groups(st) < 0 || load_next_tag(st) < 0) {
        snprintf(err, errlen, "could not read store %s: %s", path ? path : ":memory:",
                 sqlite3_errmsg(st->db));
        goto fail;
    }
    st->committed_gid = st->ngroups > 0 ? st->groups[st->ngroups - 1].id : 0;
    return st;
fail:
    fb_store_close(st);
    return NULL;
}

void fb_store_close(fb_store *st)
{
    if (st == NULL)
        return;
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    for (int i = 0; i < st->ngroups; i++) {
        free(st->groups[i].topic);
        free(st->groups[i].name);
    }
    free(st->groups);
    sqlite3_close(st->db);
    free(st);
}

const char *fb_store_errmsg(fb_store *st)
{
    return sqlite3_errmsg(st->db);
}

int fb_store_begin(fb_store *st)
{
    if (st->in_tx)
        return 0;
    if (run(stmt(st, S_BEGIN)) < 0)
        return -1;
    st->in_tx = 1;
    return 0;
}

int fb_store_commit(fb_store *st)
{
    if (!st->in_tx)
        return 0;
    if (st->tag_dirty) {
        sqlite3_stmt *s = stmt(st, S_META_SET);
        sqlite3_bind_int64(s, 1, (sqlite3_int64)st->tag_limit);
        if (run(s) < 0)
            return -1;
        st->tag_dirty = 0;
    }
    if (run(stmt(st, S_COMMIT)) < 0)
        return -1;
    st->in_tx = 0;
    st->committed_gid = st->ngroups > 0 ? st->groups[st->ngroups - 1].id : 0;
    return 0;
}

int fb_store_rollback(fb_store *st)
{
    if (!st->in_tx)
        return 0;
    st->in_tx = 0;
    /* Groups created in the rolled-back transaction are gone too. */
    int keep = st->ngroups;
    for (int i = 0; i < st->ngroups; i++) {
        if (st->groups[i].id > st->committed_gid) {
            keep = i;
            break;
        }
    }
    for (int i = keep; i < st->ngroups; i++) {
        free(st->groups[i].topic);
        free(st->groups[i].name);
    }
    st->ngroups = keep;
    return run(stmt(st, S_ROLLBACK));
}

/* ---- publish and groups ----------------------------------------------- */

int64_t fb_store_publish(fb_store *st, const struct fb_msg_in *m, int64_t visible_at_ms)
{
    sqlite3_stmt *s = stmt(st, S_PUBLISH);
    bind_text(s, 1, m->topic);
    bind_text(s, 2, m->message_id);
    bind_text(s, 3, m->type);
    bind_text(s, 4, m->partition_key);
    bind_text(s, 5, m->headers_json);
    if (m->payload == NULL)
        sqlite3_bind_null(s, 6);
    else
        sqlite3_bind_text(s, 6, m->payload, (int)m->payload_len, SQLITE_STATIC);
    bind_text(s, 7, m->client);
    bind_text(s, 8, m->sha256);
    sqlite3_bind_int64(s, 9, m->stored_us);
    if (run(s) < 0)
        return -1;
    int64_t off = sqlite3_last_insert_rowid(st->db);
    for (int i = 0; i < st->ngroups; i++) {
        if (strcmp(st->groups[i].topic, m->topic) != 0)
            continue;
        s = stmt(st, S_GM_INSERT);
        sqlite3_bind_int64(s, 1, st->groups[i].id);
        sqlite3_bind_int64(s, 2, off);
        bind_text(s, 3, m->partition_key);
        sqlite3_bind_int64(s, 4, visible_at_ms);
        if (run(s) < 0)
            return -1;
    }
    return off;
}

int fb_store_group(fb_store *st, const char *topic, const char *name, int ordered)
{
    for (int i = 0; i < st->ngroups; i++) {
        if (strcmp(st->groups[i].topic, topic) == 0 && strcmp(st->groups[i].name, name) == 0)
            return i;
    }
    sqlite3_stmt *s = stmt(st, S_GROUP_INSERT);
    bind_text(s, 1, topic);
    bind_text(s, 2, name);
    sqlite3_bind_int(s, 3, ordered ? 1 : 0);
    if (run(s) < 0)
        return -1;
    int64_t gid = sqlite3_last_insert_rowid(st->db);
    /* A new group reads its topic from the start. */
    s = stmt(st, S_GROUP_FILL);
    sqlite3_bind_int64(s, 1, gid);
    bind_text(s, 2, topic);
    if (run(s) < 0)
        return -1;
    struct fb_group *g = realloc(st->groups, sizeof(*g) * (size_t)(st->ngroups + 1));
    if (g == NULL)
        abort();
    st->groups = g;
    g = &st->groups[st->ngroups];
    g->id = gid;
    g->topic = xstrdup(topic);
    g->name = xstrdup(name);
    g->ordered = ordered ? 1 : 0;
    return st->ngroups++;
}

int fb_store_group_count(const fb_store *st)
{
    return st->ngroups;
}

const struct fb_group *fb_store_group_at(const fb_store *st, int idx)
{
    if (idx < 0 || idx >= st->ngroups)
        return NULL;
    return &st->groups[idx];
}

int fb_store_group_index(const fb_store *st, int64_t gid)
{
    for (int i = 0; i < st->ngroups; i++) {
        if (st->groups[i].id == gid)
            return i;
    }
    return -1;
}

/* ---- deliveries ------------------------------------------------------- */

void fb_delivery_clear(struct fb_delivery *d)
{
    if (d == NULL)
        return;
    free(d->topic);
    free(d->message_id);
    free(d->type);
    free(d->partition_key);
    free(d->headers_json);
    free(d->payload);
    memset(d, 0, sizeof(*d));
}

/* Loads the message at offset into d.  0 or -1. */
static int load_message(fb_store *st, int64_t off, struct fb_delivery *d)
{
    sqlite3_stmt *s = stmt(st, S_MESSAGE_GET);
    sqlite3_bind_int64(s, 1, off);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return -1;
    }
    d->topic = col_dup(s, 0, NULL);
    d->message_id = col_dup(s, 1, NULL);
    d->type = col_dup(s, 2, NULL);
    d->partition_key = col_dup(s, 3, NULL);
    d->headers_json = col_dup(s, 4, NULL);
    d->payload = col_dup(s, 5, &d->payload_len);
    sqlite3_reset(s);
    return 0;
}

#define TAG_BLOCK 100000

/* Consumes st->next_tag, reserving a new block of tags when needed; the
 * block's end is persisted by the commit of the transaction using it. */
static void take_tag(fb_store *st)
{
    if (st->next_tag >= st->tag_limit) {
        st->tag_limit = st->next_tag + TAG_BLOCK;
        st->tag_dirty = 1;
    }
    st->next_tag++;
}

/* Records delivery tag (message d->offset, owner conn) as out.  0 or -1. */
static int insert_delivery(fb_store *st, uint64_t tag, int64_t gid, const struct fb_delivery *d,
                           uint64_t conn, int64_t deadline_ms)
{
    sqlite3_stmt *s = stmt(st, S_DELIVERY_INSERT);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)tag);
    sqlite3_bind_int64(s, 2, gid);
    sqlite3_bind_int64(s, 3, d->offset);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)conn);
    sqlite3_bind_int64(s, 5, deadline_ms);
    bind_text(s, 6, d->message_id ? d->message_id : "");
    return run(s);
}

/* The offset of the next eligible message, 0 for none, -1 on error. */
static int64_t pick(fb_store *st, const struct fb_group *g, int64_t now_ms, int reorder)
{
    int order[2];
    int n = 0;
    if (!g->ordered) {
        order[n++] = S_PICK_UNORDERED;
    } else {
        if (reorder)
            order[n++] = S_PICK_REORDER;
        order[n++] = S_PICK_ORDERED;
    }
    for (int i = 0; i < n; i++) {
        sqlite3_stmt *s = stmt(st, order[i]);
        sqlite3_bind_int64(s, 1, g->id);
        sqlite3_bind_int64(s, 2, now_ms);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            int64_t off = sqlite3_column_int64(s, 0);
            sqlite3_reset(s);
            return off;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_DONE)
            return -1;
    }
    return 0;
}

int fb_store_deliver(fb_store *st, int gidx, uint64_t conn, int64_t now_ms,
                     int64_t deadline_ms, int reorder, struct fb_delivery *d)
{
    memset(d, 0, sizeof(*d));
    const struct fb_group *g = fb_store_group_at(st, gidx);
    if (g == NULL)
        return -1;
    int64_t off = pick(st, g, now_ms, reorder);
    if (off <= 0)
        return (int)off;
    sqlite3_stmt *s = stmt(st, S_MARK_DELIVERED);
    sqlite3_bind_int64(s, 1, g->id);
    sqlite3_bind_int64(s, 2, off);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return -1;
    }
    int dcount = sqlite3_column_int(s, 0);
    /* Drain the RETURNING statement so the update completes. */
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return -1;
    if (load_message(st, off, d) < 0)
        goto fail;
    d->tag = st->next_tag;
    d->gid = g->id;
    d->offset = off;
    d->delivery_count = dcount;
    if (insert_delivery(st, d->tag, g->id, d, conn, deadline_ms) < 0)
        goto fail;
    take_tag(st);
    return 1;
fail:
    fb_delivery_clear(d);
    return -1;
}

int fb_store_deliver_copy(fb_store *st, const struct fb_delivery *src, uint64_t conn,
                          int64_t deadline_ms, struct fb_delivery *d)
{
    memset(d, 0, sizeof(*d));
    sqlite3_stmt *s = stmt(st, S_MARK_COPY);
    sqlite3_bind_int64(s, 1, src->gid);
    sqlite3_bind_int64(s, 2, src->offset);
    if (run(s) < 0 || sqlite3_changes(st->db) != 1)
        return -1;
    if (load_message(st, src->offset, d) < 0)
        goto fail;
    d->tag = st->next_tag;
    d->gid = src->gid;
    d->offset = src->offset;
    d->delivery_count = src->delivery_count;
    d->duplicate = 1;
    if (insert_delivery(st, d->tag, src->gid, d, conn, deadline_ms) < 0)
        goto fail;
    take_tag(st);
    return 1;
fail:
    fb_delivery_clear(d);
    return -1;
}

enum end_kind { END_ACK, END_NACK_REQUEUE, END_NACK_DROP, END_LOST };

/* One row of the deliveries table. */
struct drow {
    uint64_t tag;
    int64_t gid;
    int64_t off;
    uint64_t conn;
    char message_id[256];
};

/* Ends one delivery (its row already read) and moves its message along the
 * state machine.  0 or -1. */
static int end_delivery(fb_store *st, const struct drow *row, enum end_kind kind,
                        int64_t visible_at_ms, struct fb_release *r)
{
    int64_t gid = row->gid, off = row->off;
    uint64_t tag = row->tag;
    memset(r, 0, sizeof(*r));
    r->tag = tag;
    r->conn = row->conn;
    r->gid = gid;
    r->offset = off;
    snprintf(r->message_id, sizeof(r->message_id), "%s", row->message_id);

    sqlite3_stmt *s = stmt(st, S_DELIVERY_DELETE);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)tag);
    if (run(s) < 0)
        return -1;

    s = stmt(st, S_GM_GET);
    sqlite3_bind_int64(s, 1, gid);
    sqlite3_bind_int64(s, 2, off);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return -1;
    }
    int state = sqlite3_column_int(s, 0);
    int outstanding = sqlite3_column_int(s, 1);
    sqlite3_reset(s);

    if (outstanding > 0)
        outstanding--;
    int64_t visible = -1;
    int live = state == FB_READY || state == FB_IN_FLIGHT;
    switch (kind) {
    case END_ACK:
        if (live) {
            state = FB_ACKED;
            r->finished = 1;
        }
        break;
    case END_NACK_DROP:
        if (live) {
            state = FB_DROPPED;
            r->finished = 1;
        }
        break;
    case END_NACK_REQUEUE:
    case END_LOST:
        /* I2: back to READY only when no other copy is still out. */
        if (state == FB_IN_FLIGHT && outstanding == 0) {
            state = FB_READY;
            visible = visible_at_ms;
            r->requeued = 1;
        }
        break;
    }
    s = stmt(st, S_GM_SET);
    sqlite3_bind_int64(s, 1, gid);
    sqlite3_bind_int64(s, 2, off);
    sqlite3_bind_int(s, 3, state);
    sqlite3_bind_int(s, 4, outstanding);
    sqlite3_bind_int64(s, 5, visible);
    return run(s);
}

/* Looks tag up for conn into *row.  1 found, 0 unknown or another's, -1 error. */
static int find_delivery(fb_store *st, uint64_t tag, uint64_t conn, struct drow *row)
{
    sqlite3_stmt *s = stmt(st, S_DELIVERY_GET);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)tag);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s);
        return 0;
    }
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return -1;
    }
    row->tag = tag;
    row->gid = sqlite3_column_int64(s, 0);
    row->off = sqlite3_column_int64(s, 1);
    row->conn = (uint64_t)sqlite3_column_int64(s, 2);
    snprintf(row->message_id, sizeof(row->message_id), "%s",
             (const char *)sqlite3_column_text(s, 3));
    sqlite3_reset(s);
    return row->conn == conn ? 1 : 0;
}

int fb_store_ack(fb_store *st, uint64_t tag, uint64_t conn, struct fb_release *r)
{
    struct drow row;
    int rc = find_delivery(st, tag, conn, &row);
    if (rc <= 0)
        return rc < 0 ? -1 : 1;
    return end_delivery(st, &row, END_ACK, -1, r);
}

int fb_store_nack(fb_store *st, uint64_t tag, uint64_t conn, int requeue,
                  int64_t visible_at_ms, struct fb_release *r)
{
    struct drow row;
    int rc = find_delivery(st, tag, conn, &row);
    if (rc <= 0)
        return rc < 0 ? -1 : 1;
    return end_delivery(st, &row, requeue ? END_NACK_REQUEUE : END_NACK_DROP, visible_at_ms, r);
}

/* Reads every row of a deliveries query first: the rows are then deleted,
 * and SQLite does not promise a stable scan of a table changed under it. */
static int collect(sqlite3_stmt *s, struct drow **rows, int *n)
{
    int cap = 0;
    int rc;
    *rows = NULL;
    *n = 0;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            struct drow *nr = realloc(*rows, sizeof(**rows) * (size_t)cap);
            if (nr == NULL)
                abort();
            *rows = nr;
        }
        struct drow *d = &(*rows)[(*n)++];
        d->tag = (uint64_t)sqlite3_column_int64(s, 0);
        d->gid = sqlite3_column_int64(s, 1);
        d->off = sqlite3_column_int64(s, 2);
        d->conn = (uint64_t)sqlite3_column_int64(s, 3);
        snprintf(d->message_id, sizeof(d->message_id), "%s",
                 (const char *)sqlite3_column_text(s, 4));
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) {
        free(*rows);
        *rows = NULL;
        *n = 0;
        return -1;
    }
    return 0;
}

static int end_all(fb_store *st, struct drow *rows, int n, int64_t visible_at_ms,
                   fb_release_fn fn, void *arg)
{
    for (int i = 0; i < n; i++) {
        struct fb_release r;
        if (end_delivery(st, &rows[i], END_LOST, visible_at_ms, &r) < 0) {
            free(rows);
            return -1;
        }
        if (fn != NULL)
            fn(arg, &r);
    }
    free(rows);
    return n;
}

int fb_store_release_conn(fb_store *st, uint64_t conn, int64_t visible_at_ms,
                          fb_release_fn fn, void *arg)
{
    sqlite3_stmt *s = stmt(st, S_DELIVERIES_OF_CONN);
    sqlite3_bind_int64(s, 1, (sqlite3_int64)conn);
    struct drow *rows;
    int n;
    if (collect(s, &rows, &n) < 0)
        return -1;
    return end_all(st, rows, n, visible_at_ms, fn, arg);
}

int fb_store_expire(fb_store *st, int64_t now_ms, int64_t visible_at_ms,
                    fb_release_fn fn, void *arg)
{
    sqlite3_stmt *s = stmt(st, S_DELIVERIES_DUE);
    sqlite3_bind_int64(s, 1, now_ms);
    struct drow *rows;
    int n;
    if (collect(s, &rows, &n) < 0)
        return -1;
    return end_all(st, rows, n, visible_at_ms, fn, arg);
}

int fb_store_recover(fb_store *st, fb_release_fn fn, void *arg)
{
    sqlite3_stmt *s = stmt(st, S_INFLIGHT_ALL);
    int rc;
    int n = 0;
    struct fb_release *list = NULL;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct fb_release *nl = realloc(list, sizeof(*list) * (size_t)(n + 1));
        if (nl == NULL)
            abort();
        list = nl;
        memset(&list[n], 0, sizeof(list[n]));
        list[n].gid = sqlite3_column_int64(s, 0);
        list[n].offset = sqlite3_column_int64(s, 1);
        list[n].requeued = 1;
        n++;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE || run(stmt(st, S_RECOVER_STATE)) < 0 ||
        run(stmt(st, S_RECOVER_DELAY)) < 0) {
        free(list);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        s = stmt(st, S_MESSAGE_ID);
        sqlite3_bind_int64(s, 1, list[i].offset);
        if (sqlite3_step(s) == SQLITE_ROW)
            snprintf(list[i].message_id, sizeof(list[i].message_id), "%s",
                     (const char *)sqlite3_column_text(s, 0));
        sqlite3_reset(s);
        if (fn != NULL)
            fn(arg, &list[i]);
    }
    free(list);
    return n;
}

/* ---- timers and stats ------------------------------------------------- */

static int64_t scalar_min(fb_store *st, int which, int64_t bind)
{
    sqlite3_stmt *s = stmt(st, which);
    if (which == S_NEXT_VISIBLE)
        sqlite3_bind_int64(s, 1, bind);
    int64_t v = -1;
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return v;
}

int64_t fb_store_next_deadline(fb_store *st)
{
    return scalar_min(st, S_NEXT_DEADLINE, 0);
}

int64_t fb_store_next_due(fb_store *st, int64_t now_ms)
{
    int64_t a = scalar_min(st, S_NEXT_VISIBLE, now_ms);
    int64_t b = fb_store_next_deadline(st);
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

static cJSON *group_stats(cJSON *groups, const struct fb_group *g)
{
    /* Keyed by group name; a name used on two topics gets "topic/name". */
    cJSON *o = cJSON_GetObjectItemCaseSensitive(groups, g->name);
    if (o != NULL) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "topic");
        if (cJSON_IsString(t) && strcmp(t->valuestring, g->topic) == 0)
            return o;
        char key[520];
        snprintf(key, sizeof(key), "%s/%s", g->topic, g->name);
        o = cJSON_GetObjectItemCaseSensitive(groups, key);
        if (o != NULL)
            return o;
        o = cJSON_AddObjectToObject(groups, key);
    } else {
        o = cJSON_AddObjectToObject(groups, g->name);
    }
    cJSON_AddStringToObject(o, "topic", g->topic);
    cJSON_AddNumberToObject(o, "acked", 0);
    cJSON_AddNumberToObject(o, "unacked", 0);
    cJSON_AddNumberToObject(o, "ready", 0);
    cJSON_AddNumberToObject(o, "delayed", 0);
    cJSON_AddNumberToObject(o, "dropped", 0);
    cJSON_AddBoolToObject(o, "ordered", g->ordered);
    return o;
}

static void add_count(cJSON *o, const char *key, double n)
{
    cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (it != NULL)
        cJSON_SetNumberValue(it, it->valuedouble + n);
}

cJSON *fb_store_stats(fb_store *st, int64_t now_ms)
{
    cJSON *out = cJSON_CreateObject();
    if (out == NULL)
        abort();
    cJSON *topics = cJSON_AddObjectToObject(out, "topics");
    cJSON *groups = cJSON_AddObjectToObject(out, "groups");
    double stored = 0;
    sqlite3_stmt *s = stmt(st, S_STATS_TOPICS);
    while (sqlite3_step(s) == SQLITE_ROW) {
        double n = (double)sqlite3_column_int64(s, 1);
        cJSON_AddNumberToObject(topics, (const char *)sqlite3_column_text(s, 0), n);
        stored += n;
    }
    sqlite3_reset(s);
    cJSON_AddNumberToObject(out, "stored", stored);
    for (int i = 0; i < st->ngroups; i++)
        group_stats(groups, &st->groups[i]);
    s = stmt(st, S_STATS_GROUPS);
    sqlite3_bind_int64(s, 1, now_ms);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int idx = fb_store_group_index(st, sqlite3_column_int64(s, 0));
        if (idx < 0)
            continue;
        cJSON *o = group_stats(groups, &st->groups[idx]);
        int state = sqlite3_column_int(s, 1);
        int later = sqlite3_column_int(s, 2);
        double n = (double)sqlite3_column_int64(s, 3);
        switch (state) {
        case FB_READY: add_count(o, later ? "delayed" : "ready", n); break;
        case FB_IN_FLIGHT: add_count(o, "unacked", n); break;
        case FB_ACKED: add_count(o, "acked", n); break;
        case FB_DROPPED: add_count(o, "dropped", n); break;
        default: break;
        }
    }
    sqlite3_reset(s);
    return out;
}

/* ---- log -------------------------------------------------------------- */

int fb_store_log_append(fb_store *st, const char *line)
{
    sqlite3_stmt *s = stmt(st, S_LOG_INSERT);
    bind_text(s, 1, line);
    return run(s);
}

int64_t fb_store_log_last_id(fb_store *st)
{
    sqlite3_stmt *s = stmt(st, S_LOG_LAST);
    int64_t v = -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return v;
}

int64_t fb_store_log_read(fb_store *st, int64_t after, int64_t until, int max,
                          void (*fn)(void *arg, const char *line), void *arg)
{
    sqlite3_stmt *s = stmt(st, S_LOG_READ);
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int64(s, 2, until);
    sqlite3_bind_int(s, 3, max);
    int rc;
    int64_t last = after;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        last = sqlite3_column_int64(s, 0);
        fn(arg, (const char *)sqlite3_column_text(s, 1));
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? last : -1;
}
