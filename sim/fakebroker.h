/* fakebroker.h -- an at-least-once broker for the harness, and its protocol.
 *
 * The fake broker stands in for RabbitMQ, SQS or a partitioned log.  It keeps
 * its state in SQLite (":memory:" by default, a file with --db so it survives
 * its own restart), serves many clients on one Unix socket, and writes a log
 * line for every publish, delivery, ack, nack, redelivery and control change
 * (--events FILE, JSON lines with the common cwlog header) for the invariant
 * checker.  It never deduplicates: publishing one message_id twice stores two
 * copies, as a real broker would.
 *
 * PROTOCOL
 * Newline-delimited JSON over a Unix stream socket; one object per line, at
 * most 1 MiB; every frame has "op".  Text that is not JSON, and frames over
 * the limit, get an error frame and the connection is closed; a well-formed
 * frame with an unknown op or a bad field gets an error frame and the
 * connection stays open.  Other clients are never affected.
 *
 *   error (broker -> client)
 *     {"op":"error","error":"unknown delivery tag 42"}
 *
 *   hello (optional; names the client in the log)
 *     -> {"op":"hello","client":"relay-1"}
 *     <- {"op":"hello_ok","broker":"fakebroker","version":1}
 *
 *   publish: confirmed only after the message is stored.  A client may send
 *   several publishes before reading; confirms come back in the same order.
 *     -> {"op":"publish","seq":7,"topic":"payments",
 *         "message_id":"5f0c...","type":"PaymentCreated",
 *         "partition_key":"9a1e...",
 *         "headers":{"traceparent":"00-...-01","aggregate_version":1,
 *                    "schema_version":1,"occurred_at":"2026-11-29T21:00:00Z"},
 *         "payload":"{\"EventId\":\"5f0c...\",...}"}
 *     <- {"op":"confirm","seq":7,"message_id":"5f0c...","status":"stored","offset":12}
 *     <- {"op":"confirm","seq":7,"message_id":"5f0c...","status":"refused",
 *         "error":"broker outage"}
 *   payload is a string carried byte for byte.  partition_key may be absent.
 *
 *   subscribe: join a consumer group of a topic.  Every group receives every
 *   message of its topic, including those stored before the group's first
 *   subscriber (a group reads the topic from its start); within a group a
 *   message is in flight with one consumer at a time.
 *     -> {"op":"subscribe","topic":"payments","group":"accounting","prefetch":10}
 *     <- {"op":"subscribed","topic":"payments","group":"accounting","consumer":"c7"}
 *   With ordering (on unless "ordered":false), a group never has two messages
 *   with the same partition_key in flight: a consumer sees a partition's
 *   messages in publish order unless a reorder fault is on.
 *
 *   deliver (broker -> subscriber)
 *     <- {"op":"deliver","tag":42,"topic":"payments","group":"accounting",
 *         "message_id":"5f0c...","type":"PaymentCreated","partition_key":"9a1e...",
 *         "headers":{...},"payload":"...","redelivered":false,"delivery_count":1}
 *
 *   ack / nack: no reply on success; an unknown tag gets an error frame.
 *     -> {"op":"ack","tag":42}
 *     -> {"op":"nack","tag":42,"requeue":true,"delay_ms":200}
 *   A delivery not acked is redelivered (redelivered:true, delivery_count+1)
 *   when its consumer disconnects or its visibility timeout passes.
 *
 *   control: fault switches, any subset per frame; the reply shows them all.
 *     -> {"op":"control","outage":"refuse"}     publishes refused ("hang":
 *                                               never confirmed; "off")
 *     -> {"op":"control","duplicate":true}      every delivery made twice
 *     -> {"op":"control","delay_ms":300}        deliveries held back 300 ms
 *     -> {"op":"control","reorder":true}        within a partition, newest first
 *     -> {"op":"control","drop_before_confirm":2}  store the next 2 publishes,
 *                                               then drop the connection
 *                                               instead of confirming
 *     -> {"op":"control","visibility_timeout_ms":5000}
 *     <- {"op":"control_ok","outage":"off","duplicate":false,...}
 *
 *   stats: for "is the broker quiet" waits.
 *     -> {"op":"stats"}
 *     <- {"op":"stats","stored":120,"groups":{"accounting":{"acked":118,
 *         "unacked":2,"ready":0,"delayed":0}}}
 *
 *   dump_log: the whole log, one frame per entry, then an end frame.
 *     -> {"op":"dump_log"}
 *     <- {"op":"log","ts_us":...,"event":"publish",...}   (one per entry)
 *     <- {"op":"log_end","count":57}
 *
 * LOG ENTRIES (--events FILE and dump_log), besides ts_us/proc/pid/event:
 *   publish    client, seq, message_id, type, partition_key, aggregate_version,
 *              payload_sha256, status (stored|refused|unanswered), offset
 *   deliver    group, consumer, tag, offset, message_id, redelivered,
 *              delivery_count
 *   ack        group, consumer, tag, offset, message_id
 *   nack       group, consumer, tag, offset, message_id, requeue, delay_ms
 *   redeliver  group, offset, message_id, reason (disconnect|visibility_timeout)
 *   control    the switches after the change
 *   connect / disconnect   client
 */
#ifndef CW_FAKEBROKER_H
#define CW_FAKEBROKER_H

#endif
