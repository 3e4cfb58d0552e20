/* fuzz_frame.c -- libFuzzer target for the fake broker's frame layer
 * (sim/fakebroker/fakebroker_proto.c): arbitrary bytes go through the line buffer in
 * chunks, every complete line through fb_parse_frame, control frames through
 * fb_control_apply.  Besides "no crash, no leak, no UB" (ASan/UBSan), one
 * oracle: every string field of an accepted publish, written back with the
 * JSON writer the broker uses for deliveries, must parse again to the same
 * bytes.  Built and run by scripts/fuzz-broker. */
#include "fakebroker.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_round_trip(const char *value)
{
    if (value == NULL)
        return;
    struct fb_buf b = {0};
    fb_jw_begin(&b);
    fb_jw_str(&b, "v", value);
    fb_jw_end(&b);
    cJSON *j = cJSON_Parse(b.data);
    const cJSON *v = j ? cJSON_GetObjectItemCaseSensitive(j, "v") : NULL;
    if (!cJSON_IsString(v) || strcmp(v->valuestring, value) != 0)
        abort(); /* the writer produced JSON that does not say what it was given */
    cJSON_Delete(j);
    fb_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fb_linebuf lb;
    struct fb_control ctl;
    fb_linebuf_init(&lb);
    fb_control_defaults(&ctl, 30000);
    /* The first byte picks the chunk size, as reads of a socket would. */
    size_t chunk = size > 0 ? (size_t)data[0] % 17 + 1 : 1;
    size_t off = size > 0 ? 1 : 0;
    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (fb_linebuf_append(&lb, (const char *)data + off, n) < 0)
            abort();
        off += n;
        const char *line;
        size_t len;
        int rc;
        while ((rc = fb_linebuf_next(&lb, &line, &len)) == 1) {
            struct fb_frame f;
            char err[256];
            int prc = fb_parse_frame(line, len, &f, err, sizeof(err));
            if (prc == 0 && f.op == FB_OP_CONTROL)
                fb_control_apply(&ctl, &f, 30000);
            if (prc == 0 && f.op == FB_OP_PUBLISH) {
                check_round_trip(f.topic);
                check_round_trip(f.message_id);
                check_round_trip(f.partition_key);
                check_round_trip(f.payload);
                char sha[65];
                fb_sha256_hex(f.payload ? f.payload : "", f.payload_len, sha);
            }
            if (prc != 0 && strlen(err) == 0)
                abort(); /* every refusal must say why */
            fb_frame_free(&f);
        }
        if (rc < 0)
            break; /* the broker closes such a connection */
    }
    cJSON_Delete(fb_control_json(&ctl));
    fb_linebuf_free(&lb);
    return 0;
}
