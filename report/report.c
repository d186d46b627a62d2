// report.c: `gdn report RUN... [--vs REF] [--out DIR]`: the step-6 table of the recipe (iteration, REF, ours,
// delta %, first crossover, ms/iter, tokens/s/GPU, wall time), plots and a self-contained HTML page.
#include "report.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "../util/version.h"
#include "html.h"
#include "plot.h"

void report_opts_default(ReportOpts *o) {
    memset(o, 0, sizeof *o);
    o->load.hf_loss_div = 8;
    o->load.hf_logging_steps = 32;
}

size_t report_loss_field(const Series *s) {
    for (size_t i = 0; i < s->n; i++)
        if (!isnan(s->p[i].loss_log)) return offsetof(Point, loss_log);
    return offsetof(Point, loss);
}

// Means over log intervals weighted by their iterations, without the first interval (start-up, compilation).
static void means(const Series *s, size_t field, double *mean, double *total_s) {
    double num = 0, den = 0, all = 0;
    long prev = 0;
    int seen = 0;
    for (size_t i = 0; i < s->n; i++) {
        double v = *(const double *)((const char *)&s->p[i] + field);
        if (isnan(v)) continue;
        double w = (double)(s->p[i].it - prev);
        prev = s->p[i].it;
        all += w * v;
        if (seen++) { num += w * v; den += w; }
    }
    *mean = den > 0 ? num / den : seen ? all / fmax(1, prev) : NAN;
    if (total_s) *total_s = seen ? all / 1e3 : NAN;
}

void report_stats(const Series *run, const Series *ref, RunStats *st) {
    memset(st, 0, sizeof *st);
    st->first_cross = -1;
    double step_s;
    means(run, offsetof(Point, ms), &st->mean_ms, &step_s);
    means(run, offsetof(Point, tok_s_gpu), &st->mean_tok_s_gpu, NULL);
    st->wall_s = !isnan(run->wall_s) ? run->wall_s : step_s;
    if (!ref) return;
    // crossover on the reference's logged iterations, the run interpolated between its own
    size_t fa = report_loss_field(run), fb = report_loss_field(ref);
    int sign0 = 0;
    st->cmp_lo = -1;
    for (size_t i = 0; i < ref->n; i++) {
        double b = *(const double *)((const char *)&ref->p[i] + fb);
        int ex;
        double a = series_at(run, fa, ref->p[i].it, &ex);
        if (isnan(a) || isnan(b)) continue;
        if (st->cmp_lo < 0) st->cmp_lo = ref->p[i].it;
        st->cmp_hi = ref->p[i].it;
        int sg = (a > b) - (a < b);
        if (!sg) continue;
        if (!sign0) sign0 = sg;
        else if (sg != sign0 && st->first_cross < 0) { st->first_cross = ref->p[i].it; st->cross_below = sg < 0; }
    }
}

static void default_iters(const Series *s, long *out, int *n) {
    long last = s->p[s->n - 1].it, base[4] = {1, 100, 500, 1000};
    for (size_t i = s->n; i-- > 0;) // the last iteration with a loss (an LR-only point may follow, series.c)
        if (!isnan(s->p[i].loss)) { last = s->p[i].it; break; }
    *n = 0;
    for (int i = 0; i < 4 && base[i] < last; i++) out[(*n)++] = base[i];
    for (long it = 2000; it < last && *n < 62; it += 1000) out[(*n)++] = it;
    out[(*n)++] = last;
}

static void fmt_num(char *o, size_t n, double v, const char *f) {
    if (isnan(v)) snprintf(o, n, "-");
    else snprintf(o, n, f, v);
}

// The table as Markdown (it reads as plain text too). '*' marks values interpolated between logged iterations.
static void write_table(FILE *f, Series *runs, int nruns, const Series *ref, const long *iters, int ni, const RunStats *st) {
    fprintf(f, "| iteration |");
    if (ref) fprintf(f, " %s |", ref->name);
    for (int r = 0; r < nruns; r++) fprintf(f, ref ? " %s | delta %% |" : " %s |", runs[r].name);
    fprintf(f, "\n|---:|");
    for (int r = 0; r < nruns + (ref != NULL); r++) fprintf(f, ref && r ? "---:|---:|" : "---:|");
    fprintf(f, "\n");
    int interp = 0;
    for (int k = 0; k < ni; k++) {
        fprintf(f, "| %ld |", iters[k]);
        int ex;
        double b = NAN;
        char s[64];
        if (ref) {
            b = series_at(ref, report_loss_field(ref), iters[k], &ex);
            fmt_num(s, sizeof s, b, "%.4f");
            fprintf(f, " %s%s |", s, !isnan(b) && !ex ? "*" : "");
            interp |= !isnan(b) && !ex;
        }
        for (int r = 0; r < nruns; r++) {
            double a = series_at(&runs[r], report_loss_field(&runs[r]), iters[k], &ex);
            fmt_num(s, sizeof s, a, "%.4f");
            fprintf(f, " %s%s |", s, !isnan(a) && !ex ? "*" : "");
            interp |= !isnan(a) && !ex;
            if (ref) {
                fmt_num(s, sizeof s, (a - b) / b * 100, "%+.2f");
                fprintf(f, " %s |", s);
            }
        }
        fprintf(f, "\n");
    }
    if (interp) fprintf(f, "\n`*` interpolated between the nearest logged iterations.\n");
    fprintf(f, "\n| run | first crossover | mean ms/iter | tokens/s/GPU | wall time |\n|---|---|---:|---:|---:|\n");
    for (int r = -1; r < nruns; r++) {
        const Series *s = r < 0 ? ref : &runs[r];
        if (!s) continue;
        RunStats rs;
        if (r < 0) report_stats(ref, NULL, &rs);
        else rs = st[r];
        char cross[128] = "-", ms[32], tok[32], wall[32];
        if (r >= 0 && ref) {
            if (rs.first_cross >= 0) snprintf(cross, sizeof cross, "iteration %ld (goes %s)", rs.first_cross, rs.cross_below ? "below" : "above");
            else if (rs.cmp_lo >= 0) snprintf(cross, sizeof cross, "none in %ld-%ld", rs.cmp_lo, rs.cmp_hi);
            else snprintf(cross, sizeof cross, "no common iterations");
        }
        fmt_num(ms, sizeof ms, rs.mean_ms, "%.1f");
        fmt_num(tok, sizeof tok, rs.mean_tok_s_gpu, "%.1f");
        if (isnan(rs.wall_s)) snprintf(wall, sizeof wall, "-");
        else snprintf(wall, sizeof wall, "%.0f:%02.0f:%02.0f", floor(rs.wall_s / 3600), fmod(floor(rs.wall_s / 60), 60), fmod(floor(rs.wall_s), 60));
        fprintf(f, "| %s%s | %s | %s | %s | %s |\n", s->name, r < 0 ? " (reference)" : "", cross, ms, tok, wall);
    }
    for (int r = -1; r < nruns; r++) {
        const Series *s = r < 0 ? ref : &runs[r];
        if (s && s->loss_div != 1) fprintf(f, "\n%s: %s losses and grad norms divided by %g (FLA's loss scaling; --hf_loss_div).\n", s->name, s->kind, s->loss_div);
    }
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", *s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

static void json_report(FILE *f, Series *runs, int nruns, const Series *ref, const long *iters, int ni, const RunStats *st) {
    fprintf(f, "{\"gdn_version\": ");
    json_str(f, gdn_version);
    fprintf(f, ", \"reference\": ");
    if (ref) json_str(f, ref->name);
    else fprintf(f, "null");
    fprintf(f, ", \"runs\": [");
    for (int r = 0; r < nruns; r++) {
        const RunStats *s = &st[r];
        fprintf(f, "%s\n  {\"name\": ", r ? "," : "");
        json_str(f, runs[r].name);
        fprintf(f, ", \"kind\": \"%s\", \"first_crossover\": %ld, \"crosses_below\": %d, ", runs[r].kind, s->first_cross, s->cross_below);
        fprintf(f, "\"mean_ms_per_iter\": %.9g, \"tokens_per_s_per_gpu\": %.9g, \"wall_s\": %.9g, \"rows\": [",
                isnan(s->mean_ms) ? -1 : s->mean_ms, isnan(s->mean_tok_s_gpu) ? -1 : s->mean_tok_s_gpu, isnan(s->wall_s) ? -1 : s->wall_s);
        for (int k = 0; k < ni; k++) {
            int ex, exb = 0;
            double a = series_at(&runs[r], report_loss_field(&runs[r]), iters[k], &ex);
            double b = ref ? series_at(ref, report_loss_field(ref), iters[k], &exb) : NAN;
            double lr = series_at(&runs[r], offsetof(Point, lr), iters[k], &ex);
            fprintf(f, "%s{\"iteration\": %ld, \"loss\": %.9g, \"ref_loss\": %.9g, \"delta_pct\": %.9g, \"lr\": %.9g}", k ? ", " : "",
                    iters[k], isnan(a) ? -1 : a, isnan(b) ? -1 : b, isnan(a) || isnan(b) ? 0 : (a - b) / b * 100, isnan(lr) ? -1 : lr);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
}

// More points than the plot has pixels only slow the drawing (50k iterations: seconds) and draw a band of
// noise: above max points, each of max buckets becomes its mean point. Returns the new count (in place).
static size_t decimate(double *x, double *y, size_t m, size_t max) {
    if (m <= max) return m;
    for (size_t b = 0; b < max; b++) {
        size_t i0 = b * m / max, i1 = (b + 1) * m / max;
        double sx = 0, sy = 0;
        for (size_t i = i0; i < i1; i++) { sx += x[i]; sy += y[i]; }
        x[b] = sx / (double)(i1 - i0); y[b] = sy / (double)(i1 - i0);
    }
    return max;
}

static int write_plots(const char *dir, Series *all, int n, char *err, size_t errlen) {
    static const struct { const char *file, *title, *ylabel; size_t field; } P[] = {
        {"loss", "Training and validation loss", "loss", offsetof(Point, loss)},
        {"lr", "Learning rate", "learning rate", offsetof(Point, lr)},
        {"grad_norm", "Gradient norm (before clipping)", "grad norm", offsetof(Point, gnorm)},
        {"throughput", "Throughput", "tokens/s per GPU", offsetof(Point, tok_s_gpu)},
    };
    int rc = 0;
    for (int p = 0; p < 4 && !rc; p++) {
        PlotLine L[32];
        int nl = 0;
        double *bufs[32];
        char labels[32][300];
        for (int s = 0; s < n && nl < 30; s++) {
            for (int pass = 0; pass < 1 + (p == 0); pass++) { // the loss plot adds each run's validation points
                size_t field = pass ? offsetof(Point, valid) : P[p].field;
                double *x = xmalloc(2 * all[s].n * sizeof(double)), *y = x + all[s].n;
                size_t m = 0;
                for (size_t i = 0; i < all[s].n; i++) {
                    double v = *(const double *)((const char *)&all[s].p[i] + field);
                    if (isnan(v)) continue;
                    x[m] = (double)all[s].p[i].it; y[m++] = v;
                }
                if (!m) { free(x); continue; }
                m = decimate(x, y, m, 2000);
                memmove(x + m, y, m * sizeof(double)); // y right after the m x values
                snprintf(labels[nl], sizeof labels[nl], "%s%s", all[s].name, pass ? " (validation)" : "");
                bufs[nl] = x;
                L[nl] = (PlotLine){labels[nl], x, x + m, m, pass, pass, s};
                nl++;
            }
        }
        char base[1200];
        snprintf(base, sizeof base, "%s/%s", dir, P[p].file);
        rc = plot_write(base, P[p].title, "iteration", P[p].ylabel, L, nl, p == 0 || p == 2, err, errlen);
        for (int i = 0; i < nl; i++) free(bufs[i]);
    }
    return rc;
}

int report_build(const char *const *runs, int nruns, const char *ref, const char *outdir, const ReportOpts *o,
                 FILE *table_out, char *err, size_t errlen) {
    int n = nruns + (ref != NULL), rc = 0;
    Series *all = xcalloc((size_t)n, sizeof(Series)); // runs first, the reference last
    RunStats *st = xcalloc((size_t)nruns, sizeof(RunStats));
    for (int i = 0; i < n && !rc; i++) rc = series_load(&all[i], i < nruns ? runs[i] : ref, &o->load, err, errlen);
    Series *R = ref ? &all[nruns] : NULL;
    long iters[64];
    int ni = o->n_iters;
    if (!rc) {
        if (ni) memcpy(iters, o->iters, (size_t)ni * sizeof(long));
        else default_iters(&all[0], iters, &ni);
        for (int r = 0; r < nruns; r++) report_stats(&all[r], R, &st[r]);
        if (table_out) write_table(table_out, all, nruns, R, iters, ni, st);
    }
    if (!rc && outdir) {
        char path[1200];
        if (mkdir_p(outdir)) rc = set_err(err, errlen, "%s: cannot create the directory", outdir);
        Buf md = {0}, js = {0};
        FILE *f;
        if (!rc && (f = open_memstream(&md.p, &md.n))) { write_table(f, all, nruns, R, iters, ni, st); fclose(f); }
        if (!rc && (f = open_memstream(&js.p, &js.n))) { json_report(f, all, nruns, R, iters, ni, st); fclose(f); }
        snprintf(path, sizeof path, "%s/table.md", outdir);
        if (!rc) rc = write_file_atomic(path, md.p, md.n, err, errlen);
        snprintf(path, sizeof path, "%s/report.json", outdir);
        if (!rc) rc = write_file_atomic(path, js.p, js.n, err, errlen);
        char perr[ERR_LEN] = "";
        int plots = !rc && !write_plots(outdir, all, n, perr, sizeof perr);
        if (!rc && !plots && !o->quiet) fprintf(stderr, "gdn report: warning: %s\n", perr);
        if (!rc) rc = html_write(outdir, all, nruns, R, md.p, plots, o->live, err, errlen);
        free(md.p); free(js.p);
    }
    for (int i = 0; i < n; i++) series_free(&all[i]);
    free(all); free(st);
    return rc;
}
