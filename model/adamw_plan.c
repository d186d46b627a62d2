// adamw_plan.c: the chunk table of a multi-tensor AdamW (see adamw_plan.h).
#include "adamw_plan.h"

#include <stdlib.h>

#include "../util/common.h"

void adamw_plan_add(AdamwPlan *p, size_t goff, size_t soff, size_t poff, size_t len, int decay) {
    for (size_t at = 0; at < len; at += ADAMW_CHUNK) {
        if (p->n == p->cap) {
            p->cap = p->cap ? 2 * p->cap : 256;
            p->host = xrealloc(p->host, (size_t)p->cap * sizeof *p->host);
        }
        size_t n = len - at < ADAMW_CHUNK ? len - at : ADAMW_CHUNK;
        p->host[p->n++] = (AdamwChunk){goff + at, soff + at, poff + at, (uint32_t)n, decay ? 1u : 0u};
    }
}

void adamw_plan_upload(AdamwPlan *p, const Backend *be) {
    if (p->dev) be->free(p->dev);
    p->dev = be->alloc((size_t)(p->n ? p->n : 1) * sizeof(AdamwChunk));
    if (p->n) be->memcpy_h2d(p->dev, p->host, (size_t)p->n * sizeof(AdamwChunk));
}

void adamw_plan_free(AdamwPlan *p, const Backend *be) {
    if (p->dev) be->free(p->dev);
    free(p->host);
    *p = (AdamwPlan){0};
}
