/* cwlog.h -- structured JSON-lines events.
 *
 * Every process of crashwindow writes one JSON object per decision that
 * matters (claim, publish, mark, retry, deliver, apply, ack, fault_hit, ...)
 * to the file given with --events.  The runner merges these files into a
 * timeline and the report draws them, so every line carries the same header:
 *
 *   {"ts_us":1764450000123456,"proc":"relay-1","pid":4242,"event":"claim",...}
 *
 * ts_us is CLOCK_REALTIME in microseconds (exact in a double until 2255).
 * Lines are written with one write(2) on an O_APPEND descriptor, so a process
 * killed with SIGKILL never leaves a half line and never loses a line it
 * already emitted: there is no stdio buffer to flush. */
#ifndef CW_CWLOG_H
#define CW_CWLOG_H

#include <cjson/cJSON.h>
#include <stdint.h>

/* Opens the events file (NULL or "-" means stderr). proc names the process in
 * every line.  Returns 0, or -1 with errno set when the file cannot be opened. */
int cwlog_open(const char *path, const char *proc);

/* Starts an event object with the common header filled in.  Never NULL
 * (aborts on out of memory).  Add fields with cJSON_Add*ToObject, then pass
 * it to cwlog_emit, which writes and frees it. */
cJSON *cwlog_begin(const char *event);
void cwlog_emit(cJSON *ev);

/* Adds an integer that may exceed 2^53 or print in exponent form as a
 * double (timestamps and durations in microseconds) as exact digits. */
void cwlog_add_int64(cJSON *obj, const char *key, int64_t v);

/* Shorthand for an event with one string field (either may be NULL). */
void cwlog_simple(const char *event, const char *key, const char *value);

/* Human diagnostics to stderr, prefixed with the process name. */
void cwlog_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Microseconds since the epoch, CLOCK_REALTIME. */
int64_t cw_now_us(void);
/* Milliseconds on CLOCK_MONOTONIC, for deadlines. */
int64_t cw_mono_ms(void);
/* Microseconds on CLOCK_MONOTONIC, for durations shorter than a millisecond. */
int64_t cw_mono_us(void);

const char *cwlog_proc(void);

#endif
