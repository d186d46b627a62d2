// series.h: one run's metrics, read from any of the logs `gdn report` accepts, merged per iteration.
#pragma once
#include <stddef.h>

// Fields absent in a source are NAN.
typedef struct {
    long it;
    double loss;     // this iteration's loss (our JSONL), else the logged (interval-mean) loss
    double loss_log; // the loss as a log line prints it: mean over the log interval (Megatron, HF, our lm_loss_avg)
    double lr, gnorm;
    double ms;        // ms per iteration over the log interval ending here
    double tok_s_gpu; // tokens/s per GPU (per rank on CPU runs)
    double valid;     // validation loss
} Point;

typedef struct {
    char name[256];  // label: the path as given
    char kind[48];   // "gdn metrics", "megatron log", "hf trainer_state", ...
    char version[96];
    Point *p;
    size_t n, cap;
    double wall_s;   // wall time of the run when the source says (NAN otherwise)
    double loss_div; // divisor applied to HF/FLA losses and grad norms (1 for the others)
} Series;

typedef struct {
    double hf_loss_div; // FLA/HF Trainer losses and grad norms are divided by this (spec data.md §6.2; 8 = world size)
    int hf_logging_steps; // step of the k-th HF stdout dict line = k * this (stdout dicts carry no step)
} LoadOpts;

// path: a save dir (metrics.jsonl / trainer_state.json / trainer_log.jsonl inside), our metrics JSONL, an HF
// trainer_state.json, FLA's trainer_log.jsonl, or a text log (Megatron/Primus lines, validation blocks, HF
// dict lines). Returns 0, or -1 with err naming the file and line.
int series_load(Series *s, const char *path, const LoadOpts *o, char *err, size_t errlen);
void series_free(Series *s);
// Linear interpolation of field (offset into Point) at iteration it; NAN outside the logged range.
// *exact is set when a point sits at it.
double series_at(const Series *s, size_t field, long it, int *exact);
