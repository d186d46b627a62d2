// prepare_internal.h: the state of one `gdn prepare` run, shared by its files (not for use outside them):
//   prepare.c          options, signals and errors, progress, the sidecar, cmd_prepare;
//   prepare_units.c    units of records, the tokenizing worker pool, writing units in submission order;
//   prepare_layouts.c  reading the inputs in order, the documents layout and the two passes of --fla-chunks.
#pragma once
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "data/indexed.h"
#include "data/textin.h"
#include "data/tokenizer.h"
#include "util/common.h"

#define UNIT_BYTES ((size_t)1 << 20) // documents layout: text handed to a worker at a time
#define UNIT_RECS 8192

// ---------------------------------------------------------------------------------------------------------
// Options

typedef struct {
    char **inputs;
    int n_inputs;
    const char *tokenizer, *prefix, *key, *tmp_dir;
    TextMode text_mode;
    int append_eod, no_bos, fla, fla_shuffle, strict, quiet, workers;
    long seq_length, fla_batch, shards;
    uint64_t seed;
} Opts;

// ---------------------------------------------------------------------------------------------------------
// State shared by the passes

typedef enum { REC_TEXT, REC_JSON, REC_NULL } RecKind;
typedef enum { DOC_OK, DOC_EMPTY, DOC_BAD } DocStatus;

typedef struct {
    size_t off, len; // bytes in Unit.raw
    uint64_t line;
    uint32_t input;
    uint8_t kind;
} URec;

typedef struct {
    uint32_t ntok;        // tokens this record contributed (documents layout)
    uint32_t text_len;    // bytes of document text (after JSON decoding)
    uint8_t status;       // DocStatus
    uint32_t bad_utf8;    // invalid UTF-8 subsequences in the text
    uint32_t bad_escapes; // JSON \u escapes of lone surrogates
    uint64_t first_bad;   // byte offset of the first invalid UTF-8 subsequence
} URes;

enum { U_FREE, U_QUEUED, U_BUSY, U_DONE };

typedef struct {
    Buf raw;
    URec *recs;
    URes *res;
    size_t nrec, caprec;
    int32_t *ids;
    size_t nids, capids;
    Buf msgs;          // one NUL-terminated message per DOC_BAD record, in record order
    size_t nchunks;    // FLA layout: ids holds nchunks * seq_length tokens
    uint64_t dropped;  // FLA layout: the batch remainder
    int state;
} Unit;

typedef struct {
    uint64_t size, records, bad, documents;
    int parquet;  // messages say "row N" rather than a line
    int reread;   // FLA row index: rows are read back from this file by offset
} InputStats;

typedef struct {
    uint64_t records, documents, empty, bad, bad_utf8_docs, bad_utf8_seqs, sequences, tokens, dropped, text_bytes;
    uint64_t shown; // problems printed one by one
} Stats;

// A row's location for --fla-shuffle-rows: byte range in an input file or in the spill file.
typedef struct {
    uint64_t off;
    uint32_t len;
    uint32_t src_json; // source << 1 | is_json; source n_inputs = spill file
} RowLoc;

typedef struct Prep {
    Opts o;
    Tokenizer *tok;
    int add_bos, eod, dtype;
    IndexedWriter *w;
    char *spill_path;
    FILE *spill;
    InputStats *in;
    Stats st;
    double t0, t_work, t_phase, t_last_progress; // t_phase: start of the current pass, for rates and ETA
    int tty;
    uint64_t total_bytes, done_bytes; // input bytes, and bytes of inputs already finished
    const char *phase;
    // worker pool
    Unit *units;
    int nslots;
    uint64_t submitted, written;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    int stop;
    pthread_t *threads;
    // FLA rows
    uint64_t nrows;
    int use_index;  // pass 2 reads rows through `rows` (to shuffle them, or because a pipe cannot be re-read)
    RowLoc *rows;
    uint64_t *bad_ordinals; // records rejected in pass 1, by global ordinal (pass 2 re-reads and skips them)
    size_t nbad_ordinals, capbad;
} Prep;

// prepare.c
// Removes everything half-written, then exits with one line naming the problem.
__attribute__((noreturn, format(printf, 2, 3))) void prep_fail(Prep *P, const char *fmt, ...);
void prep_check_signal(Prep *P); // exits (outputs removed) once SIGINT/SIGTERM/SIGHUP arrived
int prep_signal_pending(void);
void prep_progress(Prep *P, uint64_t bytes_now, uint64_t rows_done, int force);
void prep_progress_end(Prep *P);
// A problem with one record: reported (the first few), counted, fatal under --strict.
__attribute__((format(printf, 5, 6))) void prep_record_problem(Prep *P, uint32_t input, uint64_t line, int skipped,
                                                               const char *fmt, ...);
void prep_dir_of(const char *path, char *out, size_t n);

// prepare_units.c
char *prep_unit_reserve(Unit *u, size_t n); // room for n more bytes at the end of u->raw
void prep_unit_commit(Unit *u, size_t len, RecKind kind, uint32_t input, uint64_t line);
void prep_unit_add(Unit *u, const char *p, size_t len, RecKind kind, uint32_t input, uint64_t line);
void prep_pool_start(Prep *P);
void prep_pool_stop(Prep *P);
Unit *prep_unit_acquire(Prep *P, uint64_t bytes_now, uint64_t rows_done); // a free unit (writes finished ones)
void prep_unit_submit(Prep *P, Unit *u);
void prep_drain_all(Prep *P, uint64_t bytes_now, uint64_t rows_done);

// prepare_layouts.c
void prep_run_documents(Prep *P);  // documents layout: one pass
void prep_fla_index_rows(Prep *P); // --fla-chunks pass 1: validate, count and locate the rows
void prep_fla_tokenize(Prep *P);   // --fla-chunks pass 2: shards, batches, chunks
