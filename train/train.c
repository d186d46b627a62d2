// train.c: `gdn train` — the training loop: data, AdamW with Megatron's schedule and clipping,
// Megatron-style log lines, a JSONL metrics file, checkpoints and exact resume.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../data/blend.h"
#include "../data/sampler.h"
#include "../io/checkpoint.h"
#include "../model/gdn.h"
#include "../util/common.h"
#include "../util/version.h"
#include "dist.h"
#include "buckets.h"
#include "restart.h"
#include "runlog.h"
#include "schedule.h"
#include "signals.h"
#include "zero.h"
#include "train.h"
#include "validate.h"

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
    for (int i = 1, seen = 0; i < *argc; i++) // one file: a second one would silently lose the first's keys
        if (!strcmp(argv[i], "--config") || !strncmp(argv[i], "--config=", 9))
            if (seen++) die("--config given twice ('%s' and '%s'): give one YAML file, and flags for the keys to change",
                            path, argv[i][8] == '=' ? argv[i] + 9 : (i + 1 < *argc ? argv[i + 1] : ""));
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

static void train_help(void) {
    printf("usage: gdn train [--config FILE.yaml] [--key value ...]\n\n"
           "Trains a GDN language model on a Megatron .bin/.idx dataset (train_data_path).\n"
           "Flags override the YAML; keys follow Primus/Megatron names. Checkpoints go to <save>/iter_N/;\n"
           "--load resumes exactly (weights, AdamW state, step, data position), --finetune takes weights only.\n\n");
    config_print_help(stdout);
}

// All samples of one optimizer step, every rank's: [world][n_micro][mbs][T] inputs and labels (each rank
// trains on its own [n_micro][mbs][T] block; all of them count the step's target tokens).
static void fetch_step(Datasets *d, const Config *c, int world, long step, int32_t *in, int32_t *lab) {
    int mbs = c->micro_batch_size, T = c->seq_length, n_micro = c->global_batch_size / (mbs * world);
    for (int r = 0; r < world; r++)
    for (int mu = 0; mu < n_micro; mu++)
        for (int j = 0; j < mbs; j++) {
            uint64_t g = sampler_position(NULL, (uint64_t)step, mu, r, j, mbs, world, c->global_batch_size);
            size_t o = (((size_t)r * n_micro + mu) * mbs + j) * T;
            datasets_get(d, SPLIT_TRAIN, g, in + o, lab + o);
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
    if (!c.train_data_path[0] && !c.data_path[0]) die("train_data_path is not set (a Megatron .bin/.idx prefix; see gdn prepare)");
    stop_prepare(&c); // issue 18: graceful stops (the start time, before the ranks fork)
    // data parallel: from here on this is one of nproc_per_node ranks (the launcher waits in dist_launch)
    Dist dist;
    dist_launch(&dist, c.nproc_per_node, c.distributed_timeout_minutes);
    stop_install(&c);
    const int W = dist.world, R = dist.rank, lead = R == 0;
    if (c.global_batch_size % ((long)c.micro_batch_size * W))
        die("global_batch_size (%d) must be a multiple of micro_batch_size (%d) x %d data-parallel ranks",
            c.global_batch_size, c.micro_batch_size, W);

    // ---- resume / finetune: model shape must match
    char iter_dir[1024] = "";
    int loading = restart_have_checkpoint(&c, lead); // --load DIR without a checkpoint: start from random
    restart_check_save(&c, loading);
    if (loading) {
        if (ckpt_resolve(c.load, iter_dir, sizeof iter_dir, err, sizeof err)) die("--load %s: %s", c.load, err);
        Config saved;
        config_defaults(&saved);
        if (ckpt_read_config(iter_dir, &saved, err, sizeof err)) die("%s: %s", iter_dir, err);
        ModelDims a = config_dims(&c), b = config_dims(&saved);
        if (memcmp(&a, &b, sizeof a))
            die("%s: checkpoint model shape differs from the config (hidden %d/%d, blocks %d/%d, vocab %d/%d)", iter_dir,
                b.h, a.h, b.L, a.L, b.V, a.V);
    }
    const Backend *be = backend_with_delta_rule(backend_select(c.device, c.precision), c.delta_rule);
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
    // issue 19: buckets for the bucketed (and overlapped) gradient all-reduce, or ZeRO-1's buckets (one of
    // everything unless cut), each sharded across the ranks: the moments just loaded (or zero) go to shards
    const int zero1 = c.use_distributed_optimizer && W > 1;
    const int bucketed = W > 1 && (c.ddp_bucket_size > 0 || c.overlap_grad_reduce);
    Buckets bk = {0};
    Zero zero = {0};
    if (bucketed || zero1) buckets_init(&bk, m, &dist, c.ddp_bucket_size, c.overlap_grad_reduce, zero1 && c.overlap_param_gather);
    if (zero1) zero_init(&zero, m, &bk, &dist);
    if (bucketed || (zero1 && c.overlap_param_gather)) buckets_describe(&bk);

    // ---- data: the train/valid/test sets of the blend and split (data/blend.c)
    Datasets *data = datasets_open(&c, err, sizeof err);
    if (!data) die("%s", err);
    // Megatron's fallback for checkpoints without the counter: every evaluation so far read fresh samples
    uint64_t consumed_valid = st.consumed_valid_samples >= 0 ? (uint64_t)st.consumed_valid_samples
                              : c.eval_interval > 0 ? (uint64_t)(st.iteration / c.eval_interval) * c.eval_iters * c.global_batch_size : 0;

    // ---- output
    if (lead && c.save[0] && mkdir_p(c.save)) die("cannot create save directory %s", c.save);
    // run monitoring: log line, metrics JSONL, TensorBoard, report page, summary (lead rank only)
    RunLog *rl = lead ? runlog_open(&c, (long)st.iteration, W, strcmp(be->name, "cpu") != 0, flops_per_token_megatron(&c),
                                    flops_per_token_gdn(&c))
                      : NULL;

    char count[32];
    format_count(count, sizeof count, m->lay.total);
    int T = c.seq_length, mbs = c.micro_batch_size, n_micro = c.global_batch_size / (mbs * W);
    if (lead) {
        printf("gdn train (gdn %s): %s parameters (%d blocks, hidden %d, heads %d/%d, vocab %d), device %s%s, "
               "seq %d x micro-batch %d x %d micro-batches",
               gdn_version, count, m->d.L, m->d.h, m->d.H, m->d.HV, m->d.V, be->name, be->act_bytes == 2 ? " (bf16)" : " (fp32)", T,
               mbs, n_micro);
        if (W > 1) printf(" x %d data-parallel ranks (%s%s)", W, dist.nccl ? "NCCL" : dist.gloo ? "Gloo" : "shared memory",
                          zero1 ? ", ZeRO-1" : "");
        printf("\n");
    }
    if (lead && c.use_precision_aware_optimizer && !zero1)
        printf("gdn train: precision-aware optimizer: exp_avg %s, exp_avg_sq %s, fp32 masters %s: %.0f bytes per "
               "parameter for weights, gradients and AdamW state\n", c.exp_avg_dtype, c.exp_avg_sq_dtype,
               m->adam_rem ? "as the bf16 weights + 16-bit remainders" : "whole", model_state_bytes_per_param(m));
    if (lead && (c.data_path[0] || c.valid_data_path[0] || c.test_data_path[0] || strchr(c.train_data_path, ' '))) datasets_describe(data, stdout);
    if (lead && iter_dir[0]) printf("gdn train: %s from %s at iteration %lld\n", c.finetune ? "finetuning" : "resuming", iter_dir, (long long)st.iteration);
    fflush(stdout);

    size_t ntok = (size_t)c.global_batch_size * T, rank_tok = ntok / W; // the step's tokens, this rank's share
    int32_t *in = xmalloc(ntok * sizeof(int32_t)), *lab = xmalloc(ntok * sizeof(int32_t));
    double t_last = now_sec(), t_saving = 0, loss_acc = 0;
    int n_acc = 0;
    long it0 = st.iteration, last_logged = it0, it_done = it0;
    int stopped = 0;
    for (long it = it0 + 1; it <= c.train_iters; it++) {
        double lr = lr_at(&c, it - 1);
        fetch_step(data, &c, W, it - 1, in, lab);
        long valid = 0;
        for (size_t i = 0; i < ntok; i++) valid += lab[i] >= 0;
        if (valid == 0) die("iteration %ld: the global batch has no target tokens", it);
        model_zero_grads(m);
        double loss_sum = 0;
        for (int mu = 0; mu < n_micro; mu++) {
            size_t o = (size_t)R * rank_tok + (size_t)mu * mbs * T;
            if ((bucketed || zero1) && mu == n_micro - 1) buckets_arm(&bk); // the last micro-batch makes the grads final
            model_fwd_bwd(m, in + o, lab + o, mbs, T, (float)(1.0 / valid), mu % 32);
            if (mu % 32 == 31 || mu == n_micro - 1) loss_sum += model_read_loss_slots(m, mu % 32 + 1);
        }
        // ranks: sum the loss sums and the gradients (each rank's are of its tokens' losses / all valid tokens)
        be->sync();
        double t_comm0 = now_sec(); // the step's collectives left after the backward (the sync above)
        if (bucketed || zero1) buckets_finish(&bk); // first: the communication thread is done before anything else talks
        dist_allreduce_host(&dist, &loss_sum, 1);
        double gnorm;
        if (zero1) gnorm = zero_grad_norm(&zero, m, &dist);
        else {
            if (!bucketed) dist_allreduce_sum(&dist, m->grads, P);
            model_clip_grads(m, c.clip_grad); // the norm and Megatron's clip scale on the backend, for model_adamw
            gnorm = model_read_grad_norm(m);  // for the log and the NaN check before the update
        }
        // the stop check's collective here, not after the step: ZeRO-1's all-gather may still be in flight then
        int stop = it < c.train_iters ? stop_check(&dist, &c) : STOP_NONE;
        double comm_ms = (now_sec() - t_comm0) * 1e3 + (zero1 ? buckets_take_wait_ms(&bk) : 0);
        double loss = loss_sum / valid;
        if (!isfinite(loss)) die("iteration %ld: loss is %f; stopping without saving a checkpoint", it, loss);
        if (!isfinite(gnorm)) die("iteration %ld: gradient norm is %f (NaN/Inf in gradients); stopping without saving", it, gnorm);
        if (zero1) { // its all-gather after the step (what of it is not overlapped) counts as collective time
            float gscale = 1.0f;
            if (c.clip_grad > 0) { // Megatron: clip_coeff = max_norm / (norm + 1e-6), applied when < 1 (as clip_scale)
                double coeff = c.clip_grad / (gnorm + 1e-6);
                if (coeff < 1.0) gscale = (float)coeff;
            }
            zero_step(&zero, m, &dist, (float)lr, (int)it, gscale);
            comm_ms += buckets_take_wait_ms(&bk);
        } else model_adamw(m, (float)lr, (int)it);
        loss_acc += loss;
        n_acc++;
        runlog_step(rl, it, loss, lr, gnorm, W > 1 ? comm_ms : -1);
        if (rl && c.log_memory_to_tensorboard) {
            BackendMemStats mem;
            be->mem_stats(&mem);
            runlog_memory(rl, it, &mem);
        }
        it_done = it;
        if (lead && (it == it0 + 1 || it % c.log_interval == 0 || it == c.train_iters)) {
            be->sync();
            double t = now_sec(), ms = (t - t_last - t_saving) * 1e3 / (double)(it - last_logged);
            runlog_interval(rl, it, ms, loss_acc / n_acc, lr, gnorm); // lr: the rate this step used
            loss_acc = 0; n_acc = 0;
            t_last = now_sec();
            t_saving = 0;
            last_logged = it;
        }
        // issue 18: validation at eval_interval (its time is not step time), then the stop checks
        t_saving += validate_interval(m, &dist, &c, data, it, &consumed_valid, rl, lead);
        int exit_now = stop || (c.exit_interval > 0 && it % c.exit_interval == 0 && it < c.train_iters);
        int save_now = c.save[0] && ((c.save_interval > 0 && it % c.save_interval == 0) || it == c.train_iters || exit_now);
        if (save_now && zero1) buckets_gather_wait(&bk); // the whole weights, and nobody else talking
        if (save_now && !lead && W > 1) { // the replicas must still be identical: rank 0 writes for all
            double t_save0 = now_sec();
            if (zero1) zero_get_params(&zero, m, &dist, host); // sharded masters: gathered
            else model_get_params(m, host);
            dist_check_same(&dist, hash_bytes(host, P * sizeof(float)), "the weights");
            if (zero1) { // the shards of the moments go to every rank (rank 0 writes them)
                float *hm = xmalloc(P * sizeof(float)), *hv = xmalloc(P * sizeof(float));
                zero_get_optim(&zero, m, &dist, hm, hv);
                free(hm); free(hv);
            }
            t_saving += now_sec() - t_save0;
        }
        if (save_now && lead) {
            double t_save0 = now_sec(); // checkpoint time is not step time
            float *hm = xmalloc(P * sizeof(float)), *hv = xmalloc(P * sizeof(float));
            if (zero1) zero_get_params(&zero, m, &dist, host); // sharded masters: gathered
            else model_get_params(m, host);
            dist_check_same(&dist, hash_bytes(host, P * sizeof(float)), "the weights");
            if (zero1) zero_get_optim(&zero, m, &dist, hm, hv); // whole, in model order: any world size resumes
            else model_get_optim(m, hm, hv);
            CkptState s2 = st;
            s2.iteration = it;
            s2.consumed_samples = (int64_t)it * c.global_batch_size;
            s2.consumed_valid_samples = (int64_t)consumed_valid;
            if (ckpt_save(c.save, &c, &m->lay, host, hm, hv, &s2, err, sizeof err)) die("saving checkpoint: %s", err);
            printf("gdn train: saved checkpoint %s/iter_%07ld\n", c.save, it);
            char ck[1100];
            snprintf(ck, sizeof ck, "%s/iter_%07ld", c.save, it);
            runlog_checkpoint(rl, ck);
            fflush(stdout);
            free(hm); free(hv);
            t_saving += now_sec() - t_save0;
        }
        if (exit_now) {
            if (lead && stop == STOP_SIGNAL) printf("gdn train: exiting program after receiving signal %d (%s) at iteration %ld\n", stop_signal(), stop_signal() == 2 ? "SIGINT" : "SIGTERM", it);
            else if (lead && stop == STOP_DURATION) printf("gdn train: exiting program after %.2f minutes (exit_duration_in_mins %g) at iteration %ld\n", stop_minutes(), c.exit_duration_in_mins, it);
            else if (lead) printf("gdn train: exit_interval reached at iteration %ld\n", it);
            fflush(stdout);
            stopped = 1;
            break;
        }
    }
    if (zero1) buckets_gather_wait(&bk);
    if (!stopped && it0 < c.train_iters) validate_at_end(m, &dist, &c, data, &consumed_valid, rl, lead);
    dist_finish(&dist);
    if (zero1) zero_free(&zero, m);
    if (bucketed || zero1) buckets_free(&bk);
    runlog_close(rl, it_done);
    free(in); free(lab); free(host);
    datasets_free(data);
    model_free(m);
    return 0;
}
