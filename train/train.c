// train.c: `gdn train` — the training loop: data, AdamW with Megatron's schedule and clipping,
// Megatron-style log lines, a JSONL metrics file, checkpoints and exact resume.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "../data/indexed.h"
#include "../data/sampler.h"
#include "../io/checkpoint.h"
#include "../model/gdn.h"
#include "../util/common.h"
#include "dist.h"
#include "schedule.h"
#include "train.h"

// Megatron's transformer_flops basis (spec model.md §7 (a)): what Primus prints for the pure-GDN configs.
double flops_per_token_megatron(const Config *c) {
    double L = c->num_layers, h = c->hidden_size, s = c->seq_length, F = c->ffn_hidden_size, V = c->vocab_size;
    return 6 * L * (h * 3 * h + h * s / 2 * 2 + h * h) + 6 * L * h * F * 3 + 6 * h * V;
}
// A GDN-aware count (spec §7 (d)): the GEMMs and the delta rule as they are.
double flops_per_token_gdn(const Config *c) {
    ModelDims d = config_dims(c);
    double h = d.h, gdn = h * (2 * d.Kd + 2 * d.Vd + 2 * d.HV) + 4.0 * (2 * d.Kd + d.Vd) + 4.0 * d.HV * d.dv * d.dv +
                          h * d.Vd;
    return 6 * d.L * gdn + 6 * d.L * 3 * h * d.F + 6 * h * d.V;
}

int train_parse_config(Config *c, int *argc, char **argv) {
    char err[ERR_LEN];
    config_defaults(c);
    const char *path = arg_get(*argc, argv, "--config");
    if (path && config_load_yaml(c, path, err, sizeof err)) die("%s", err);
    if (config_apply_flags(c, argc, argv, err, sizeof err)) die("%s", err);
    // drop --config FILE, then anything left is unknown
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        if (!strcmp(argv[i], "--config")) { i++; continue; }
        if (!strncmp(argv[i], "--config=", 9)) continue;
        argv[out++] = argv[i];
    }
    *argc = out;
    return 0;
}

static void timestamp(char *out, size_t n) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    size_t k = strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + k, n - k, ".%06ld", (long)tv.tv_usec);
}

static void train_help(void) {
    printf("usage: gdn train [--config FILE.yaml] [--key value ...]\n\n"
           "Trains a GDN language model on a Megatron .bin/.idx dataset (train_data_path).\n"
           "Flags override the YAML; keys follow Primus/Megatron names. Checkpoints go to <save>/iter_N/;\n"
           "--load resumes exactly (weights, AdamW state, step, data position), --finetune takes weights only.\n\n");
    config_print_help(stdout);
}

// All samples of one optimizer step, every rank's: [world][n_micro][mbs][T] inputs and labels (each rank
// trains on its own [n_micro][mbs][T] block; all of them count the step's target tokens).
static void fetch_step(Sampler *s, const Config *c, int world, long step, int32_t *in, int32_t *lab) {
    int mbs = c->micro_batch_size, T = c->seq_length, n_micro = c->global_batch_size / (mbs * world);
    for (int r = 0; r < world; r++)
    for (int mu = 0; mu < n_micro; mu++)
        for (int j = 0; j < mbs; j++) {
            uint64_t g = sampler_position(s, (uint64_t)step, mu, r, j, mbs, world, c->global_batch_size);
            size_t o = (((size_t)r * n_micro + mu) * mbs + j) * T;
            sampler_get(s, g, in + o, lab + o);
            if (!strcmp(c->data_order, "fla")) // FLA's collator: labels equal to the pad (= EOS) token are ignored
                for (int t = 0; t < T; t++)
                    if (lab[o + t] == c->eos_token_id) lab[o + t] = -1;
            if (c->eod_mask_loss) // Megatron --eod-mask-loss: no loss where the input is EOD (the target after it)
                for (int t = 0; t < T; t++)
                    if (in[o + t] == c->eos_token_id) lab[o + t] = -1;
        }
}

int cmd_train(int argc, char **argv) {
    if (arg_is_help(argc, argv)) { train_help(); return 0; }
    Config c;
    train_parse_config(&c, &argc, argv);
    if (argc > 1) die("unknown argument '%s' (gdn train --help lists the keys)", argv[1]);
    char err[ERR_LEN];
    if (config_validate(&c, err, sizeof err)) die("%s", err);
    if (!c.train_data_path[0]) die("train_data_path is not set (a Megatron .bin/.idx prefix; see gdn prepare)");
    // data parallel: from here on this is one of nproc_per_node ranks (the launcher waits in dist_launch)
    Dist dist;
    dist_launch(&dist, c.nproc_per_node);
    const int W = dist.world, R = dist.rank, lead = R == 0;

    // ---- resume / finetune: model shape must match
    char iter_dir[1024] = "";
    if (c.load[0]) {
        if (ckpt_resolve(c.load, iter_dir, sizeof iter_dir, err, sizeof err)) die("--load %s: %s", c.load, err);
        Config saved;
        config_defaults(&saved);
        if (ckpt_read_config(iter_dir, &saved, err, sizeof err)) die("%s: %s", iter_dir, err);
        ModelDims a = config_dims(&c), b = config_dims(&saved);
        if (memcmp(&a, &b, sizeof a))
            die("%s: checkpoint model shape differs from the config (hidden %d/%d, blocks %d/%d, vocab %d/%d)", iter_dir,
                b.h, a.h, b.L, a.L, b.V, a.V);
    }
    const Backend *be = backend_select(c.device, c.precision);
    dist_init_backend(&dist, be);
    Model *m = model_create(&c, be, 1);
    size_t P = m->lay.total;
    float *host = xmalloc(P * sizeof(float));
    CkptState st = {0};
    if (iter_dir[0]) {
        float *hm = xmalloc(P * sizeof(float)), *hv = xmalloc(P * sizeof(float));
        int has_optim = 0;
        if (ckpt_load(iter_dir, &m->lay, host, hm, hv, &has_optim, &st, err, sizeof err)) die("%s: %s", iter_dir, err);
        if (c.finetune) memset(&st, 0, sizeof st);
        else {
            if (!has_optim) die("%s has no optimizer state: use --finetune to start from its weights", iter_dir);
            model_set_optim(m, hm, hv);
        }
        free(hm); free(hv);
    } else {
        params_init(&m->lay, host, (uint64_t)c.seed);
    }
    model_set_params(m, host);

    // ---- data
    IndexedDataset ds;
    if (indexed_open(&ds, c.train_data_path, err, sizeof err)) die("%s", err);
    uint64_t num_samples = (uint64_t)c.train_iters * c.global_batch_size;
    SampleOrder order = !strcmp(c.data_order, "fla") ? ORDER_FLA : ORDER_MEGATRON;
    Sampler *smp = sampler_open(&ds, order, c.seq_length, num_samples, (uint64_t)c.seed, err, sizeof err);
    if (!smp) die("%s: %s", c.train_data_path, err);

    // ---- output
    if (lead && c.save[0] && mkdir_p(c.save)) die("cannot create save directory %s", c.save);
    FILE *metrics = NULL;
    char mpath[1100];
    if (c.metrics_file[0]) snprintf(mpath, sizeof mpath, "%s", c.metrics_file);
    else if (c.save[0]) snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", c.save);
    else mpath[0] = 0;
    if (lead && mpath[0] && !(metrics = fopen(mpath, st.iteration ? "a" : "w"))) die("cannot open metrics file %s", mpath);

    char count[32];
    format_count(count, sizeof count, m->lay.total);
    int T = c.seq_length, mbs = c.micro_batch_size, n_micro = c.global_batch_size / (mbs * W);
    if (lead) {
        printf("gdn train: %s parameters (%d blocks, hidden %d, heads %d/%d, vocab %d), device %s%s, "
               "seq %d x micro-batch %d x %d micro-batches",
               count, m->d.L, m->d.h, m->d.H, m->d.HV, m->d.V, be->name, be->act_bytes == 2 ? " (bf16)" : " (fp32)", T,
               mbs, n_micro);
        if (W > 1) printf(" x %d data-parallel ranks (%s)", W, dist.nccl ? "NCCL" : "shared memory");
        printf("\n");
    }
    if (lead && iter_dir[0]) printf("gdn train: %s from %s at iteration %lld\n", c.finetune ? "finetuning" : "resuming", iter_dir, (long long)st.iteration);
    fflush(stdout);

    size_t ntok = (size_t)c.global_batch_size * T, rank_tok = ntok / W; // the step's tokens, this rank's share
    int32_t *in = xmalloc(ntok * sizeof(int32_t)), *lab = xmalloc(ntok * sizeof(int32_t));
    double flops_tok = flops_per_token_megatron(&c);
    double t_last = now_sec(), t_saving = 0, loss_acc = 0;
    int n_acc = 0;
    long it0 = st.iteration, last_logged = it0;
    for (long it = it0 + 1; it <= c.train_iters; it++) {
        double lr = lr_at(&c, it - 1);
        fetch_step(smp, &c, W, it - 1, in, lab);
        long valid = 0;
        for (size_t i = 0; i < ntok; i++) valid += lab[i] >= 0;
        if (valid == 0) die("iteration %ld: the global batch has no target tokens", it);
        model_zero_grads(m);
        double loss_sum = 0;
        for (int mu = 0; mu < n_micro; mu++) {
            size_t o = (size_t)R * rank_tok + (size_t)mu * mbs * T;
            model_fwd_bwd(m, in + o, lab + o, mbs, T, (float)(1.0 / valid), mu % 32);
            if (mu % 32 == 31 || mu == n_micro - 1) loss_sum += model_read_loss_slots(m, mu % 32 + 1);
        }
        // ranks: sum the loss sums and the gradients (each rank's are of its tokens' losses / all valid tokens)
        dist_allreduce_host(&dist, &loss_sum, 1);
        dist_allreduce_sum(&dist, m->grads, P);
        double loss = loss_sum / valid;
        double gnorm = model_grad_norm(m);
        if (!isfinite(loss)) die("iteration %ld: loss is %f; stopping without saving a checkpoint", it, loss);
        if (!isfinite(gnorm)) die("iteration %ld: gradient norm is %f (NaN/Inf in gradients); stopping without saving", it, gnorm);
        float gscale = 1.0f;
        if (c.clip_grad > 0) { // Megatron: clip_coeff = max_norm / (norm + 1e-6), applied when < 1
            double coeff = c.clip_grad / (gnorm + 1e-6);
            if (coeff < 1.0) gscale = (float)coeff;
        }
        model_adamw(m, (float)lr, (int)it, gscale);
        loss_acc += loss;
        n_acc++;
        if (metrics) {
            fprintf(metrics, "{\"iteration\": %ld, \"lm_loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"consumed_samples\": %lld}\n",
                    it, loss, lr, gnorm, (long long)it * c.global_batch_size);
            fflush(metrics);
        }
        if (lead && (it == it0 + 1 || it % c.log_interval == 0 || it == c.train_iters)) {
            be->sync();
            double t = now_sec(), ms = (t - t_last - t_saving) * 1e3 / (double)(it - last_logged);
            // per GPU, as Megatron prints them: this rank's share of the step
            double tok_s = (double)rank_tok / (ms / 1e3), tflops = flops_tok * (double)rank_tok / (ms / 1e3) / 1e12;
            char ts[64];
            timestamp(ts, sizeof ts);
            printf(" [%s] iteration %8ld/%8d | consumed samples: %12lld | elapsed time per iteration (ms): %.1f | "
                   "throughput per GPU (TFLOP/s/GPU): %.1f | tokens per GPU (tokens/s/GPU): %.1f | learning rate: %.6E | "
                   "global batch size: %5d | lm loss: %.6E | loss scale: 1.0 | grad norm: %.3f | "
                   "number of skipped iterations:   0 | number of nan iterations:   0 |\n",
                   ts, it, c.train_iters, (long long)it * c.global_batch_size, ms, tflops, tok_s, lr_at(&c, it),
                   c.global_batch_size, loss_acc / n_acc, gnorm);
            fflush(stdout);
            if (metrics) {
                fprintf(metrics, "{\"iteration\": %ld, \"log\": true, \"ms_per_iter\": %.3f, \"tokens_per_s\": %.1f, \"tflops_megatron\": %.3f, \"tflops_gdn\": %.3f, \"lm_loss_avg\": %.9g}\n",
                        it, ms, tok_s, tflops, flops_per_token_gdn(&c) * (double)rank_tok / (ms / 1e3) / 1e12, loss_acc / n_acc);
                fflush(metrics);
            }
            loss_acc = 0; n_acc = 0;
            t_last = now_sec();
            t_saving = 0;
            last_logged = it;
        }
        int exit_now = c.exit_interval > 0 && it % c.exit_interval == 0 && it < c.train_iters;
        int save_now = c.save[0] && ((c.save_interval > 0 && it % c.save_interval == 0) || it == c.train_iters || exit_now);
        if (save_now && !lead && W > 1) { // the replicas must still be identical: rank 0 writes for all
            double t_save0 = now_sec();
            model_get_params(m, host);
            dist_check_same(&dist, hash_bytes(host, P * sizeof(float)), "the weights");
            t_saving += now_sec() - t_save0;
        }
        if (save_now && lead) {
            double t_save0 = now_sec(); // checkpoint time is not step time
            float *hm = xmalloc(P * sizeof(float)), *hv = xmalloc(P * sizeof(float));
            model_get_params(m, host);
            dist_check_same(&dist, hash_bytes(host, P * sizeof(float)), "the weights");
            model_get_optim(m, hm, hv);
            CkptState s2 = st;
            s2.iteration = it;
            s2.consumed_samples = (int64_t)it * c.global_batch_size;
            if (ckpt_save(c.save, &c, &m->lay, host, hm, hv, &s2, err, sizeof err)) die("saving checkpoint: %s", err);
            printf("gdn train: saved checkpoint %s/iter_%07ld\n", c.save, it);
            fflush(stdout);
            free(hm); free(hv);
            t_saving += now_sec() - t_save0;
        }
        if (exit_now) {
            if (lead) printf("gdn train: exit_interval reached at iteration %ld\n", it);
            break;
        }
    }
    dist_finish(&dist);
    if (metrics) fclose(metrics);
    free(in); free(lab); free(host);
    sampler_free(smp);
    indexed_close(&ds);
    model_free(m);
    return 0;
}
