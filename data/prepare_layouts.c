// prepare_layouts.c: `gdn prepare`'s passes over the inputs: records read in --input order, the documents
// layout (one pass), and the FLA layout's two passes (pass 1 validates and counts the rows and notes where each
// lives for --fla-shuffle-rows; pass 2 cuts the (shuffled) rows into shards, batches and chunks).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/prepare_internal.h"
#include "data/rng.h"
#include "data/textin.h"
#include "util/common.h"
// ---------------------------------------------------------------------------------------------------------
// Reading the inputs in order

typedef struct {
    Prep *P;
    int idx;
    TextInput *in;
    uint64_t ordinal; // records returned so far, over all inputs
    size_t skip_at;   // next entry of P->bad_ordinals (pass 2 of the FLA layout)
    int skip_bad;
} Stream;

static TextInput *open_input(Prep *P, int i) {
    char err[ERR_LEN];
    TextInOptions opt = {P->o.key, P->o.text_mode};
    TextInput *in = textin_open(P->o.inputs[i], &opt, err, sizeof err);
    if (!in) prep_fail(P, "%s", err);
    return in;
}

// Next record over all inputs; 0 when every input is read. *input gets the input's index.
static int stream_next(Stream *s, TextRecord *rec, uint32_t *input) {
    Prep *P = s->P;
    char err[ERR_LEN];
    for (;;) {
        if (!s->in) {
            if (s->idx >= P->o.n_inputs) return 0;
            s->in = open_input(P, s->idx);
        }
        int r = textin_next(s->in, rec, err, sizeof err);
        if (r < 0) prep_fail(P, "%s", err);
        if (r == 0) {
            P->done_bytes += textin_file_size(s->in);
            textin_close(s->in), s->in = NULL;
            s->idx++;
            continue;
        }
        uint64_t ord = s->ordinal++;
        if (s->skip_bad && s->skip_at < P->nbad_ordinals && P->bad_ordinals[s->skip_at] == ord) {
            s->skip_at++;
            continue;
        }
        *input = (uint32_t)s->idx;
        return 1;
    }
}

static uint64_t stream_bytes(const Stream *s) {
    return s->P->done_bytes + (s->in ? textin_bytes_read(s->in) : 0);
}

static RecKind rec_kind(const TextRecord *r) { return r->is_null ? REC_NULL : r->is_json ? REC_JSON : REC_TEXT; }

// Documents layout: one pass, units of ~1 MiB of text.
void prep_run_documents(Prep *P) {
    Stream s = {.P = P};
    TextRecord rec;
    uint32_t input;
    for (int more = 1; more;) {
        prep_check_signal(P);
        Unit *u = prep_unit_acquire(P, stream_bytes(&s), UINT64_MAX);
        while (u->raw.n < UNIT_BYTES && u->nrec < UNIT_RECS) {
            if (!stream_next(&s, &rec, &input)) { more = 0; break; }
            prep_unit_add(u, rec.p, rec.len, rec_kind(&rec), input, rec.line);
            P->st.records++, P->in[input].records++;
        }
        if (u->nrec) prep_unit_submit(P, u);
        prep_progress(P, stream_bytes(&s), UINT64_MAX, 0);
    }
    prep_drain_all(P, P->total_bytes, UINT64_MAX);
}

// The spill file holds the rows --fla-shuffle-rows cannot re-read in place (compressed, Parquet, pipes).
static void spill_open(Prep *P) {
    char dir[4096];
    if (P->o.tmp_dir) snprintf(dir, sizeof dir, "%s", P->o.tmp_dir);
    else prep_dir_of(P->o.prefix, dir, sizeof dir);
    size_t n = strlen(dir) + 64;
    P->spill_path = xmalloc(n);
    snprintf(P->spill_path, n, "%s/gdn-prepare-rows.tmp.%d", dir, (int)getpid());
    P->spill = fopen(P->spill_path, "w+b");
    if (!P->spill) {
        char *p = P->spill_path;
        P->spill_path = NULL;
        prep_fail(P, "cannot create the spill file %s (choose another place with --tmp-dir): %s", p, strerror(errno));
    }
    setvbuf(P->spill, NULL, _IOFBF, 1 << 20);
}

// FLA pass 1: validate every record, count the rows, and (when shuffling) note where each row lives.
void prep_fla_index_rows(Prep *P) {
    Stream s = {.P = P};
    TextRecord rec;
    uint32_t input;
    Buf text = {0};
    char err[ERR_LEN];
    size_t caprows = 0;
    P->phase = "pass 1/2: ";
    while (stream_next(&s, &rec, &input)) {
        if ((s.ordinal & 1023) == 0) prep_check_signal(P), prep_progress(P, stream_bytes(&s), UINT64_MAX, 0);
        P->st.records++, P->in[input].records++;
        const char *doc = rec.p;
        size_t len = rec.len;
        int ok = 1;
        if (rec.is_null) {
            prep_record_problem(P, input, rec.line, 1, "null value in column \"%s\"", P->o.key);
            ok = 0;
        } else if (rec.is_json) {
            text.n = 0;
            if (textin_json_text(rec.p, rec.len, P->o.key, &text, NULL, err, sizeof err)) {
                prep_record_problem(P, input, rec.line, 1, "%s", err);
                ok = 0;
            }
            doc = text.p ? text.p : "", len = text.n;
        }
        if (!ok) {
            P->st.bad++, P->in[input].bad++;
            if (P->nbad_ordinals == P->capbad) {
                P->capbad = P->capbad ? 2 * P->capbad : 64;
                P->bad_ordinals = xrealloc(P->bad_ordinals, P->capbad * sizeof *P->bad_ordinals);
            }
            P->bad_ordinals[P->nbad_ordinals++] = s.ordinal - 1;
            continue;
        }
        P->nrows++;
        if (!P->use_index) continue;
        if (P->nrows > caprows) {
            caprows = caprows ? 2 * caprows : 1 << 16;
            P->rows = xrealloc(P->rows, caprows * sizeof *P->rows);
        }
        RowLoc *loc = &P->rows[P->nrows - 1];
        if (textin_random_access(s.in)) { // re-read later from the input itself
            P->in[input].reread = 1;
            *loc = (RowLoc){rec.offset, (uint32_t)rec.len, (uint32_t)input << 1 | (rec.is_json ? 1u : 0u)};
        } else { // compressed / Parquet / pipe: keep a copy of the text
            if (!P->spill) spill_open(P);
            off_t at = ftello(P->spill);
            if (len && fwrite(doc, 1, len, P->spill) != len)
                prep_fail(P, "error writing the spill file %s: %s", P->spill_path, strerror(errno));
            *loc = (RowLoc){(uint64_t)at, (uint32_t)len, (uint32_t)P->o.n_inputs << 1};
        }
    }
    buf_free(&text);
    if (P->spill && (fflush(P->spill) || ferror(P->spill)))
        prep_fail(P, "error writing the spill file %s: %s", P->spill_path, strerror(errno));
    prep_progress(P, P->total_bytes, UINT64_MAX, 1);
    prep_progress_end(P);
}

static void pread_all(Prep *P, int fd, const char *path, char *dst, size_t n, uint64_t off) {
    while (n) {
        ssize_t r = pread(fd, dst, n, (off_t)off);
        if (r < 0 && errno == EINTR) { prep_check_signal(P); continue; }
        if (r <= 0)
            prep_fail(P, "cannot read back %s at byte %llu: %s", path, (unsigned long long)off,
                 r < 0 ? strerror(errno) : "the file shrank");
        dst += r, n -= (size_t)r, off += (uint64_t)r;
    }
}

// FLA pass 2: shards of the (shuffled) row list, batches inside shards, one unit per batch.
void prep_fla_tokenize(Prep *P) {
    uint64_t R = P->nrows, S = (uint64_t)P->o.shards, B = (uint64_t)P->o.fla_batch;
    uint64_t q = R / S, m = R % S;
    int64_t *perm = NULL;
    int *fds = NULL;
    Stream s = {.P = P, .skip_bad = 1};
    P->done_bytes = 0;
    if (P->o.fla_shuffle) {
        perm = xmalloc((R ? R : 1) * sizeof *perm);
        hf_shuffle_permutation(perm, R, P->o.seed); // logical row i = source row perm[i]
    }
    if (P->use_index) {
        fds = xmalloc(((size_t)P->o.n_inputs + 1) * sizeof *fds);
        for (int i = 0; i <= P->o.n_inputs; i++) { // only the files rows are read back from (not pipes)
            const char *path = i < P->o.n_inputs ? (P->in[i].reread ? P->o.inputs[i] : NULL) : P->spill_path;
            fds[i] = path ? open(path, O_RDONLY) : -1;
            if (path && fds[i] < 0) prep_fail(P, "cannot reopen %s: %s", path, strerror(errno));
        }
    }
    P->phase = "pass 2/2:";
    P->t_phase = now_sec();
    uint64_t row = 0;
    TextRecord rec;
    uint32_t input;
    for (uint64_t sh = 0; sh < S; sh++) {
        uint64_t lo = q * sh + (sh < m ? sh : m), hi = lo + q + (sh < m ? 1 : 0);
        for (uint64_t b = lo; b < hi; b += B) {
            uint64_t e = b + B < hi ? b + B : hi;
            prep_check_signal(P);
            Unit *u = prep_unit_acquire(P, 0, row);
            for (uint64_t i = b; i < e; i++) {
                if (P->use_index) {
                    uint64_t src_row = perm ? (uint64_t)perm[i] : i;
                    const RowLoc *loc = &P->rows[src_row];
                    uint32_t src = loc->src_json >> 1;
                    int spilled = src == (uint32_t)P->o.n_inputs;
                    pread_all(P, fds[src], spilled ? P->spill_path : P->o.inputs[src], prep_unit_reserve(u, loc->len),
                              loc->len, loc->off);
                    prep_unit_commit(u, loc->len, (loc->src_json & 1) ? REC_JSON : REC_TEXT, spilled ? 0 : src,
                                src_row + 1);
                } else {
                    if (!stream_next(&s, &rec, &input))
                        prep_fail(P, "the input ended early in the second pass (did it change during the run?)");
                    prep_unit_add(u, rec.p, rec.len, rec_kind(&rec), input, rec.line);
                }
            }
            row = e;
            prep_unit_submit(P, u);
            prep_progress(P, 0, row, 0);
        }
    }
    prep_drain_all(P, 0, row);
    if (!P->use_index && stream_next(&s, &rec, &input))
        prep_fail(P, "the input grew between the two passes (did it change during the run?)");
    if (s.in) textin_close(s.in);
    if (fds)
        for (int i = 0; i <= P->o.n_inputs; i++)
            if (fds[i] >= 0) close(fds[i]);
    free(fds), free(perm);
    prep_progress(P, 0, row, 1);
    prep_progress_end(P);
}
