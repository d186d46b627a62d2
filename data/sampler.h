// sampler.h: which training sample each rank reads at each step, as Megatron's GPTDataset or FLA's
// loader would choose it (spec data.md §3 and §4). A sample is seq_length inputs and seq_length labels
// (-1 = ignored position).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "indexed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ORDER_MEGATRON, ORDER_FLA } SampleOrder;

typedef struct Sampler Sampler;

// num_samples: samples the whole run will draw (train_iters * global_batch_size); Megatron sizes its epochs
// from it. NULL + err (e.g. dataset shorter than one sample) on failure.
Sampler *sampler_open(const IndexedDataset *ds, SampleOrder order, int seq_length, uint64_t num_samples,
                      uint64_t seed, char *err, size_t errlen);
// The same over sequences [doc_lo, doc_hi) only (a train/valid/test split); num_samples 0 = one epoch
// (Megatron's num_samples=None). FLA order takes whole datasets only.
Sampler *sampler_open_docs(const IndexedDataset *ds, SampleOrder order, int seq_length, uint64_t num_samples,
                           uint64_t seed, uint64_t doc_lo, uint64_t doc_hi, char *err, size_t errlen);
// FLA order over the concatenation of n datasets (chunk i of the first, then of the next, ...), as FLA reads
// one dataset saved from several.
#define SAMPLER_MAX_PARTS 64
Sampler *sampler_open_fla_concat(const IndexedDataset *const *ds, int n, int seq_length, uint64_t seed, char *err,
                                 size_t errlen);
void sampler_free(Sampler *s);
uint64_t sampler_size(const Sampler *s); // samples available (one epoch for FLA; Megatron's S)
// Fills inputs[seq_length] and labels[seq_length] for global sample position g (0-based count of samples
// consumed over the whole run, in the order the reference loader yields them to a single rank).
void sampler_get(Sampler *s, uint64_t g, int32_t *inputs, int32_t *labels);
// The global position read by `rank` (of `world`) at optimizer step `step`, micro-batch `micro`, row j
// (Megatron "single" loader: contiguous blocks; FLA: accelerate BatchSamplerShard assignment).
uint64_t sampler_position(const Sampler *s, uint64_t step, int micro, int rank, int j, int micro_batch_size,
                          int world, int global_batch_size);

#ifdef __cplusplus
}
#endif
