// verify.c: `gdn verify` — the recipe's sanity check (Primus verify_gdn_conversion.py, spec model.md §8):
// per prompt the shifted mean loss, the top-5 next tokens from the last position and a greedy
// continuation; PASS when every loss is below 6.0. The exit status carries the verdict.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/args.h"
#include "../util/common.h"
#include "infer.h"

static const char *default_prompts[] = {"The capital of France is", "Machine learning is a field of",
                                        "The largest planet in our solar system is"};

static void help(void) {
    printf("usage: gdn verify --load MODEL [--prompts FILE] [--json] [--max-new-tokens 40] [--threshold 6.0]\n"
           "                  [--tokenizer PATH] [--device cpu|cuda|auto]\n"
           "FILE: one prompt per line (plain text, or JSON strings). Exit status 0 = PASS, 1 = FAIL.\n");
}

int cmd_verify(int argc, char **argv) {
    if (arg_is_help(argc, argv) || argc < 2) { help(); return argc < 2 ? 2 : 0; }
    static const ArgSpec spec[] = {
        INFER_ARGS,
        {"--prompts", ARG_STR, 0, 0},
        {"--json", ARG_FLAG, 0, 0},
        {"--max-new-tokens", ARG_INT, 0, 1 << 20},
        {"--threshold", ARG_NUM, 0, 1e6},
    };
    Args a;
    args_parse(&a, "verify", argc, argv, spec, sizeof spec / sizeof spec[0], 0);
    const char *pf = args_str(&a, "--prompts", NULL);
    int json = args_flag(&a, "--json"), max_new = (int)args_int(&a, "--max-new-tokens", 40);
    double threshold = args_num(&a, "--threshold", 6.0);
    char **prompts = (char **)default_prompts;
    int np = 3;
    if (pf) {
        char err[ERR_LEN];
        size_t len;
        char *text = read_file(pf, &len, err, sizeof err);
        if (!text) die("%s", err);
        prompts = NULL;
        np = 0;
        int line = 0;
        for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
            line++;
            size_t k = strlen(l);
            if (k && l[k - 1] == '\r') l[--k] = 0;
            if (!k) continue;
            char *p = l;
            if (l[0] == '"') {
                cJSON *j = cJSON_Parse(l);
                if (!cJSON_IsString(j)) die("%s:%d: expected a JSON string", pf, line);
                p = xstrdup(j->valuestring);
                cJSON_Delete(j);
            } else p = xstrdup(l);
            if (!p[0]) die("%s:%d: empty prompt", pf, line);
            prompts = xrealloc(prompts, (size_t)(np + 1) * sizeof *prompts);
            prompts[np++] = p;
        }
        if (np == 0) die("%s: no prompts", pf);
    }
    InferModel im;
    infer_open(&im, argc, argv);
    Model *m = im.m;
    int V = m->d.V, pass = 1;
    float *logits = xmalloc((size_t)V * sizeof(float));
    cJSON *out = cJSON_CreateArray();
    for (int p = 0; p < np; p++) {
        int32_t *ids = NULL;
        size_t cap = 0, n = tok_encode(im.tok, prompts[p], strlen(prompts[p]), 1, &ids, &cap);
        if (n < 2) die("prompt %d (\"%s\") has fewer than 2 tokens: no loss to measure", p + 1, prompts[p]);
        if (n > 65536) die("prompt %d is %zu tokens; the limit is 65536", p + 1, n);
        int32_t *tgt = xmalloc(n * sizeof(int32_t));
        float *losses = xmalloc(n * sizeof(float));
        for (size_t t = 0; t < n; t++) tgt[t] = t + 1 < n ? ids[t + 1] : -1;
        InferState *st = infer_state_new(m, 1);
        model_forward_state(m, ids, 1, (int)n, st);
        model_token_losses(m, tgt, losses);
        double loss = 0;
        for (size_t t = 0; t + 1 < n; t++) loss += losses[t];
        loss /= (double)(n - 1);
        model_logits(m, (int)n - 1, 1, logits);
        int32_t top[5];
        float topv[5];
        for (int k = 0; k < 5; k++) { // ties to the lowest id
            int32_t best = -1;
            for (int v = 0; v < V; v++) {
                int used = 0;
                for (int j = 0; j < k; j++) used |= top[j] == v;
                if (!used && (best < 0 || logits[v] > logits[best])) best = v;
            }
            top[k] = best;
            topv[k] = logits[best];
        }
        int32_t *gen = xmalloc((size_t)(max_new + 1) * sizeof(int32_t));
        int ng = 0;
        int32_t nx = argmax_logit(logits, V);
        for (int i = 0; i < max_new; i++) {
            gen[ng++] = nx;
            if (nx == tok_eos_id(im.tok)) break;
            if (i + 1 < max_new) model_decode_step(m, st, i == 0 ? &nx : NULL, &nx, NULL); // argmax on the backend
        }
        char *cont = tok_decode(im.tok, gen, (size_t)ng, 1, NULL);
        int ok = isfinite(loss) && loss < threshold;
        pass &= ok;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "prompt", prompts[p]);
        cJSON_AddNumberToObject(r, "loss", loss);
        cJSON_AddBoolToObject(r, "pass", ok);
        cJSON *tj = cJSON_AddArrayToObject(r, "top5");
        if (!json) printf("prompt: %s\n  tokens: %zu  loss: %.4f  %s\n  top-5:", prompts[p], n, loss, ok ? "ok" : "FAIL (>= threshold)");
        for (int k = 0; k < 5; k++) {
            char *t = tok_decode(im.tok, &top[k], 1, 0, NULL);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "id", top[k]);
            cJSON_AddStringToObject(e, "text", t);
            cJSON_AddNumberToObject(e, "logit", topv[k]);
            cJSON_AddItemToArray(tj, e);
            if (!json) printf(" %d %s", top[k], t);
            free(t);
        }
        cJSON_AddStringToObject(r, "greedy", cont);
        if (!json) printf("\n  greedy: %s\n", cont);
        cJSON_AddItemToArray(out, r);
        free(cont); free(gen); free(ids); free(tgt); free(losses);
        infer_state_free(m, st);
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "prompts", out);
        cJSON_AddBoolToObject(root, "pass", pass);
        char *txt = cJSON_Print(root);
        printf("%s\n", txt);
        free(txt);
        cJSON_Delete(root);
    } else {
        cJSON_Delete(out);
        printf("%s (threshold %.2f)\n", pass ? "PASS" : "FAIL", threshold);
    }
    free(logits);
    infer_close(&im);
    return pass ? 0 : 1;
}
