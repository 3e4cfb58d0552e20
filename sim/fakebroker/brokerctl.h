/* brokerctl.h -- the runner's side of the fake broker's control protocol.
 *
 * The runner flips the broker's fault switches (outage, duplicate, reorder,
 * max_payload_bytes, ...) and asks it for stats when it waits for a quiet
 * pipeline.  One short-lived Unix-socket connection per call: the broker
 * serves many clients and a fresh connection cannot inherit a half-read
 * frame from an earlier timeout.  Frames are those of fakebroker.h. */
#ifndef CW_BROKERCTL_H
#define CW_BROKERCTL_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Sends frame (not consumed) to the broker at socket_path and returns the
 * first reply whose "op" is want_op (caller frees), skipping nothing else:
 * an "error" frame is returned as NULL with its text in err.  Bounded by
 * timeout_ms. */
cJSON *brokerctl_call(const char *socket_path, const cJSON *frame, const char *want_op,
                      int timeout_ms, char *err, size_t errlen);

/* {"op":"control", ...switches}: returns 0, or -1 with a message. */
int brokerctl_control(const char *socket_path, const cJSON *switches, int timeout_ms,
                      char *err, size_t errlen);

/* Every switch back to its default ({"op":"control","reset":true}). */
int brokerctl_reset(const char *socket_path, int timeout_ms, char *err, size_t errlen);

/* {"op":"stats"}: the reply (caller frees) or NULL. */
cJSON *brokerctl_stats(const char *socket_path, int timeout_ms, char *err, size_t errlen);

#endif
