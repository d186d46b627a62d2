// report.h: `gdn report`: the recipe's step-6 comparison table, plots (PNG + SVG) and one HTML page.
#pragma once
#include <stdio.h>

#include "series.h"

typedef struct {
    long iters[64];   // table rows; n_iters == 0: 1, 100, 500, 1000, every 1000, and the last
    int n_iters;
    LoadOpts load;
    int quiet;        // no table on stdout (the trainer's refresh)
    int live;         // the page reloads itself (a run in progress)
} ReportOpts;

void report_opts_default(ReportOpts *o);
// Loads RUNs (and REF, may be NULL), prints the table to table_out (may be NULL), and, with outdir, writes
// outdir/{table.md, report.json, loss, lr, grad_norm, throughput .png/.svg, index.html}. 0, or -1 + err.
int report_build(const char *const *runs, int nruns, const char *ref, const char *outdir, const ReportOpts *o,
                 FILE *table_out, char *err, size_t errlen);

// The table's numbers for one run against the reference (exposed for the HTML page and report.json).
typedef struct {
    long first_cross;  // first compared iteration where the sign of (run - ref) flips; -1 if none
    int cross_below;   // 1: the run goes below the reference there
    long cmp_lo, cmp_hi; // the iterations compared
    double mean_ms, mean_tok_s_gpu, wall_s;
} RunStats;
void report_stats(const Series *run, const Series *ref, RunStats *st);
// The loss a table compares: the log-line (interval mean) loss where the source has one.
size_t report_loss_field(const Series *s);
