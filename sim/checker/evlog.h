/* evlog.h -- reading the JSON-lines event files the processes write.
 *
 * Every process of a scenario (and the broker) writes one JSON object per
 * line with the common cwlog header (ts_us, proc, pid, event).  The runner
 * waits on these files ("until the relay logged lease_lost"), the checker
 * reads them as evidence, and the timeline merges them.  A line that is not
 * a JSON object (a process killed in the middle of a write cannot leave one:
 * each line is one O_APPEND write) is skipped and counted; the checker's
 * caller treats any such line as an error, since evidence it cannot read
 * proves nothing.
 *
 * The components name some fields differently (a claim's ids may be "ids"
 * or "message_ids"); the accessors take a NULL-terminated list of candidate
 * names so the checker stays tolerant of such spelling without guessing. */
#ifndef CW_EVLOG_H
#define CW_EVLOG_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Reads every JSON object line of path into a new cJSON array (caller frees
 * with cJSON_Delete).  A missing file gives an empty array.  *bad (may be
 * NULL) receives the number of lines skipped.  NULL only on out of memory. */
cJSON *evlog_read(const char *path, int *bad);

/* Counts the events named event (NULL: all) in path, optionally only those
 * whose string or number field key equals value (key NULL: no filter).
 * Reads the file each call: meant for bounded polling. */
int evlog_count(const char *path, const char *event, const char *key, const char *value);

/* Does field key of ev equal value?  A string compares as is, a number as
 * its integer text ("%.0f": 4242, never 4242.0), a boolean as "true" or
 * "false"; a missing field or another type never equals.  The one
 * comparison behind evlog_count and the checker's event expectations. */
int ev_field_equals(const cJSON *ev, const char *key, const char *value);

/* The event's ts_us, or 0 when missing. */
int64_t ev_ts(const cJSON *ev);
/* The event name, or "" when missing. */
const char *ev_name(const cJSON *ev);

/* The first of the candidate fields (NULL-terminated list) that is a
 * string; NULL when none is. */
const char *ev_str(const cJSON *ev, const char *const *names);
/* The first candidate that is a number (or a string holding an integer);
 * returns 1 with *out set, 0 when none. */
int ev_num(const cJSON *ev, const char *const *names, double *out);
/* The first candidate that is an array, or NULL. */
const cJSON *ev_arr(const cJSON *ev, const char *const *names);

/* A point in time given as a number (microseconds when >= 1e14, else
 * milliseconds since the epoch) or as ISO 8601 text
 * ("2026-11-29T21:00:00.123456Z", offsets "+01:00", a space for 'T', and
 * PostgreSQL's "+00" accepted).  Returns 1 with *us set, 0 when unreadable. */
int ev_time_us(const cJSON *item, int64_t *us);
int iso_to_us(const char *s, int64_t *us);

/* Formats us since the epoch as "2026-11-29T21:00:00.123Z" into out. */
void us_to_iso(int64_t us, char *out, size_t outlen);

#endif
