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
 * A field has one name, the one its writer gives it: the accessors take a
 * single name, so a renamed field is missed loudly (evlog_read_strict and
 * checker_event_lacks), never found under an alias. */
#ifndef CW_EVLOG_H
#define CW_EVLOG_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Reads every JSON object line of path into a new cJSON array (caller frees
 * with cJSON_Delete).  A missing file gives an empty array.  *bad (may be
 * NULL) receives the number of lines skipped.  NULL only on out of memory. */
cJSON *evlog_read(const char *path, int *bad);

/* What evlog_read_strict asks of each line: NULL when the event is usable,
 * else the name of the field it lacks. */
typedef const char *(*evlog_check_fn)(const cJSON *ev, void *arg);

/* Reads path as evidence: every line must be a JSON object that check
 * (may be NULL) accepts.  Returns a new array (a missing file gives an
 * empty one), or NULL with "PATH:LINE: why" in err for the first line that
 * is not an object or lacks a field, or on out of memory. */
cJSON *evlog_read_strict(const char *path, evlog_check_fn check, void *arg, char *err,
                         size_t errlen);

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

/* Field name of ev when it is a string; NULL otherwise. */
const char *ev_str(const cJSON *ev, const char *name);
/* Field name of ev when it is a number: 1 with *out set, else 0. */
int ev_num(const cJSON *ev, const char *name, double *out);
/* Field name of ev when it is an array, or NULL. */
const cJSON *ev_arr(const cJSON *ev, const char *name);

/* A point in time given as a number (microseconds when >= 1e14, else
 * milliseconds since the epoch) or as ISO 8601 text
 * ("2026-11-29T21:00:00.123456Z", offsets "+01:00", a space for 'T', and
 * PostgreSQL's "+00" accepted).  Returns 1 with *us set, 0 when unreadable. */
int ev_time_us(const cJSON *item, int64_t *us);
int iso_to_us(const char *s, int64_t *us);

/* Formats us since the epoch as "2026-11-29T21:00:00.123Z" into out. */
void us_to_iso(int64_t us, char *out, size_t outlen);

#endif
