// runlog.h: what a training run tells the outside world, in one place: the Megatron-style log line (plus
// elapsed and ETA), the metrics JSONL, TensorBoard scalars (Megatron's tags), validation blocks, the report
// page refresh and the end-of-run summary. Only the lead rank opens one; every call accepts NULL.
//
// metrics JSONL rows (one JSON object a line, "iteration" in every row):
//   every iteration   {"iteration", "lm_loss", "lr", "grad_norm", "consumed_samples"}   lr = the rate that step used
//   at log intervals  {"iteration", "log": true, "ms_per_iter", "tokens_per_s" (per rank), "elapsed_s",
//                      ["tflops_megatron", "tflops_gdn" (per GPU, CUDA only)], "lm_loss_avg"}
//   validation        {"iteration", "valid_loss", "valid_ppl", "consumed_samples"}
//   end of run        {"iteration", "summary": true, ...}
// On resume, rows past the resumed iteration (and old summaries) are dropped before appending.
#pragma once
#include <stdio.h>

#include "../model/backend.h"
#include "../model/config.h"
#include "tensorboard.h"

typedef struct RunLog RunLog;

// it0: the iteration the run starts after (the resumed one, 0 for a fresh run); gpu: per-GPU columns and MFU
// make sense; flops_tok: model FLOPs per token (Megatron's basis, and the GDN-aware count). Dies on I/O errors.
RunLog *runlog_open(const Config *c, long it0, int world, int gpu, double flops_tok, double flops_tok_gdn);
// Every iteration: the JSONL row and TensorBoard's per-iteration tags.
void runlog_step(RunLog *r, long it, double loss, double lr, double grad_norm, double comm_ms); // comm_ms < 0: not logged
// log_memory_to_tensorboard: Megatron's mem-* tags for this iteration, from the backend's allocation statistics
// (reserved: the device's memory in use; allocated, max-allocated, count: the backend's buffers and scratch).
void runlog_memory(RunLog *r, long it, const BackendMemStats *m);
// At a log interval: the log line, the interval's JSONL row, iteration-time/throughput scalars, the report page.
// ms: wall ms per iteration over the interval (checkpoint time excluded), loss_avg: mean over the interval.
void runlog_interval(RunLog *r, long it, double ms, double loss_avg, double lr, double grad_norm);
// A validation result: Megatron's dashed block (" validation loss at <prefix> | ..."), its JSONL row, its tags.
// prefix is e.g. "iteration 1000" or "iteration 1000 on validation set".
void runlog_valid(RunLog *r, long it, const char *prefix, double loss);
// runlog_valid without the block and the row (for a caller that writes its own, train/validate.c): the
// TensorBoard tags and the summary's final/best validation loss.
void runlog_valid_record(RunLog *r, long it, double loss);
FILE *runlog_metrics(RunLog *r); // the metrics JSONL (NULL when none), for rows written elsewhere
void runlog_checkpoint(RunLog *r, const char *path); // remembered for the summary
TbWriter *runlog_tb(RunLog *r); // for extra scalars (tb_scalar); NULL without tensorboard_dir
// Prints the summary and writes its row; then closes the files (the report page is refreshed a last time).
void runlog_close(RunLog *r, long last_it);

// "1:02:03" (or "3d 1:02:03") for the log line's elapsed/ETA.
void format_hms(char *out, size_t n, double seconds);
// Rewrites a metrics JSONL keeping only rows with iteration <= keep_iter (and no summary rows); unparsable
// lines (a crash mid-write) are dropped. Returns the rows kept, -1 + err on failure. A missing file is 0 rows.
long metrics_truncate(const char *path, long keep_iter, char *err, size_t errlen);
