// prepare_units.c: `gdn prepare`'s units of records (~1 MiB of text, or one FLA batch), the pool of --workers
// threads that tokenizes them, and the main thread's writing of finished units strictly in submission order (so
// the output does not depend on the worker count).
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/prepare_internal.h"
#include "data/textin.h"
#include "data/tokenizer.h"
#include "util/common.h"
// ---------------------------------------------------------------------------------------------------------
// Units and the worker pool

static void unit_reset(Unit *u) {
    u->raw.n = 0, u->nrec = 0, u->nids = 0, u->msgs.n = 0, u->nchunks = 0, u->dropped = 0;
}

// Room for n more bytes at the end of u->raw.
char *prep_unit_reserve(Unit *u, size_t n) {
    if (u->raw.n + n > u->raw.cap) {
        size_t c = u->raw.cap ? u->raw.cap : 1 << 16;
        while (c < u->raw.n + n) c *= 2;
        u->raw.p = xrealloc(u->raw.p, c);
        u->raw.cap = c;
    }
    return u->raw.p + u->raw.n;
}

// Adds a record whose len bytes were just placed at the end of u->raw (by unit_reserve + a read).
void prep_unit_commit(Unit *u, size_t len, RecKind kind, uint32_t input, uint64_t line) {
    if (u->nrec == u->caprec) {
        u->caprec = u->caprec ? 2 * u->caprec : 1024;
        u->recs = xrealloc(u->recs, u->caprec * sizeof *u->recs);
        u->res = xrealloc(u->res, u->caprec * sizeof *u->res);
    }
    u->recs[u->nrec++] = (URec){u->raw.n, len, line, input, (uint8_t)kind};
    u->raw.n += len;
}

void prep_unit_add(Unit *u, const char *p, size_t len, RecKind kind, uint32_t input, uint64_t line) {
    if (len) memcpy(prep_unit_reserve(u, len), p, len);
    prep_unit_commit(u, len, kind, input, line);
}

static void push_ids(Unit *u, const int32_t *ids, size_t n) {
    if (u->nids + n > u->capids) {
        while (u->nids + n > u->capids) u->capids = u->capids ? 2 * u->capids : 1 << 16;
        u->ids = xrealloc(u->ids, u->capids * sizeof *u->ids);
    }
    memcpy(u->ids + u->nids, ids, n * sizeof *ids);
    u->nids += n;
}

typedef struct {
    Buf text;
    int32_t *ids;
    size_t cap;
} Scratch;

// Tokenizes one unit (runs on a worker thread; touches only the unit and the scratch).
static void unit_process(Prep *P, Unit *u, Scratch *s) {
    char err[ERR_LEN];
    for (size_t i = 0; i < u->nrec; i++) {
        URec *r = &u->recs[i];
        URes *o = &u->res[i];
        *o = (URes){0};
        const char *text = u->raw.p + r->off;
        size_t len = r->len, bad_escapes = 0;
        if (r->kind == REC_NULL) {
            o->status = DOC_BAD;
            buf_printf(&u->msgs, "null value in column \"%s\"", P->o.key);
            buf_put(&u->msgs, "", 1);
            continue;
        }
        if (r->kind == REC_JSON) {
            s->text.n = 0;
            if (textin_json_text(text, len, P->o.key, &s->text, &bad_escapes, err, sizeof err)) {
                o->status = DOC_BAD;
                buf_puts(&u->msgs, err);
                buf_put(&u->msgs, "", 1);
                continue;
            }
            text = s->text.p ? s->text.p : "", len = s->text.n;
        }
        o->text_len = (uint32_t)len;
        if (len == 0 && !P->o.fla) { o->status = DOC_EMPTY; continue; } // FLA keeps it: BOS alone
        size_t first = 0;
        o->bad_utf8 = (uint32_t)textin_utf8_invalid(text, len, &first);
        o->bad_escapes = (uint32_t)bad_escapes;
        o->first_bad = first;
        size_t n = tok_encode(P->tok, text, len, P->add_bos, &s->ids, &s->cap);
        push_ids(u, s->ids, n);
        if (P->o.append_eod) push_ids(u, &(int32_t){P->eod}, 1);
        o->ntok = (uint32_t)(n + (P->o.append_eod ? 1 : 0));
        o->status = DOC_OK;
    }
    if (P->o.fla) { // FLA: concatenate the batch, keep whole chunks, drop the remainder
        size_t L = (size_t)P->o.seq_length;
        u->nchunks = u->nids / L;
        u->dropped = u->nids - u->nchunks * L;
        u->nids = u->nchunks * L;
    }
}

static void *worker_main(void *arg) {
    Prep *P = arg;
    Scratch s = {0};
    pthread_mutex_lock(&P->mu);
    for (;;) {
        Unit *u = NULL;
        for (uint64_t q = P->written; q < P->submitted && !u; q++)
            if (P->units[q % (uint64_t)P->nslots].state == U_QUEUED) u = &P->units[q % (uint64_t)P->nslots];
        if (!u) {
            if (P->stop) break;
            pthread_cond_wait(&P->work_cv, &P->mu);
            continue;
        }
        u->state = U_BUSY;
        pthread_mutex_unlock(&P->mu);
        unit_process(P, u, &s);
        pthread_mutex_lock(&P->mu);
        u->state = U_DONE;
        pthread_cond_broadcast(&P->done_cv);
    }
    pthread_mutex_unlock(&P->mu);
    buf_free(&s.text), free(s.ids);
    return NULL;
}

void prep_pool_start(Prep *P) {
    // Units in flight: enough to keep every worker busy while the main thread reads and writes. An FLA unit is a
    // whole batch (2048 FineWeb rows ~ 10 MB of text), so fewer of those.
    P->nslots = P->o.fla ? P->o.workers + 2 : 2 * P->o.workers + 2;
    P->units = xcalloc((size_t)P->nslots, sizeof *P->units);
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->work_cv, NULL);
    pthread_cond_init(&P->done_cv, NULL);
    P->threads = xcalloc((size_t)P->o.workers, sizeof *P->threads);
    // Workers block the stop signals, so they reach the main thread and interrupt its blocking reads.
    sigset_t stop, old;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT), sigaddset(&stop, SIGTERM), sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, &old);
    for (int i = 0; i < P->o.workers; i++)
        if (pthread_create(&P->threads[i], NULL, worker_main, P)) prep_fail(P, "cannot start worker thread %d", i);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void prep_pool_stop(Prep *P) {
    pthread_mutex_lock(&P->mu);
    P->stop = 1;
    pthread_cond_broadcast(&P->work_cv);
    pthread_mutex_unlock(&P->mu);
    for (int i = 0; i < P->o.workers; i++) pthread_join(P->threads[i], NULL);
    for (int i = 0; i < P->nslots; i++) {
        Unit *u = &P->units[i];
        buf_free(&u->raw), buf_free(&u->msgs), free(u->recs), free(u->res), free(u->ids);
    }
    free(P->units), free(P->threads);
    pthread_mutex_destroy(&P->mu);
    pthread_cond_destroy(&P->work_cv);
    pthread_cond_destroy(&P->done_cv);
}

static void write_seq(Prep *P, const int32_t *ids, size_t n) {
    if (indexed_writer_add_seq(P->w, ids, n) || indexed_writer_end_doc(P->w))
        prep_fail(P, "error writing %s.bin/.idx: %s", P->o.prefix, strerror(errno));
    P->st.sequences++;
    P->st.tokens += n;
}

// Writes a finished unit (main thread, in submission order).
static void unit_write(Prep *P, Unit *u) {
    const char *msg = u->msgs.p;
    size_t pos = 0;
    for (size_t i = 0; i < u->nrec; i++) {
        URec *r = &u->recs[i];
        URes *o = &u->res[i];
        if (o->status == DOC_BAD) {
            if (P->o.fla) // pass 1 accepted this record
                prep_fail(P, "%s: a record accepted by the first pass is now rejected (%s): the input changed during "
                        "the run", P->o.inputs[r->input], msg);
            P->st.bad++, P->in[r->input].bad++;
            prep_record_problem(P, r->input, r->line, 1, "%s", msg);
            msg += strlen(msg) + 1;
            continue;
        }
        if (o->bad_utf8 || o->bad_escapes) {
            P->st.bad_utf8_docs++, P->st.bad_utf8_seqs += o->bad_utf8 + o->bad_escapes;
            if (o->bad_utf8)
                prep_record_problem(P, r->input, r->line, 0,
                               "invalid UTF-8 (%u sequence%s, the first at byte %llu of the text), each encoded as "
                               "U+FFFD", o->bad_utf8, o->bad_utf8 == 1 ? "" : "s", (unsigned long long)o->first_bad);
            if (o->bad_escapes)
                prep_record_problem(P, r->input, r->line, 0, "%u \\u escape%s of a lone UTF-16 surrogate, encoded as U+FFFD",
                               o->bad_escapes, o->bad_escapes == 1 ? "" : "s");
        }
        if (o->status == DOC_EMPTY) { P->st.empty++; continue; }
        P->st.text_bytes += o->text_len;
        P->st.documents++;
        if (!P->o.fla) {
            write_seq(P, u->ids + pos, o->ntok);
            pos += o->ntok;
            P->in[r->input].documents++;
        } else if (o->text_len == 0) {
            P->st.empty++;
        }
    }
    if (P->o.fla) {
        size_t L = (size_t)P->o.seq_length;
        for (size_t c = 0; c < u->nchunks; c++) write_seq(P, u->ids + c * L, L);
        P->st.dropped += u->dropped;
    }
}

// Waits for the oldest unit in flight, writes it and frees its slot.
static void drain_one(Prep *P, uint64_t bytes_now, uint64_t rows_done) {
    Unit *u = &P->units[P->written % (uint64_t)P->nslots];
    pthread_mutex_lock(&P->mu);
    while (u->state != U_DONE) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&P->done_cv, &P->mu, &ts);
        if (prep_signal_pending()) { pthread_mutex_unlock(&P->mu); prep_check_signal(P); }
        pthread_mutex_unlock(&P->mu);
        prep_progress(P, bytes_now, rows_done, 0);
        pthread_mutex_lock(&P->mu);
    }
    pthread_mutex_unlock(&P->mu);
    unit_write(P, u);
    pthread_mutex_lock(&P->mu);
    u->state = U_FREE;
    P->written++;
    pthread_mutex_unlock(&P->mu);
}

static int unit_done(Prep *P, Unit *u) {
    pthread_mutex_lock(&P->mu);
    int d = u->state == U_DONE;
    pthread_mutex_unlock(&P->mu);
    return d;
}

// A free unit to fill: waits for the oldest unit when all slots are in flight.
Unit *prep_unit_acquire(Prep *P, uint64_t bytes_now, uint64_t rows_done) {
    while (P->written < P->submitted && unit_done(P, &P->units[P->written % (uint64_t)P->nslots]))
        drain_one(P, bytes_now, rows_done);
    if (P->submitted - P->written == (uint64_t)P->nslots) drain_one(P, bytes_now, rows_done);
    Unit *u = &P->units[P->submitted % (uint64_t)P->nslots];
    unit_reset(u);
    return u;
}

void prep_unit_submit(Prep *P, Unit *u) {
    pthread_mutex_lock(&P->mu);
    u->state = U_QUEUED;
    P->submitted++;
    pthread_cond_signal(&P->work_cv);
    pthread_mutex_unlock(&P->mu);
}

void prep_drain_all(Prep *P, uint64_t bytes_now, uint64_t rows_done) {
    while (P->written < P->submitted) drain_one(P, bytes_now, rows_done);
}
