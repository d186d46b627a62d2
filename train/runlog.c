// runlog.c: the training run's log line, metrics JSONL, TensorBoard scalars, report page and summary.
#include "runlog.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../report/report.h"
#include "../util/common.h"
#include "../util/version.h"

// Dense bf16 peak of one H100/H200 SXM (989.4 TFLOP/s): the MFU denominator on CUDA.
#define GPU_PEAK_FLOPS 989.4e12

struct RunLog {
    const Config *c;
    FILE *metrics;
    char mpath[1100];
    TbWriter *tb;
    long it0, iters_timed, iters_first;
    int world, gpu;
    double flops_tok, flops_tok_gdn;
    double t_start, t_report, timed_s, first_s; // summed interval time (checkpoints excluded), the first's
    double last_loss, best_valid, final_valid;
    double comm_ms_sum; // data parallel: collective time of the steps after the run's first (its warm-up)
    long comm_n;
    int n_valid;
    char last_ckpt[1200];
    pid_t child; // the report refresh in progress
};

void format_hms(char *out, size_t n, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5), d = t / 86400;
    t %= 86400;
    if (d) snprintf(out, n, "%ldd %ld:%02ld:%02ld", d, t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

long metrics_truncate(const char *path, long keep_iter, char *err, size_t errlen) {
    if (!file_exists(path)) return 0;
    size_t len;
    char *text = read_file(path, &len, err, errlen);
    if (!text) return -1;
    Buf out = {0};
    long kept = 0, dropped = 0;
    for (char *line = text, *nl; *line; line = nl) {
        nl = strchr(line, '\n');
        if (!nl) nl = line + strlen(line); // a last line without '\n' is a write cut short: parse it anyway
        char save = *nl;
        *nl = 0;
        cJSON *row = cJSON_Parse(line);
        const cJSON *it = row ? cJSON_GetObjectItem(row, "iteration") : NULL;
        if (cJSON_IsNumber(it) && it->valuedouble <= keep_iter && !cJSON_GetObjectItem(row, "summary")) {
            buf_puts(&out, line);
            buf_puts(&out, "\n");
            kept++;
        } else if (line[0]) dropped++;
        cJSON_Delete(row);
        *nl = save;
        if (*nl) nl++;
    }
    int rc = write_file_atomic(path, out.p ? out.p : "", out.n, err, errlen);
    buf_free(&out);
    free(text);
    if (rc) return -1;
    if (dropped) printf("gdn train: %s: dropped %ld rows past iteration %ld (resumed there)\n", path, dropped, keep_iter);
    return kept;
}

RunLog *runlog_open(const Config *c, long it0, int world, int gpu, double flops_tok, double flops_tok_gdn) {
    RunLog *r = xcalloc(1, sizeof *r);
    r->c = c; r->it0 = it0; r->world = world; r->gpu = gpu;
    r->flops_tok = flops_tok; r->flops_tok_gdn = flops_tok_gdn;
    r->t_start = now_sec();
    r->t_report = -1e9; // the first log interval refreshes the page
    r->best_valid = INFINITY;
    char err[ERR_LEN];
    if (c->metrics_file[0]) snprintf(r->mpath, sizeof r->mpath, "%s", c->metrics_file);
    else if (c->save[0]) snprintf(r->mpath, sizeof r->mpath, "%s/metrics.jsonl", c->save);
    if (r->mpath[0]) {
        if (it0 > 0 && metrics_truncate(r->mpath, it0, err, sizeof err) < 0) die("metrics file: %s", err);
        if (!(r->metrics = fopen(r->mpath, it0 > 0 ? "a" : "w"))) die("cannot open metrics file %s", r->mpath);
    }
    if (c->tensorboard_dir[0] && !(r->tb = tb_open(c->tensorboard_dir, it0 > 0 ? it0 + 1 : 0, err, sizeof err)))
        die("%s", err);
    return r;
}

void runlog_step(RunLog *r, long it, double loss, double lr, double gnorm, double comm_ms) {
    if (!r) return;
    long long samples = (long long)it * r->c->global_batch_size;
    r->last_loss = loss;
    if (comm_ms >= 0 && it > r->it0 + 1) r->comm_ms_sum += comm_ms, r->comm_n++;
    if (r->metrics) {
        fprintf(r->metrics, "{\"iteration\": %ld, \"lm_loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"consumed_samples\": %lld",
                it, loss, lr, gnorm, samples);
        // collective time left after the backward (data parallel): loss sum, gradient reduction, grad norm
        if (comm_ms >= 0) fprintf(r->metrics, ", \"comm_ms\": %.3f", comm_ms);
        fprintf(r->metrics, "}\n");
        fflush(r->metrics);
    }
    if (r->tb) { // Megatron's training_log tags; the twins are stepped by consumed samples
        static const char *tags[4] = {"learning-rate", "batch-size", "lm loss", "grad-norm"};
        double vals[4] = {lr, r->c->global_batch_size, loss, gnorm};
        char twin[64];
        for (int i = 0; i < 4; i++) {
            tb_scalar(r->tb, tags[i], it, vals[i]);
            snprintf(twin, sizeof twin, "%s vs samples", tags[i]);
            tb_scalar(r->tb, twin, samples, vals[i]);
        }
        tb_scalar(r->tb, "loss-scale", it, 1.0);
        tb_scalar(r->tb, "loss-scale vs samples", samples, 1.0);
    }
}

void runlog_memory(RunLog *r, long it, const BackendMemStats *m) {
    if (!r || !r->tb) return;
    tb_scalar(r->tb, "mem-reserved-bytes", it, (double)m->reserved);
    tb_scalar(r->tb, "mem-allocated-bytes", it, (double)m->allocated);
    tb_scalar(r->tb, "mem-max-allocated-bytes", it, (double)m->peak);
    tb_scalar(r->tb, "mem-allocated-count", it, (double)m->count);
}

static void timestamp(char *out, size_t n) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%06ld", (long)tv.tv_usec);
}

// The report is built in a forked child, so plotting never holds up training (a 50k-iteration JSONL takes
// about a second to plot); a refresh is skipped while the previous one still runs. The last one (force) waits.
static void refresh_report(RunLog *r, int force) {
    if (!r->c->report_dir[0] || !r->mpath[0]) return;
    if (r->child > 0 && waitpid(r->child, NULL, force ? 0 : WNOHANG) == r->child) r->child = 0;
    if (r->child > 0 || (!force && now_sec() - r->t_report < 10)) return;
    r->t_report = now_sec();
    if (r->metrics) fflush(r->metrics);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = force ? 0 : fork();
    if (pid > 0) { r->child = pid; return; }
    // child (or the final refresh in the trainer itself): no CUDA, no MPI, only files
    ReportOpts o;
    report_opts_default(&o);
    o.quiet = 1;
    o.live = !force;
    const char *runs[1] = {r->mpath};
    char err[ERR_LEN];
    int rc = report_build(runs, 1, NULL, r->c->report_dir, &o, NULL, err, sizeof err);
    if (rc) fprintf(stderr, "gdn train: warning: report page not refreshed: %s\n", err);
    if (pid == 0 && !force) _exit(rc ? 1 : 0);
}

void runlog_interval(RunLog *r, long it, double ms, double loss_avg, double lr, double gnorm) {
    if (!r) return;
    const Config *c = r->c;
    long n = it - (r->it0 + r->iters_timed);
    r->iters_timed += n;
    r->timed_s += ms * 1e-3 * n;
    if (!r->iters_first) r->iters_first = n, r->first_s = ms * 1e-3 * n;
    double rank_tok = (double)c->global_batch_size * c->seq_length / r->world, tok_s = rank_tok / (ms / 1e3);
    double tflops = r->flops_tok * rank_tok / (ms / 1e3) / 1e12, tflops_gdn = r->flops_tok_gdn * rank_tok / (ms / 1e3) / 1e12;
    // ETA from the mean step time, without the first interval (start-up, warm-up) once there are others
    long n_eta = r->iters_timed - r->iters_first;
    double per_it = n_eta > 0 ? (r->timed_s - r->first_s) / n_eta : r->timed_s / r->iters_timed;
    double elapsed = now_sec() - r->t_start, eta = (c->train_iters - it) * per_it;
    char ts[64], el[32], et[32];
    timestamp(ts, sizeof ts);
    format_hms(el, sizeof el, elapsed);
    format_hms(et, sizeof et, eta);
    Buf b = {0};
    buf_printf(&b, " [%s] iteration %8ld/%8d | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | ", ts, it,
               c->train_iters, (long long)it * c->global_batch_size, ms);
    if (r->gpu) // per GPU as Megatron prints them: this rank's share of the step
        buf_printf(&b, "throughput per GPU (TFLOP/s/GPU): %.1f | tokens per GPU (tokens/s/GPU): %.1f | ", tflops, tok_s);
    else if (r->world > 1) buf_printf(&b, "tokens per rank (tokens/s/rank): %.1f | ", tok_s);
    else buf_printf(&b, "tokens per second: %.1f | ", tok_s);
    buf_printf(&b, "learning rate: %.6E | global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | "
               "number of skipped iterations:   0 | number of nan iterations:   0 | elapsed: %s | ETA: %s |",
               lr, c->global_batch_size, loss_avg, gnorm, el, et);
    printf("%s\n", b.p);
    fflush(stdout);
    buf_free(&b);
    if (r->metrics) {
        fprintf(r->metrics, "{\"iteration\": %ld, \"log\": true, \"ms_per_iter\": %.3f, \"tokens_per_s\": %.1f, \"elapsed_s\": %.3f, ",
                it, ms, tok_s, elapsed);
        if (r->gpu) fprintf(r->metrics, "\"tflops_megatron\": %.3f, \"tflops_gdn\": %.3f, ", tflops, tflops_gdn);
        fprintf(r->metrics, "\"lm_loss_avg\": %.9g}\n", loss_avg);
        fflush(r->metrics);
    }
    if (r->tb) {
        if (it > r->it0 + 1) { // Megatron: at log intervals, not the first iteration
            tb_scalar(r->tb, "iteration-time", it, ms / 1e3);
            if (r->gpu) tb_scalar(r->tb, "throughput", it, tflops);
        }
        if (tb_flush(r->tb)) fprintf(stderr, "gdn train: warning: writing %s failed\n", tb_path(r->tb));
    }
    refresh_report(r, 0);
}

void runlog_valid(RunLog *r, long it, const char *prefix, double loss) {
    if (!r) return;
    double ppl = exp(fmin(20.0, loss));
    long long samples = (long long)it * r->c->global_batch_size;
    char line[512];
    int n = snprintf(line, sizeof line, " validation loss at %s | lm loss value: %.6E | lm loss PPL: %.6E | ", prefix, loss, ppl);
    char dashes[600];
    memset(dashes, '-', (size_t)n + 1);
    dashes[n + 1] = 0;
    printf("%s\n%s\n%s\n", dashes, line, dashes);
    fflush(stdout);
    if (r->metrics) {
        fprintf(r->metrics, "{\"iteration\": %ld, \"valid_loss\": %.9g, \"valid_ppl\": %.9g, \"consumed_samples\": %lld}\n", it,
                loss, ppl, samples);
        fflush(r->metrics);
    }
    runlog_valid_record(r, it, loss);
}

FILE *runlog_metrics(RunLog *r) { return r ? r->metrics : NULL; }

void runlog_valid_record(RunLog *r, long it, double loss) {
    if (!r) return;
    double ppl = exp(fmin(20.0, loss));
    long long samples = (long long)it * r->c->global_batch_size;
    r->final_valid = loss;
    if (loss < r->best_valid) r->best_valid = loss;
    r->n_valid++;
    tb_scalar(r->tb, "lm loss validation", it, loss);
    tb_scalar(r->tb, "lm loss validation vs samples", samples, loss);
    tb_scalar(r->tb, "lm loss validation ppl", it, ppl);
    tb_scalar(r->tb, "lm loss validation ppl vs samples", samples, ppl);
    tb_flush(r->tb);
}

void runlog_checkpoint(RunLog *r, const char *path) {
    if (r) snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s", path);
}

TbWriter *runlog_tb(RunLog *r) { return r ? r->tb : NULL; }

void runlog_close(RunLog *r, long last_it) {
    if (!r) return;
    const Config *c = r->c;
    long iters = last_it - r->it0;
    double wall = now_sec() - r->t_start, tokens = (double)iters * c->global_batch_size * c->seq_length;
    double tok_s = r->timed_s > 0 ? tokens / r->timed_s : 0; // all ranks, step time only
    char wt[32];
    format_hms(wt, sizeof wt, wall);
    printf("gdn train: done (gdn %s): iterations %ld-%ld (%ld), %.4g tokens, wall time %s, %.1f tokens/s (%.1f per %s)",
           gdn_version, r->it0 + 1, last_it, iters, tokens, wt, tok_s, tok_s / r->world, r->gpu ? "GPU" : "rank");
    double mfu = r->gpu && tok_s > 0 ? r->flops_tok * tok_s / r->world / GPU_PEAK_FLOPS : 0;
    if (r->gpu) printf(", MFU %.1f%% (of %.0f TFLOP/s bf16 per GPU)", 100 * mfu, GPU_PEAK_FLOPS / 1e12);
    printf(", final lm loss %.4f", r->last_loss);
    if (r->n_valid) printf(", validation loss final %.4f best %.4f", r->final_valid, r->best_valid);
    if (r->last_ckpt[0]) printf(", last checkpoint %s", r->last_ckpt);
    if (r->comm_n) printf(", collectives %.1f ms per step", r->comm_ms_sum / r->comm_n);
    printf("\n");
    fflush(stdout);
    if (r->metrics) {
        fprintf(r->metrics, "{\"iteration\": %ld, \"summary\": true, \"gdn_version\": \"%s\", \"iterations\": %ld, \"tokens\": %.0f, "
                "\"wall_s\": %.3f, \"mean_tokens_per_s\": %.1f, \"final_lm_loss\": %.9g", last_it, gdn_version, iters, tokens, wall, tok_s, r->last_loss);
        if (r->gpu) fprintf(r->metrics, ", \"mfu\": %.5f", mfu);
        if (r->comm_n) fprintf(r->metrics, ", \"mean_comm_ms\": %.3f", r->comm_ms_sum / r->comm_n);
        if (r->n_valid) fprintf(r->metrics, ", \"final_valid_loss\": %.9g, \"best_valid_loss\": %.9g", r->final_valid, r->best_valid);
        fprintf(r->metrics, "}\n");
        if (fclose(r->metrics)) fprintf(stderr, "gdn train: warning: writing %s failed\n", r->mpath);
        r->metrics = NULL;
    }
    tb_close(r->tb);
    refresh_report(r, 1);
    free(r);
}
