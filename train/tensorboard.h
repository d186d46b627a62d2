// tensorboard.h: TensorBoard event files (TFRecord framing of tensorboard.Event protobufs), written without
// TensorFlow: scalars only, the "old style" simple_value that PyTorch's SummaryWriter.add_scalar writes.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct TbWriter TbWriter;

// Creates DIR and a new events.out.tfevents.<time>.<host>.<pid>.<n> file in it (a restart adds a file, as
// PyTorch does). purge_step > 0 (a resume) writes a SessionLog START at that step: TensorBoard then drops the
// older files' events at steps >= purge_step, so re-run iterations do not show twice. NULL + err on failure.
TbWriter *tb_open(const char *dir, long purge_step, char *err, size_t errlen);
void tb_scalar(TbWriter *w, const char *tag, long step, double value); // no-op when w is NULL
int tb_flush(TbWriter *w);                                           // 0 ok, -1 on a write error
void tb_close(TbWriter *w);                                           // flushes; accepts NULL
const char *tb_path(const TbWriter *w);

// The pieces, exposed for the tests.
uint32_t crc32c(const void *p, size_t n);        // Castagnoli, reflected 0x82F63B78, init/xorout ~0
uint32_t tb_masked_crc(const void *p, size_t n); // ((c >> 15) | (c << 17)) + 0xA282EAD8
// Serialized Event{wall_time, step, summary{value{tag, simple_value}}} into out (>= 32 + strlen(tag) bytes).
size_t tb_encode_scalar(uint8_t *out, double wall_time, long step, const char *tag, float value);
// One TFRecord (length, masked CRC of the length, data, masked CRC of the data) into out (n + 16 bytes).
size_t tb_frame(uint8_t *out, const uint8_t *data, size_t n);
