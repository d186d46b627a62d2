// generate.c: `gdn generate` — prefill the prompt with the chunked forward, then decode one token at a
// time carrying only the recurrent state (conv windows + delta-rule states): memory does not grow with
// the length generated.
#include <stdlib.h>
#include <string.h>

#include "../util/args.h"
#include "../util/common.h"
#include "infer.h"

static void help(void) {
    printf("usage: gdn generate --load MODEL --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K]\n"
           "                    [--top-p P] [--repetition-penalty R] [--seed S] [--greedy] [--batch B]\n"
           "                    [--tokenizer PATH] [--device cpu|cuda|auto] [--no-bos] [--quiet] [--skip-special]\n"
           "Streams the continuation of TEXT to stdout; prefill and decode speed and the state size go to stderr.\n"
           "Special tokens are shown (--skip-special hides them).\n"
           "--batch B decodes B copies of the prompt at once (throughput measurement; the first is printed).\n"
           "Greedy decoding queues its steps 16 at a time and reads their tokens together (GDN_DECODE_GROUP=N: N at a\n"
           "time, 1 to 64; GDN_NO_GRAPH=1: no recorded graphs).\n");
}

int cmd_generate(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) { help(); return argc < 2 ? 2 : 0; }
    static const ArgSpec spec[] = {
        INFER_ARGS,
        {"--prompt", ARG_STR, 0, 0},
        {"--max-new-tokens", ARG_INT, 0, 1 << 20},
        {"--temperature", ARG_NUM, 0, 1e6},
        {"--top-k", ARG_INT, 0, 1 << 26},
        {"--top-p", ARG_NUM, 1e-9, 1},
        {"--repetition-penalty", ARG_NUM, 1e-6, 1e6},
        {"--batch", ARG_INT, 1, 1024},
        {"--seed", ARG_INT, 0, 9007199254740991.0},
        {"--greedy", ARG_FLAG, 0, 0},
        {"--no-bos", ARG_FLAG, 0, 0},
        {"--quiet", ARG_FLAG, 0, 0},
        {"--skip-special", ARG_FLAG, 0, 0},
    };
    Args a;
    args_parse(&a, "generate", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    const char *prompt = args_str(&a, "--prompt", NULL);
    if (!prompt) die("generate: --prompt TEXT is required");
    if (!prompt[0]) die("generate: the prompt is empty");
    SamplerCfg sc = {1.0f, 1.0f, 1.0f, 0, 0, 0};
    int max_new = (int)args_int(&a, "--max-new-tokens", 64), B = (int)args_int(&a, "--batch", 1);
    int quiet = args_flag(&a, "--quiet");
    // Special tokens are shown (as HF's decode does by default): a model that emits only <|begin_of_text|>
    // would otherwise print nothing at all.
    int skip_special = args_flag(&a, "--skip-special");
    sc.temperature = (float)args_num(&a, "--temperature", 1.0);
    sc.top_k = (int)args_int(&a, "--top-k", 0);
    sc.top_p = (float)args_num(&a, "--top-p", 1.0);
    sc.repetition_penalty = (float)args_num(&a, "--repetition-penalty", 1.0);
    uint64_t rng = (uint64_t)args_int(&a, "--seed", 1234);
    sc.greedy = args_flag(&a, "--greedy");
    InferModel im;
    infer_open(&im, argc, argv);
    Model *m = im.m;
    int32_t *ids = NULL;
    size_t cap = 0;
    size_t n = tok_encode(im.tok, prompt, strlen(prompt), !args_flag(&a, "--no-bos"), &ids, &cap);
    if (n == 0) die("generate: the prompt encodes to no tokens");
    if (n > 65536) die("generate: the prompt is %zu tokens; the limit is 65536", n);
    int V = m->d.V, total = (int)n + max_new;
    int32_t *seq = xmalloc((size_t)total * sizeof(int32_t)), *batch = xmalloc((size_t)B * n * sizeof(int32_t));
    memcpy(seq, ids, n * sizeof(int32_t));
    for (int b = 0; b < B; b++) memcpy(batch + (size_t)b * n, ids, n * sizeof(int32_t));
    float *logits = xmalloc((size_t)B * V * sizeof(float));
    InferState *st = infer_state_new(m, B);
    double t0 = now_sec();
    model_forward_state(m, batch, B, (int)n, st);
    for (int b = 0; b < B; b++) model_logits(m, b * (int)n + (int)n - 1, 1, logits + (size_t)b * V);
    double t_prefill = now_sec() - t0;
    if (!quiet) { fputs(prompt, stdout); fflush(stdout); }
    // Greedy without a repetition penalty picks on the device: only the B chosen ids come back per step.
    int device_greedy = (sc.greedy || sc.temperature <= 0) && sc.repetition_penalty == 1.0f;
    size_t print_from = n; // streaming: seq[print_from..] is not printed yet
    int32_t *next = xmalloc((size_t)B * sizeof(int32_t));
    // Device greedy: steps are queued group_steps (16) at a time, recorded together as one graph, and their tokens read
    // back together (each step takes the previous argmax on the device), so the GPU does not idle for a host round
    // trip, nor for a graph launch, after every step. At an EOS (batch 1) the rest of its group was computed for
    // nothing. The first two steps run alone (the direct run, then the one recorded as a graph; a last group
    // shorter than group_steps replays that one) and the steady state is timed from the third.
    // GDN_DECODE_GROUP=N sets the group (1: a read after every step, as before; at most DECODE_RING)
    const char *ge = getenv("GDN_DECODE_GROUP");
    const int group_steps = ge && atoi(ge) >= 1 ? (atoi(ge) < DECODE_RING ? atoi(ge) : DECODE_RING) : 16;
    int32_t *group = xmalloc((size_t)group_steps * B * sizeof(int32_t));
    t0 = now_sec();
    double t_steady = 0;
    int produced = 0, launched = 0, steady_from = -1; // steps launched; launched when the steady timing started
    for (int i = 0, have = 0, used = 0; i < max_new; i++) { // `next` becomes token i (position n + i)
        if (i == 0 || !device_greedy) {
            if (i == 2) { m->be->sync(); t_steady = now_sec(); steady_from = launched; }
            for (int b = 0; b < B; b++) {
                uint64_t r = rng + (uint64_t)b * 0x9e3779b97f4a7c15ull;
                next[b] = sample_next(logits + (size_t)b * V, V, &sc, seq, (int)n + i, &r);
                if (b == 0) rng = r;
            }
        } else { // device greedy: token i is step i - 1's argmax
            if (used == have) {
                if (launched == 2 && steady_from < 0) { m->be->sync(); t_steady = now_sec(); steady_from = launched; }
                int g = launched < 2 ? 1 : max_new - i < group_steps ? max_new - i : group_steps;
                if (launched >= 2 && g == group_steps) { // a full group: one graph of g steps (no gaps between them)
                    model_decode_launch_n(m, st, g);
                    launched += g;
                } else {
                    for (int k = 0; k < g; k++, launched++) model_decode_launch(m, st, launched == 0 ? next : NULL);
                }
                model_decode_read(m, st, group, g);
                have = g, used = 0;
            }
            memcpy(next, group + (size_t)used++ * B, (size_t)B * sizeof(int32_t));
        }
        seq[n + i] = next[0];
        produced++;
        if (!quiet) { // stream what decodes cleanly so far (a partial UTF-8 tail waits for its next token)
            size_t len;
            char *txt = tok_decode(im.tok, seq + print_from, n + i + 1 - print_from, skip_special, &len);
            int partial = len >= 3 && !memcmp(txt + len - 3, "\xef\xbf\xbd", 3);
            if (!partial) {
                fwrite(txt, 1, len, stdout);
                fflush(stdout);
                print_from = n + i + 1;
            }
            free(txt);
        }
        if (next[0] == tok_eos_id(im.tok) && B == 1) break;
        if (!device_greedy && i + 1 < max_new) { // sampling on the host: the step's logits come back every step
            model_decode_step(m, st, next, NULL, logits);
            launched++;
        }
    }
    m->be->sync();
    double t_end = now_sec(), t_decode = t_end - t0;
    int steps = launched; // the first token comes from the prefill's logits
    char steady[160] = "";
    if (steady_from >= 0 && launched - steady_from >= 3)
        snprintf(steady, sizeof steady, "; steady state %.1f tokens/s, %.3f ms/step",
                 (launched - steady_from) * B / (t_end - t_steady), (t_end - t_steady) * 1e3 / (launched - steady_from));
    if (!quiet && print_from < n + (size_t)produced) { // a tail that never completed its UTF-8 sequence
        size_t len;
        char *txt = tok_decode(im.tok, seq + print_from, n + produced - print_from, skip_special, &len);
        fwrite(txt, 1, len, stdout);
        free(txt);
    }
    if (!quiet) printf("\n");
    fflush(stdout);
    if (produced) { // say so when the continuation has no text at all (only special tokens)
        size_t len;
        char *txt = tok_decode(im.tok, seq + n, (size_t)produced, 1, &len);
        if (len == 0)
            fprintf(stderr, "generate: all %d generated token%s special (first id %d)%s; an untrained or tiny model "
                            "often does this: try more training or sampling (--temperature 0.8 --top-k 40)\n",
                    produced, produced == 1 ? " is" : "s are", (int)seq[n], skip_special ? ", hidden by --skip-special" : "");
        free(txt);
    }
    size_t state_bytes = (size_t)(m->d.L - m->d.n_attn) * B *
                         (((size_t)2 * m->d.Kd + m->d.Vd) * (m->d.K - 1) + (size_t)m->d.HV * m->d.dk * m->d.dv) * 4;
    // hybrids: the attention blocks' KV caches grow with the tokens seen (spec hybrid.md §3.3)
    int seen = 0; // tokens in the KV caches (every attention block holds the same count)
    for (int l = 0; l < m->d.L; l++)
        if (m->d.kind[l] == LAYER_ATTN) seen = st->layer[l].attn.len;
    size_t kv_bytes = (size_t)m->d.n_attn * B * (size_t)seen * 2 * m->d.Dkv * m->be->act_bytes;
    char kv[96] = ", constant in length";
    if (m->d.n_attn) snprintf(kv, sizeof kv, " + KV cache %.2f MiB at %d tokens", kv_bytes / 1048576.0, seen);
    fprintf(stderr, "generate: prefill %zu tokens x %d in %.1f ms (%.0f tokens/s); decode %d steps x %d in %.1f ms "
                    "(%.1f tokens/s, %.3f ms/step%s); recurrent state %.2f MiB%s\n",
            n, B, t_prefill * 1e3, n * B / t_prefill, steps, B, t_decode * 1e3, steps * B / t_decode,
            t_decode * 1e3 / (steps ? steps : 1), steady, state_bytes / 1048576.0, kv);
    infer_state_free(m, st);
    free(ids); free(seq); free(batch); free(logits); free(next); free(group);
    infer_close(&im);
    return 0;
}
