// blend.h: the train/valid/test datasets of a run as Megatron's BlendedMegatronDatasetBuilder makes them
// (spec train.md §1): data_path lists ("A B" or "w1 A w2 B"), each prefix cut by `split` into sequence
// ranges, or per-split lists (train/valid/test_data_path); weighted blends draw from per-prefix GPTDatasets
// sized with the surplus margin, through Megatron's greedy blending index.
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "../model/config.h"
#include "sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST, NSPLITS };
#define BLEND_MAX 64

// One data path list parsed (train.md §1.1).
typedef struct {
    int n, weighted;
    char prefix[BLEND_MAX][512];
    double weight[BLEND_MAX]; // as given (weighted) or 0
} BlendList;
int blend_parse(const char *list, BlendList *b, char *err, size_t errlen);
// "969,30,1" -> normalised [3] (train.md §1.5 step 1).
int split_parse(const char *s, double v[3], char *err, size_t errlen);
// Sequence range [lo, hi) of split k of N sequences; returns 0 when the split is None (zero width).
int split_range(const double v[3], uint64_t N, int k, uint64_t *lo, uint64_t *hi);
// numpy's normalize (pairwise float64 sum), which the weights and the split go through.
void blend_normalize(const double *in, int n, double *out);
// Requested samples per split (train.md §1.2).
void blend_requested(const Config *c, uint64_t S[NSPLITS]);

typedef struct Datasets Datasets;
// Opens the prefixes and builds every split that has data. NULL + err on failure.
Datasets *datasets_open(const Config *c, char *err, size_t errlen);
void datasets_free(Datasets *d);
int datasets_has(const Datasets *d, int split);             // split exists (a dataset was built)
uint64_t datasets_size(const Datasets *d, int split);       // items of that split
// Item g of a split: seq_length inputs and labels (-1 = ignored).
void datasets_get(Datasets *d, int split, uint64_t g, int32_t *inputs, int32_t *labels);
// Which mid-level dataset and which of its items item g is (for tests and `gdn dataset`).
void datasets_locate(const Datasets *d, int split, uint64_t g, int *dataset, uint64_t *item);
// The blend and split: per prefix and split its weight, sequences, tokens and samples.
void datasets_describe(const Datasets *d, FILE *f);

#ifdef __cplusplus
}
#endif
