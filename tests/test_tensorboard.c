// test_tensorboard.c: the event-file encoder against published vectors: CRC32C check values (RFC 3720's
// "123456789" and 32 zero bytes), TensorBoard's masked-CRC test case (tensorboard/data/server/masked_crc.rs),
// and one scalar record whose bytes were decoded with protoc against TensorBoard's event.proto.
#include <math.h>
#include <string.h>

#include "check.h"
#include "train/tensorboard.h"

static const uint8_t want_data[29] = {0x09, 0x00, 0x00, 0x60, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x10, 0x64, 0x2a, 0x10, 0x0a, 0x0e,
                                      0x0a, 0x07, 'l',  'm',  ' ',  'l',  'o',  's',  's',  0x15, 0x00, 0x00, 0x20, 0x40};

int main(void) {
    CHECK(crc32c("123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x", crc32c("123456789", 9));
    uint8_t zeros[32] = {0};
    CHECK(crc32c(zeros, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x", crc32c(zeros, 32));
    const char mc[] = "\x1a\x11" "CRC test, one two";
    CHECK(tb_masked_crc(mc, 19) == 0x5794D08Au, "masked crc = %08x", tb_masked_crc(mc, 19));

    uint8_t ev[64];
    size_t n = tb_encode_scalar(ev, 1700000001.5, 100, "lm loss", 2.5f);
    CHECK(n == 29 && !memcmp(ev, want_data, 29), "scalar event: %zu bytes, differs from the decoded example", n);
    uint8_t rec[64];
    size_t m = tb_frame(rec, ev, n);
    const uint8_t head[12] = {0x1d, 0, 0, 0, 0, 0, 0, 0, 0x60, 0x2f, 0xdf, 0x23}, tail[4] = {0xe4, 0xa3, 0xc7, 0x27};
    CHECK(m == 45 && !memcmp(rec, head, 12) && !memcmp(rec + 41, tail, 4), "record framing differs");

    // a step of 2^40 needs a 6-byte varint; a 200-byte tag a 2-byte length inside two nested lengths
    char tag[201];
    memset(tag, 'a', 200); tag[200] = 0;
    uint8_t big[300];
    n = tb_encode_scalar(big, 0.0, 1L << 40, tag, -1.0f);
    CHECK(n == 9 + 1 + 6 + 1 + 2 + 1 + 2 + 1 + 2 + 200 + 5, "long event: %zu bytes", n);
    CHECK(big[10] == 0x80 && big[15] == 0x20, "varint of 2^40: %02x .. %02x", big[10], big[15]);
    float v;
    memcpy(&v, big + n - 4, 4);
    CHECK(big[n - 5] == 0x15 && v == -1.0f, "simple_value at the end");
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
