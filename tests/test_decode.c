// test_decode.c: recurrent decoding. Prefilling a prefix with the chunked forward and then decoding
// token by token (T = 1, carrying only the conv windows and delta-rule states) gives the full-sequence
// forward's logits at every position, to <= 1e-5 relative, for sequences shorter and longer than 64,
// for B = 1 and B = 2; and the state is constant-size. Hybrids (hybrid.md §3): with attention blocks the
// state adds a KV cache per attention block; decoding N tokens after a prefill equals the last N positions
// of the full forward, with and without a sliding window, past the cache's first growth (256 rows); with a window
// the cache is a ring of O(w) rows that wraps.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/gdn.h"
#include "../util/common.h"

static int32_t argmax_logit_ref(const float *l, int V) { // ties: the lowest id
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (l[v] > l[best]) best = v;
    return best;
}

// hybrid < 0: pure GDN; else 3 blocks, the middle one attention (3 q heads, 1 kv head) with window `hybrid`
static void small_config(Config *c, int hybrid) {
    config_defaults(c);
    c->hidden_size = 48; c->num_layers = 4; c->num_heads = 2; c->num_v_heads = 4; c->head_dim = 16; c->v_head_dim = 16;
    c->ffn_hidden_size = 96; c->vocab_size = 300; c->init_std = 0.2f;
    if (hybrid >= 0) {
        c->num_layers = 6;
        snprintf(c->attn_layers, sizeof c->attn_layers, "1");
        c->attn_num_heads = 3; c->attn_num_kv_heads = 1; c->attn_window_size = hybrid;
    }
}

// eod >= 0 (pure GDN): reset_state_at_eod with that EOD id, placed in the ids so that documents start inside the
// prefill, right after it (its last token EOD) and inside the decoded part; the full forward is then the
// training forward over packed documents (doc_starts), which decoding must reproduce.
static int check(int B, int T, int prefill, int hybrid, int eod) {
    Config c;
    small_config(&c, hybrid);
    if (eod >= 0) c.reset_state_at_eod = 1, c.eos_token_id = eod;
    Model *m = model_create(&c, backend_cpu(), 0);
    float *params = xmalloc(m->lay.total * 4);
    params_init(&m->lay, params, 5);
    model_set_params(m, params);
    int V = c.vocab_size;
    int32_t *ids = xmalloc((size_t)B * T * 4);
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7919 + 13) % V;
    if (eod >= 0) {
        for (int i = 0; i < B * T; i++)
            if (ids[i] == eod) ids[i] = (eod + 1) % V; // EODs only where placed
        const int at[] = {prefill / 2, prefill - 1, prefill + 3, prefill + 4, T - 2};
        for (int b = 0; b < B; b++)
            for (int j = b; j < 5; j++) // sequence 1 without the EOD at prefill / 2
                if (at[j] >= 0 && at[j] < T) ids[(size_t)b * T + at[j]] = eod;
    }
    float *full = xmalloc((size_t)B * T * V * 4), *step = xmalloc((size_t)B * V * 4);
    model_forward(m, ids, B, T);
    model_logits(m, 0, B * T, full);
    InferState *st = infer_state_new(m, B);
    int32_t *chunk = xmalloc((size_t)B * T * 4);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < (size_t)B * T * V; i++) scale = fmax(scale, fabs(full[i]));
    // prefill positions [0, prefill) in one chunked call, then one token at a time
    if (prefill > 0) {
        for (int b = 0; b < B; b++) memcpy(chunk + (size_t)b * prefill, ids + (size_t)b * T, (size_t)prefill * 4);
        model_forward_state(m, chunk, B, prefill, st);
        float *pl = xmalloc((size_t)B * prefill * V * 4);
        model_logits(m, 0, B * prefill, pl);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < prefill; t++)
                for (int v = 0; v < V; v++)
                    worst = fmax(worst, fabs(pl[((size_t)b * prefill + t) * V + v] - full[((size_t)b * T + t) * V + v]));
        free(pl);
    }
    for (int t = prefill; t < T; t++) {
        int32_t tok[8];
        for (int b = 0; b < B; b++) tok[b] = ids[(size_t)b * T + t];
        model_forward_state(m, tok, B, 1, st);
        model_logits(m, 0, B, step);
        for (int b = 0; b < B; b++)
            for (int v = 0; v < V; v++)
                worst = fmax(worst, fabs(step[(size_t)b * V + v] - full[((size_t)b * T + t) * V + v]));
    }
    double rel = worst / scale;
    int ok = rel <= 1e-5;
    // a window keeps the KV cache a ring of O(w) rows: the first power-of-two multiple of 256 >= w - 1 + the
    // longest chunk; without one it holds every position
    int cap_want = 256, longest = prefill > 1 ? prefill : 1, seen = T;
    while (cap_want < (hybrid > 0 ? hybrid - 1 + longest : seen)) cap_want *= 2;
    int cap = hybrid >= 0 ? st->layer[1].attn.cap : cap_want;
    if (cap != cap_want) ok = 0;
    printf("%s %s%s B=%d T=%d prefill=%d: max |decode - full| / max|full| = %.2e (tol 1e-5)%s\n", ok ? "ok  " : "FAIL",
           hybrid < 0 ? "gdn" : hybrid ? "hybrid, window" : "hybrid, full causal",
           eod >= 0 ? " packed documents (reset_state_at_eod)" : "", B, T, prefill, rel,
           hybrid >= 0 ? (cap == cap_want ? ", KV cache rows as expected" : ", KV cache rows NOT as expected") : "");
    infer_state_free(m, st);
    model_free(m);
    free(params); free(ids); free(full); free(step); free(chunk);
    return ok ? 0 : 1;
}

// model_decode_step (the decode path generate and verify use): its logits equal model_forward_state's with
// T = 1 bit for bit, its argmax is the host's argmax of those logits, and feeding NULL (the previous argmax,
// kept in backend memory) continues exactly as feeding that argmax from the host.
static int check_decode_step(int hybrid) {
    Config c;
    small_config(&c, hybrid);
    const int B = 2, P = 30, S = 12, V = c.vocab_size;
    Model *m = model_create(&c, backend_cpu(), 0);
    float *params = xmalloc(m->lay.total * 4);
    params_init(&m->lay, params, 9);
    model_set_params(m, params);
    int32_t pre[2 * 30], a[2], b[2], tok_ref[2], tok_step[2], greedy_host[2 * 12], greedy_dev[2 * 12];
    for (int i = 0; i < B * P; i++) pre[i] = (i * 31 + 7) % V;
    float *la = xmalloc((size_t)B * V * 4), *lb = xmalloc((size_t)B * V * 4);
    InferState *ra = infer_state_new(m, B), *rb = infer_state_new(m, B);
    model_forward_state(m, pre, B, P, ra);
    model_forward_state(m, pre, B, P, rb);
    int same = 1, argmax_ok = 1;
    for (int t = 0; t < S; t++) { // teacher-forced: ids t*13 % V
        for (int i = 0; i < B; i++) a[i] = b[i] = (int32_t)((t * 13 + i * 5) % V);
        model_forward_state(m, a, B, 1, ra);
        model_logits(m, 0, B, la);
        model_decode_step(m, rb, b, tok_step, lb);
        same &= !memcmp(la, lb, (size_t)B * V * 4);
        for (int i = 0; i < B; i++) {
            tok_ref[i] = argmax_logit_ref(la + (size_t)i * V, V);
            argmax_ok &= tok_ref[i] == tok_step[i];
        }
    }
    // greedy: host loop (argmax fed back from the host) vs device loop (feed NULL)
    infer_state_reset(m, ra);
    infer_state_reset(m, rb);
    InferState *rc = infer_state_new(m, B);
    model_forward_state(m, pre, B, P, rc);
    model_logits(m, P - 1, 1, la);
    model_logits(m, 2 * P - 1, 1, la + V);
    int32_t first[2] = {argmax_logit_ref(la, V), argmax_logit_ref(la + V, V)}, cur[2] = {first[0], first[1]};
    InferState *rd = infer_state_new(m, B);
    model_forward_state(m, pre, B, P, rd);
    for (int t = 0; t < S; t++) {
        model_decode_step(m, rc, cur, cur, NULL);
        model_decode_step(m, rd, t == 0 ? first : NULL, greedy_dev + t * B, NULL);
        memcpy(greedy_host + t * B, cur, sizeof cur);
    }
    int greedy_ok = !memcmp(greedy_host, greedy_dev, sizeof greedy_host);
    // queued steps read back in groups (generate's loop): 150 steps, past the ring's DECODE_RING slots, queued by
    // model_decode_launch_n and read in groups of 1, 16, 64 and 5 (wrapping), against model_decode_step one by one
    enum { LONG = 150 };
    static int32_t one[LONG * 2], grouped[LONG * 2];
    InferState *re = infer_state_new(m, B), *rf = infer_state_new(m, B);
    model_forward_state(m, pre, B, P, re);
    model_forward_state(m, pre, B, P, rf);
    for (int t = 0; t < LONG; t++) model_decode_step(m, re, t == 0 ? first : NULL, one + t * B, NULL);
    static const int sizes[] = {1, 16, 64, 5};
    for (int t = 0, k = 0; t < LONG; k++) {
        int g = sizes[k % 4] < LONG - t ? sizes[k % 4] : LONG - t;
        if (t == 0) model_decode_launch(m, rf, first);
        if (g - (t == 0) > 0) model_decode_launch_n(m, rf, g - (t == 0)); // (the steps after the fed one)
        model_decode_read(m, rf, grouped + t * B, g);
        t += g;
    }
    int ring_ok = !memcmp(one, grouped, sizeof one) && !memcmp(one, greedy_dev, sizeof greedy_dev);
    int ok = same && argmax_ok && greedy_ok && ring_ok;
    printf("%s %s decode step: logits == forward_state T=1 bit for bit: %s; argmax == host argmax: %s; greedy with the "
           "argmax kept in backend memory == fed from the host: %s; %d queued steps read in groups == one by one: %s\n",
           ok ? "ok  " : "FAIL", hybrid < 0 ? "gdn" : "hybrid", same ? "yes" : "NO", argmax_ok ? "yes" : "NO",
           greedy_ok ? "yes" : "NO", LONG, ring_ok ? "yes" : "NO");
    infer_state_free(m, re); infer_state_free(m, rf);
    infer_state_free(m, ra); infer_state_free(m, rb); infer_state_free(m, rc); infer_state_free(m, rd);
    model_free(m);
    free(params); free(la); free(lb);
    return ok ? 0 : 1;
}

// reset_state_at_eod while decoding (pure GDN): a token after EOD starts a document, so decoding "docA EOD docB"
// token by token gives docB the logits of decoding docB alone from a fresh state, bit for bit (sequence 0; sequence
// 1, with no EOD, runs beside it); with the key off the same stream carries docA into docB (the logits differ).
static int check_eod_reset(void) {
    Config c;
    small_config(&c, -1);
    const int B = 2, LA = 7, LB = 10, V = c.vocab_size, eod = 5;
    c.eos_token_id = eod;
    float *ref = xmalloc((size_t)LB * V * 4), *got = xmalloc((size_t)B * V * 4);
    double diff_on = 0, diff_off = 0;
    for (int reset = 1; reset >= 0; reset--) {
        c.reset_state_at_eod = reset;
        Model *m = model_create(&c, backend_cpu(), 0);
        float *params = xmalloc(m->lay.total * 4);
        params_init(&m->lay, params, 11);
        model_set_params(m, params);
        InferState *alone = infer_state_new(m, B), *stream = infer_state_new(m, B);
        for (int t = 0; t < LB; t++) { // docB alone
            int32_t tok[2] = {(int32_t)((t * 17 + 40) % V), (int32_t)((t * 3 + 9) % V)};
            model_decode_step(m, alone, tok, NULL, got);
            memcpy(ref + (size_t)t * V, got, (size_t)V * 4);
        }
        double worst = 0;
        for (int t = 0; t < LA + 1 + LB; t++) { // docA, EOD, docB
            int tb = t - LA - 1;
            int32_t tok[2] = {t < LA ? (int32_t)((t * 29 + 11) % V) : t == LA ? eod : (int32_t)((tb * 17 + 40) % V),
                              (int32_t)((t * 7 + 2) % V)};
            model_decode_step(m, stream, tok, NULL, got);
            if (tb >= 0)
                for (int v = 0; v < V; v++) worst = fmax(worst, fabs(got[v] - ref[(size_t)tb * V + v]));
        }
        if (reset) diff_on = worst; else diff_off = worst;
        infer_state_free(m, alone); infer_state_free(m, stream);
        model_free(m);
        free(params);
    }
    int ok = diff_on == 0 && diff_off > 1e-3;
    printf("%s gdn decode with reset_state_at_eod: docB after \"docA EOD\" == docB alone: max |diff| %.3g (want 0); "
           "with the key off %.3g (want > 1e-3)\n", ok ? "ok  " : "FAIL", diff_on, diff_off);
    free(ref); free(got);
    return ok ? 0 : 1;
}

int main(void) {
    int eod_fails = check_eod_reset();
    int fails = eod_fails + check_decode_step(-1) + check_decode_step(0);
    fails += check(1, 20, 0, -1, -1);   // all decode, shorter than a chunk
    fails += check(1, 150, 70, -1, -1); // prefill past one chunk boundary, then decode across the next
    fails += check(2, 90, 64, -1, -1);  // two sequences, prefill exactly one chunk
    fails += check(2, 40, 1, -1, -1);
    fails += check(2, 150, 70, -1, 5); // packed documents: EOD inside and at the end of the prefill, while decoding
    fails += check(1, 40, 0, -1, 5);   // all decode, EODs at 3, 4 (an empty document) and T - 2
    fails += check(2, 300, 70, 0, -1);  // hybrid: the KV cache grows from 256 rows mid-decode
    fails += check(1, 40, 0, 0, -1);    // hybrid, all decode
    fails += check(2, 120, 50, 11, -1); // hybrid with a window of 11
    fails += check(2, 600, 30, 20, -1); // window 20: the ring of 256 rows wraps twice
    fails += check(1, 700, 280, 11, -1); // a prefill longer than 256 with a window: the ring grows to 512, then wraps
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails ? 1 : 0;
}
