// tensorboard.c: scalar event files for TensorBoard. The protobuf subset (Event, Summary.Value with a float)
// is a handful of fields, so it is encoded here rather than through generated protobuf-c code.
#include "tensorboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../util/common.h"

struct TbWriter {
    FILE *f;
    char path[1200];
    int failed;
};

static uint32_t crc_table[256];
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}
uint32_t crc32c(const void *p, size_t n) {
    static int ready;
    if (!ready) { crc_init(); ready = 1; } // a fixed table: a racing second init writes the same values
    const uint8_t *b = p;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
uint32_t tb_masked_crc(const void *p, size_t n) {
    uint32_t c = crc32c(p, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

static size_t put_varint(uint8_t *o, uint64_t v) {
    size_t k = 0;
    while (v >= 0x80) { o[k++] = (uint8_t)(v | 0x80); v >>= 7; }
    o[k++] = (uint8_t)v;
    return k;
}
static size_t put_le(uint8_t *o, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) o[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}
static size_t put_double(uint8_t *o, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return put_le(o, u, 8);
}
// Event header: wall_time (field 1, fixed64) and step (field 2, varint; absent when 0, as proto3 does).
static size_t put_head(uint8_t *o, double wall, long step) {
    size_t k = 0;
    o[k++] = 0x09;
    k += put_double(o + k, wall);
    if (step) { o[k++] = 0x10; k += put_varint(o + k, (uint64_t)step); }
    return k;
}

size_t tb_encode_scalar(uint8_t *out, double wall_time, long step, const char *tag, float value) {
    size_t tl = strlen(tag), vlen; // Value: tag (field 1, LEN) and simple_value (field 2, fixed32)
    uint8_t tlv[10], vlv[10], slv[10];
    size_t ntl = put_varint(tlv, tl), nvl, nsl;
    vlen = 1 + ntl + tl + 5;
    nvl = put_varint(vlv, vlen);
    size_t slen = 1 + nvl + vlen; // Summary: repeated value (field 1, LEN)
    nsl = put_varint(slv, slen);
    size_t k = put_head(out, wall_time, step);
    out[k++] = 0x2A; memcpy(out + k, slv, nsl); k += nsl;      // Event.summary (field 5)
    out[k++] = 0x0A; memcpy(out + k, vlv, nvl); k += nvl;      // Summary.value
    out[k++] = 0x0A; memcpy(out + k, tlv, ntl); k += ntl;      // Value.tag
    memcpy(out + k, tag, tl); k += tl;
    uint32_t u;
    memcpy(&u, &value, 4);
    out[k++] = 0x15; k += put_le(out + k, u, 4);               // Value.simple_value
    return k;
}

size_t tb_frame(uint8_t *out, const uint8_t *data, size_t n) {
    put_le(out, n, 8);
    put_le(out + 8, tb_masked_crc(out, 8), 4);
    memcpy(out + 12, data, n);
    put_le(out + 12 + n, tb_masked_crc(data, n), 4);
    return n + 16;
}

static void write_record(TbWriter *w, const uint8_t *data, size_t n) {
    uint8_t *rec = xmalloc(n + 16);
    size_t m = tb_frame(rec, data, n);
    if (fwrite(rec, 1, m, w->f) != m) w->failed = 1;
    free(rec);
}

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

TbWriter *tb_open(const char *dir, long purge_step, char *err, size_t errlen) {
    if (mkdir_p(dir)) { set_err(err, errlen, "tensorboard_dir %s: cannot create it (%s)", dir, strerror(errno)); return NULL; }
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    TbWriter *w = xcalloc(1, sizeof *w);
    // PyTorch's name; the counter keeps two writers of one process and second apart
    for (int n = 0;; n++) {
        snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010ld.%s.%ld.%d", dir, (long)time(NULL), host,
                 (long)getpid(), n);
        if (!file_exists(w->path)) break;
    }
    if (!(w->f = fopen(w->path, "wb"))) {
        set_err(err, errlen, "%s: cannot create (%s)", w->path, strerror(errno));
        free(w);
        return NULL;
    }
    uint8_t ev[64];
    size_t k = put_head(ev, wall_now(), 0);
    ev[k++] = 0x1A; ev[k++] = 13; memcpy(ev + k, "brain.Event:2", 13); k += 13; // Event.file_version (field 3)
    write_record(w, ev, k);
    if (purge_step > 0) { // Event.session_log (field 7) = SessionLog{status (field 1) = START (1)}
        k = put_head(ev, wall_now(), purge_step);
        ev[k++] = 0x3A; ev[k++] = 2; ev[k++] = 0x08; ev[k++] = 1;
        write_record(w, ev, k);
    }
    fflush(w->f);
    return w;
}

void tb_scalar(TbWriter *w, const char *tag, long step, double value) {
    if (!w) return;
    size_t tl = strlen(tag);
    uint8_t *ev = xmalloc(tl + 48);
    size_t n = tb_encode_scalar(ev, wall_now(), step, tag, (float)value);
    write_record(w, ev, n);
    free(ev);
}

int tb_flush(TbWriter *w) {
    if (!w) return 0;
    if (fflush(w->f)) w->failed = 1;
    return w->failed ? -1 : 0;
}

void tb_close(TbWriter *w) {
    if (!w) return;
    if (fclose(w->f)) w->failed = 1;
    if (w->failed) fprintf(stderr, "gdn: warning: writing %s failed (disk full?); TensorBoard data is incomplete\n", w->path);
    free(w);
}

const char *tb_path(const TbWriter *w) { return w ? w->path : ""; }
