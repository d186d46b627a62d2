// prepare.c: `gdn prepare`, raw text (JSONL, text, Parquet; see textin.h) -> Megatron MMIDIDX token files
// <prefix>.bin/.idx (spec data.md §2) plus a sidecar <prefix>.json saying how they were made.
//
// Two layouts:
//   documents (default; Megatron preprocess_data.py "Option A" without sentence splitting): each non-empty
//     document is one sequence tok_encode(text) (+ EOD with --append-eod) and one document entry.
//   --fla-chunks (FLA legacy/training/preprocess.py, spec data.md §4.1 steps 2-5): rows are (optionally)
//     shuffled as datasets.shuffle(seed) does, cut into --shards contiguous shards, each shard into batches of
//     --fla-batch-size rows; a batch's ids (BOS + text, no EOS) are concatenated and cut into --seq-length
//     chunks, the batch remainder dropped; each chunk is one sequence and one document entry. Step 1 (row
//     order) is the --input order. Step 6 (Arrow files) is skipped: the .bin equals what Primus'
//     convert_fla_to_megatron.py makes of them; the .idx differs only in document_indices (0..N here, its
//     quirky 1..N there, spec §4.3).
//
// Flow: the main thread reads records into units (~1 MiB of text, or one FLA batch), a pool of --workers
// threads tokenizes units, and the main thread writes finished units strictly in submission order, so the
// output does not depend on the worker count. Memory is bounded by the number of units in flight.
// The FLA layout needs the row count before the first batch (the shard bounds depend on it), so it reads
// the inputs twice: pass 1 validates and counts rows (and, with --fla-shuffle-rows, records where each row
// lives: its byte range for uncompressed JSONL/text, else its text copied to a spill file), pass 2 tokenizes.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/indexed.h"
#include "data/rng.h"
#include "data/textin.h"
#include "data/tokenizer.h"
#include "util/common.h"
#include "util/stale_tmp.h"

#define UNIT_BYTES ((size_t)1 << 20) // documents layout: text handed to a worker at a time
#define UNIT_RECS 8192
#define MAX_SHOWN_PROBLEMS 20        // bad records / invalid UTF-8 reported one by one, then only counted

static const char usage_text[] =
    "usage: gdn prepare --input FILE... --tokenizer tokenizer.json --output-prefix PREFIX [options]\n"
    "\n"
    "Tokenizes raw text into Megatron indexed-dataset files PREFIX.bin + PREFIX.idx (int32 ids for a vocab\n"
    ">= 65500, else uint16) and writes PREFIX.json describing the run (tokenizer sha256, counts, command).\n"
    "\n"
    "inputs (processed in the order given; --input may repeat):\n"
    "  .jsonl .json .ndjson   one JSON object per line (document = its --json-key string) or one JSON\n"
    "                         string per line; also compressed as .gz or .zst. Blank lines are skipped.\n"
    "  .txt .text             plain text (also .gz/.zst), split by --text-mode\n"
    "  .parquet               the string column named --json-key\n"
    "\n"
    "options:\n"
    "  --json-key KEY         JSON key / Parquet column holding the text (default: text)\n"
    "  --text-mode MODE       line: one document per line (default; the line break is not part of it);\n"
    "                         paragraph: documents separated by blank lines; file: one document per file\n"
    "  --append-eod           append the EOD token (<|end_of_text|> 128001) to every document\n"
    "  --no-bos               do not prepend BOS (default: as the tokenizer's post-processor does)\n"
    "  --workers N            tokenizing threads (default: number of CPUs); the output is identical for any N\n"
    "  --strict               fail on the first bad record (malformed JSON, missing key, null, invalid UTF-8)\n"
    "                         instead of reporting, skipping and counting it\n"
    "  --quiet                no progress line (else on stderr: every second on a terminal, every 10 s in a log)\n"
    "\n"
    "FLA layout (reproduces FLA legacy/training/preprocess.py, spec data.md §4.1 steps 2-5; step 1 is the order\n"
    "of --input: for FineWeb pass the parquet files sorted by name; step 6, the Arrow files, is skipped: the\n"
    ".bin is what Primus' convert_fla_to_megatron.py makes of them):\n"
    "  --fla-chunks           rows tokenized with BOS and no EOS; rows cut into --shards contiguous shards,\n"
    "                         shards into batches of --fla-batch-size rows; each batch's ids concatenated and\n"
    "                         cut into --seq-length chunks, the batch remainder dropped; one sequence per chunk.\n"
    "                         Empty rows count as rows (BOS only), as in FLA. Reads the inputs twice.\n"
    "  --seq-length N         chunk length (default 2048)\n"
    "  --shards N             FLA's num_proc (default 64)\n"
    "  --fla-batch-size N     rows per batch (default 2048)\n"
    "  --fla-shuffle-rows     first shuffle the rows as datasets.shuffle(seed=--seed) does (step 2); rows of\n"
    "                         compressed or Parquet inputs are then copied to a temporary spill file (as are\n"
    "                         the rows of a pipe, which cannot be read twice, with or without the shuffle)\n"
    "  --seed N               shuffle seed (default 42)\n"
    "  --tmp-dir DIR          where the spill file goes (default: next to PREFIX)\n"
    "\n"
    "Bad records are reported as FILE:LINE: problem, skipped and counted. Outputs are written to temporaries\n"
    "and renamed at the end: a failed or interrupted run leaves no PREFIX.bin/.idx behind.\n";

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

static long parse_count(const char *opt, const char *v, long lo, long hi) {
    char *e;
    errno = 0;
    long long x = strtoll(v, &e, 10);
    if (!*v || *e || errno || x < lo || x > hi)
        die("prepare: %s expects an integer in [%ld, %ld], got '%s'", opt, lo, hi, v);
    return (long)x;
}

static void parse_opts(Opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->key = "text", o->text_mode = TEXT_MODE_LINE, o->seq_length = 2048, o->fla_batch = 2048, o->shards = 64;
    o->seed = 42;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->workers = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
    o->inputs = xcalloc((size_t)argc, sizeof *o->inputs);
    int seen_fla_only = 0;
    const char *fla_only = NULL;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i], *val = NULL;
        char name[64];
        if (strncmp(a, "--", 2)) die("prepare: unexpected argument '%s' (input files follow --input)", a);
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof name) die("prepare: unknown option '%s' (see gdn prepare --help)", a);
        memcpy(name, a, nl), name[nl] = 0;
        if (eq) val = (char *)eq + 1;
        if (!strcmp(name, "--input")) { // --input=FILE, or --input FILE... up to the next option
            int before = o->n_inputs;
            if (val && *val) o->inputs[o->n_inputs++] = val;
            else if (!val)
                while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) o->inputs[o->n_inputs++] = argv[++i];
            if (o->n_inputs == before) die("prepare: --input needs at least one file");
            continue;
        }
        static const char *flags[] = {"--append-eod", "--no-bos", "--fla-chunks",
                                      "--fla-shuffle-rows", "--strict", "--quiet"};
        int is_flag = 0;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) is_flag |= !strcmp(name, flags[k]);
        if (is_flag) {
            if (val) die("prepare: %s takes no value", name);
            if (!strcmp(name, "--append-eod")) o->append_eod = 1;
            else if (!strcmp(name, "--no-bos")) o->no_bos = 1;
            else if (!strcmp(name, "--fla-chunks")) o->fla = 1;
            else if (!strcmp(name, "--fla-shuffle-rows")) o->fla_shuffle = 1, seen_fla_only = 1, fla_only = name;
            else if (!strcmp(name, "--strict")) o->strict = 1;
            else o->quiet = 1;
            continue;
        }
        static const char *valued[] = {"--tokenizer", "--output-prefix", "--json-key", "--text-mode", "--workers",
                                       "--seq-length", "--shards", "--fla-batch-size", "--seed", "--tmp-dir"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(name, valued[k]);
        if (!known) die("prepare: unknown option '%s' (see gdn prepare --help)", name);
        if (!val) {
            if (i + 1 >= argc) die("prepare: %s needs a value", name);
            val = argv[++i];
        }
        if (!strcmp(name, "--tokenizer")) o->tokenizer = val;
        else if (!strcmp(name, "--output-prefix")) o->prefix = val;
        else if (!strcmp(name, "--json-key")) o->key = val;
        else if (!strcmp(name, "--tmp-dir")) o->tmp_dir = val;
        else if (!strcmp(name, "--workers")) o->workers = (int)parse_count(name, val, 1, 256);
        else if (!strcmp(name, "--seed")) o->seed = (uint64_t)parse_count(name, val, 0, 0x7fffffffffffffffL);
        else if (!strcmp(name, "--text-mode")) {
            if (!strcmp(val, "line")) o->text_mode = TEXT_MODE_LINE;
            else if (!strcmp(val, "paragraph")) o->text_mode = TEXT_MODE_PARAGRAPH;
            else if (!strcmp(val, "file")) o->text_mode = TEXT_MODE_FILE;
            else die("prepare: --text-mode expects line, paragraph or file, got '%s'", val);
        } else {
            seen_fla_only = 1, fla_only = name;
            if (!strcmp(name, "--seq-length")) o->seq_length = parse_count(name, val, 1, 1L << 30);
            else if (!strcmp(name, "--shards")) o->shards = parse_count(name, val, 1, 1L << 20);
            else o->fla_batch = parse_count(name, val, 1, 1L << 24);
        }
    }
    if (!o->n_inputs) die("prepare: no input files (--input FILE...); see gdn prepare --help");
    if (!o->tokenizer) die("prepare: --tokenizer PATH (a tokenizer.json) is required");
    if (!o->prefix || !*o->prefix) die("prepare: --output-prefix PREFIX is required");
    size_t pl = strlen(o->prefix);
    if (pl >= 4 && (!strcmp(o->prefix + pl - 4, ".bin") || !strcmp(o->prefix + pl - 4, ".idx")))
        die("prepare: --output-prefix is the path without .bin/.idx, got '%s'", o->prefix);
    if (o->prefix[pl - 1] == '/')
        die("prepare: --output-prefix '%s' names a directory; add a file name prefix", o->prefix);
    if (seen_fla_only && !o->fla) die("prepare: %s only applies with --fla-chunks", fla_only);
    if (o->fla && o->append_eod)
        die("prepare: --append-eod is not part of FLA's preprocessing (--fla-chunks adds no EOS)");
    if (o->fla && o->no_bos) die("prepare: --no-bos is not part of FLA's preprocessing (--fla-chunks keeps BOS)");
}

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

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

static void cleanup_outputs(Prep *P) {
    if (P->w) indexed_writer_abort(P->w), P->w = NULL;
    if (P->spill) fclose(P->spill), P->spill = NULL;
    if (P->spill_path) unlink(P->spill_path), free(P->spill_path), P->spill_path = NULL;
}

static void check_signal(Prep *P);

// Removes everything half-written, then exits with one line naming the problem.
__attribute__((noreturn, format(printf, 2, 3))) static void fail(Prep *P, const char *fmt, ...) {
    check_signal(P); // a read cut short by a signal surfaces here as an error: report the signal instead
    char msg[2 * ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
    cleanup_outputs(P);
    die("prepare: %s", msg);
}

static void check_signal(Prep *P) {
    if (!g_signal) return;
    int sig = g_signal;
    if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
    cleanup_outputs(P);
    fprintf(stderr, "gdn: prepare: interrupted by signal %d; partial outputs removed\n", sig);
    exit(128 + sig);
}

// ---------------------------------------------------------------------------------------------------------
// Progress

static void fmt_count(char *s, size_t n, double x) {
    if (x >= 1e9) snprintf(s, n, "%.2fG", x / 1e9);
    else if (x >= 1e6) snprintf(s, n, "%.2fM", x / 1e6);
    else if (x >= 1e4) snprintf(s, n, "%.1fk", x / 1e3);
    else snprintf(s, n, "%.0f", x);
}

static void fmt_eta(char *s, size_t n, double sec) {
    if (!(sec >= 0) || sec > 1e7) { snprintf(s, n, "?"); return; }
    long t = (long)(sec + 0.5);
    if (t >= 3600) snprintf(s, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(s, n, "%ld:%02ld", t / 60, t % 60);
}

// One status line: on a terminal rewritten in place every second, in a log a new line every 10 s.
static void progress(Prep *P, uint64_t bytes_now, uint64_t rows_done, int force) {
    if (P->o.quiet) return;
    double t = now_sec();
    if (!force && t - P->t_last_progress < (P->tty ? 1.0 : 10.0)) return;
    P->t_last_progress = t;
    double el = t - P->t_phase;
    if (el <= 0) el = 1e-9;
    char line[256], a[32], b[32], eta[32];
    if (rows_done != UINT64_MAX) { // FLA pass 2: progress by rows
        double f = P->nrows ? (double)rows_done / (double)P->nrows : 1;
        fmt_count(a, sizeof a, (double)P->st.tokens / el);
        fmt_eta(eta, sizeof eta, f > 0 ? el * (1 - f) / f : -1);
        snprintf(line, sizeof line,
                 "prepare: %s rows %llu/%llu (%.0f%%) | %.1f MB/s of text | %s tok/s | %llu chunks | ETA %s", P->phase,
                 (unsigned long long)rows_done, (unsigned long long)P->nrows, 100 * f,
                 (double)P->st.text_bytes / el / 1e6, a, (unsigned long long)P->st.sequences, eta);
    } else {
        double f = P->total_bytes ? (double)bytes_now / (double)P->total_bytes : 1;
        fmt_eta(eta, sizeof eta, f > 0 ? el * (1 - f) / f : -1);
        if (P->o.fla) { // pass 1: reading and counting rows
            fmt_count(a, sizeof a, (double)P->st.records / el);
            snprintf(line, sizeof line, "prepare: %s%.1f/%.1f MB (%.0f%%) | %.1f MB/s | %s rows/s | ETA %s", P->phase,
                     (double)bytes_now / 1e6, (double)P->total_bytes / 1e6, 100 * f, (double)bytes_now / el / 1e6, a,
                     eta);
        } else {
            fmt_count(a, sizeof a, (double)P->st.documents / el);
            fmt_count(b, sizeof b, (double)P->st.tokens / el);
            snprintf(line, sizeof line, "prepare: %.1f/%.1f MB (%.0f%%) | %.1f MB/s | %s docs/s | %s tok/s | ETA %s",
                     (double)bytes_now / 1e6, (double)P->total_bytes / 1e6, 100 * f, (double)bytes_now / el / 1e6, a,
                     b, eta);
        }
    }
    fprintf(stderr, P->tty ? "\r\033[K%s" : "%s\n", line);
}

static void progress_end(Prep *P) {
    if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
}

// A problem with one record: reported (the first few), counted, fatal under --strict.
// skipped: the record is left out (else it is kept, e.g. invalid UTF-8 encoded as U+FFFD).
__attribute__((format(printf, 5, 6))) static void record_problem(Prep *P, uint32_t input, uint64_t line, int skipped,
                                                                 const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *path = P->o.inputs[input];
    int pq = P->in[input].parquet;
    if (P->o.strict) fail(P, "%s:%s%llu: %s (--strict)", path, pq ? "row " : "", (unsigned long long)line, msg);
    if (P->st.shown < MAX_SHOWN_PROBLEMS) {
        if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
        fprintf(stderr, "gdn: prepare: %s:%s%llu: %s%s\n", path, pq ? "row " : "", (unsigned long long)line, msg,
                skipped ? "; skipped" : "");
    } else if (P->st.shown == MAX_SHOWN_PROBLEMS) {
        fprintf(stderr, "gdn: prepare: further problems are counted but not shown\n");
    }
    P->st.shown++;
}

// ---------------------------------------------------------------------------------------------------------
// Units and the worker pool

static void unit_reset(Unit *u) {
    u->raw.n = 0, u->nrec = 0, u->nids = 0, u->msgs.n = 0, u->nchunks = 0, u->dropped = 0;
}

// Room for n more bytes at the end of u->raw.
static char *unit_reserve(Unit *u, size_t n) {
    if (u->raw.n + n > u->raw.cap) {
        size_t c = u->raw.cap ? u->raw.cap : 1 << 16;
        while (c < u->raw.n + n) c *= 2;
        u->raw.p = xrealloc(u->raw.p, c);
        u->raw.cap = c;
    }
    return u->raw.p + u->raw.n;
}

// Adds a record whose len bytes were just placed at the end of u->raw (by unit_reserve + a read).
static void unit_commit(Unit *u, size_t len, RecKind kind, uint32_t input, uint64_t line) {
    if (u->nrec == u->caprec) {
        u->caprec = u->caprec ? 2 * u->caprec : 1024;
        u->recs = xrealloc(u->recs, u->caprec * sizeof *u->recs);
        u->res = xrealloc(u->res, u->caprec * sizeof *u->res);
    }
    u->recs[u->nrec++] = (URec){u->raw.n, len, line, input, (uint8_t)kind};
    u->raw.n += len;
}

static void unit_add(Unit *u, const char *p, size_t len, RecKind kind, uint32_t input, uint64_t line) {
    if (len) memcpy(unit_reserve(u, len), p, len);
    unit_commit(u, len, kind, input, line);
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

static void pool_start(Prep *P) {
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
        if (pthread_create(&P->threads[i], NULL, worker_main, P)) fail(P, "cannot start worker thread %d", i);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void pool_stop(Prep *P) {
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
        fail(P, "error writing %s.bin/.idx: %s", P->o.prefix, strerror(errno));
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
                fail(P, "%s: a record accepted by the first pass is now rejected (%s): the input changed during "
                        "the run", P->o.inputs[r->input], msg);
            P->st.bad++, P->in[r->input].bad++;
            record_problem(P, r->input, r->line, 1, "%s", msg);
            msg += strlen(msg) + 1;
            continue;
        }
        if (o->bad_utf8 || o->bad_escapes) {
            P->st.bad_utf8_docs++, P->st.bad_utf8_seqs += o->bad_utf8 + o->bad_escapes;
            if (o->bad_utf8)
                record_problem(P, r->input, r->line, 0,
                               "invalid UTF-8 (%u sequence%s, the first at byte %llu of the text), each encoded as "
                               "U+FFFD", o->bad_utf8, o->bad_utf8 == 1 ? "" : "s", (unsigned long long)o->first_bad);
            if (o->bad_escapes)
                record_problem(P, r->input, r->line, 0, "%u \\u escape%s of a lone UTF-16 surrogate, encoded as U+FFFD",
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
        if (g_signal) { pthread_mutex_unlock(&P->mu); check_signal(P); }
        pthread_mutex_unlock(&P->mu);
        progress(P, bytes_now, rows_done, 0);
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
static Unit *unit_acquire(Prep *P, uint64_t bytes_now, uint64_t rows_done) {
    while (P->written < P->submitted && unit_done(P, &P->units[P->written % (uint64_t)P->nslots]))
        drain_one(P, bytes_now, rows_done);
    if (P->submitted - P->written == (uint64_t)P->nslots) drain_one(P, bytes_now, rows_done);
    Unit *u = &P->units[P->submitted % (uint64_t)P->nslots];
    unit_reset(u);
    return u;
}

static void unit_submit(Prep *P, Unit *u) {
    pthread_mutex_lock(&P->mu);
    u->state = U_QUEUED;
    P->submitted++;
    pthread_cond_signal(&P->work_cv);
    pthread_mutex_unlock(&P->mu);
}

static void drain_all(Prep *P, uint64_t bytes_now, uint64_t rows_done) {
    while (P->written < P->submitted) drain_one(P, bytes_now, rows_done);
}

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
    if (!in) fail(P, "%s", err);
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
        if (r < 0) fail(P, "%s", err);
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
static void run_documents(Prep *P) {
    Stream s = {.P = P};
    TextRecord rec;
    uint32_t input;
    for (int more = 1; more;) {
        check_signal(P);
        Unit *u = unit_acquire(P, stream_bytes(&s), UINT64_MAX);
        while (u->raw.n < UNIT_BYTES && u->nrec < UNIT_RECS) {
            if (!stream_next(&s, &rec, &input)) { more = 0; break; }
            unit_add(u, rec.p, rec.len, rec_kind(&rec), input, rec.line);
            P->st.records++, P->in[input].records++;
        }
        if (u->nrec) unit_submit(P, u);
        progress(P, stream_bytes(&s), UINT64_MAX, 0);
    }
    drain_all(P, P->total_bytes, UINT64_MAX);
}

static void dir_of(const char *path, char *out, size_t n) {
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(out, n, ".");
    else if (sl == path) snprintf(out, n, "/");
    else snprintf(out, n, "%.*s", (int)(sl - path), path);
}

// The spill file holds the rows --fla-shuffle-rows cannot re-read in place (compressed, Parquet, pipes).
static void spill_open(Prep *P) {
    char dir[4096];
    if (P->o.tmp_dir) snprintf(dir, sizeof dir, "%s", P->o.tmp_dir);
    else dir_of(P->o.prefix, dir, sizeof dir);
    size_t n = strlen(dir) + 64;
    P->spill_path = xmalloc(n);
    snprintf(P->spill_path, n, "%s/gdn-prepare-rows.tmp.%d", dir, (int)getpid());
    P->spill = fopen(P->spill_path, "w+b");
    if (!P->spill) {
        char *p = P->spill_path;
        P->spill_path = NULL;
        fail(P, "cannot create the spill file %s (choose another place with --tmp-dir): %s", p, strerror(errno));
    }
    setvbuf(P->spill, NULL, _IOFBF, 1 << 20);
}

// FLA pass 1: validate every record, count the rows, and (when shuffling) note where each row lives.
static void fla_index_rows(Prep *P) {
    Stream s = {.P = P};
    TextRecord rec;
    uint32_t input;
    Buf text = {0};
    char err[ERR_LEN];
    size_t caprows = 0;
    P->phase = "pass 1/2: ";
    while (stream_next(&s, &rec, &input)) {
        if ((s.ordinal & 1023) == 0) check_signal(P), progress(P, stream_bytes(&s), UINT64_MAX, 0);
        P->st.records++, P->in[input].records++;
        const char *doc = rec.p;
        size_t len = rec.len;
        int ok = 1;
        if (rec.is_null) {
            record_problem(P, input, rec.line, 1, "null value in column \"%s\"", P->o.key);
            ok = 0;
        } else if (rec.is_json) {
            text.n = 0;
            if (textin_json_text(rec.p, rec.len, P->o.key, &text, NULL, err, sizeof err)) {
                record_problem(P, input, rec.line, 1, "%s", err);
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
                fail(P, "error writing the spill file %s: %s", P->spill_path, strerror(errno));
            *loc = (RowLoc){(uint64_t)at, (uint32_t)len, (uint32_t)P->o.n_inputs << 1};
        }
    }
    buf_free(&text);
    if (P->spill && (fflush(P->spill) || ferror(P->spill)))
        fail(P, "error writing the spill file %s: %s", P->spill_path, strerror(errno));
    progress(P, P->total_bytes, UINT64_MAX, 1);
    progress_end(P);
}

static void pread_all(Prep *P, int fd, const char *path, char *dst, size_t n, uint64_t off) {
    while (n) {
        ssize_t r = pread(fd, dst, n, (off_t)off);
        if (r < 0 && errno == EINTR) { check_signal(P); continue; }
        if (r <= 0)
            fail(P, "cannot read back %s at byte %llu: %s", path, (unsigned long long)off,
                 r < 0 ? strerror(errno) : "the file shrank");
        dst += r, n -= (size_t)r, off += (uint64_t)r;
    }
}

// FLA pass 2: shards of the (shuffled) row list, batches inside shards, one unit per batch.
static void fla_tokenize(Prep *P) {
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
            if (path && fds[i] < 0) fail(P, "cannot reopen %s: %s", path, strerror(errno));
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
            check_signal(P);
            Unit *u = unit_acquire(P, 0, row);
            for (uint64_t i = b; i < e; i++) {
                if (P->use_index) {
                    uint64_t src_row = perm ? (uint64_t)perm[i] : i;
                    const RowLoc *loc = &P->rows[src_row];
                    uint32_t src = loc->src_json >> 1;
                    int spilled = src == (uint32_t)P->o.n_inputs;
                    pread_all(P, fds[src], spilled ? P->spill_path : P->o.inputs[src], unit_reserve(u, loc->len),
                              loc->len, loc->off);
                    unit_commit(u, loc->len, (loc->src_json & 1) ? REC_JSON : REC_TEXT, spilled ? 0 : src,
                                src_row + 1);
                } else {
                    if (!stream_next(&s, &rec, &input))
                        fail(P, "the input ended early in the second pass (did it change during the run?)");
                    unit_add(u, rec.p, rec.len, rec_kind(&rec), input, rec.line);
                }
            }
            row = e;
            unit_submit(P, u);
            progress(P, 0, row, 0);
        }
    }
    drain_all(P, 0, row);
    if (!P->use_index && stream_next(&s, &rec, &input))
        fail(P, "the input grew between the two passes (did it change during the run?)");
    if (s.in) textin_close(s.in);
    if (fds)
        for (int i = 0; i <= P->o.n_inputs; i++)
            if (fds[i] >= 0) close(fds[i]);
    free(fds), free(perm);
    progress(P, 0, row, 1);
    progress_end(P);
}

// ---------------------------------------------------------------------------------------------------------
// Sidecar

static void quote_arg(Buf *b, const char *a) {
    int plain = *a != 0;
    for (const char *p = a; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%", *p)) plain = 0;
    if (plain) { buf_puts(b, a); return; }
    buf_puts(b, "'");
    for (const char *p = a; *p; p++) {
        if (*p == '\'') buf_puts(b, "'\\''");
        else buf_put(b, p, 1);
    }
    buf_puts(b, "'");
}

static void write_sidecar(Prep *P, int argc, char **argv, const char *started, double duration) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "gdn-prepare-1");
    Buf cmd = {0};
    buf_puts(&cmd, "gdn");
    for (int i = 0; i < argc; i++) buf_puts(&cmd, " "), quote_arg(&cmd, argv[i]);
    buf_put(&cmd, "", 1);
    cJSON_AddStringToObject(j, "command", cmd.p);
    buf_free(&cmd);
    cJSON_AddStringToObject(j, "layout", P->o.fla ? "fla-chunks" : "documents");
    cJSON_AddStringToObject(j, "tokenizer", P->o.tokenizer);
    cJSON_AddStringToObject(j, "tokenizer_sha256", tok_sha256(P->tok));
    cJSON_AddNumberToObject(j, "vocab_size", tok_vocab_size(P->tok));
    cJSON_AddNumberToObject(j, "dtype_code", P->dtype);
    cJSON_AddBoolToObject(j, "bos", P->add_bos && tok_adds_bos(P->tok));
    cJSON_AddBoolToObject(j, "append_eod", P->o.append_eod);
    if (P->o.append_eod) cJSON_AddNumberToObject(j, "eod_id", P->eod);
    cJSON_AddStringToObject(j, "json_key", P->o.key);
    static const char *modes[] = {"line", "paragraph", "file"};
    cJSON_AddStringToObject(j, "text_mode", modes[P->o.text_mode]);
    if (P->o.fla) {
        cJSON *f = cJSON_AddObjectToObject(j, "fla");
        cJSON_AddNumberToObject(f, "seq_length", (double)P->o.seq_length);
        cJSON_AddNumberToObject(f, "shards", (double)P->o.shards);
        cJSON_AddNumberToObject(f, "batch_size", (double)P->o.fla_batch);
        cJSON_AddBoolToObject(f, "shuffle_rows", P->o.fla_shuffle);
        if (P->o.fla_shuffle) cJSON_AddNumberToObject(f, "seed", (double)P->o.seed);
    }
    cJSON *c = cJSON_AddObjectToObject(j, "counts");
    cJSON_AddNumberToObject(c, "records", (double)P->st.records);
    if (P->o.fla) cJSON_AddNumberToObject(c, "rows", (double)P->nrows);
    cJSON_AddNumberToObject(c, "documents", (double)P->st.documents);
    cJSON_AddNumberToObject(c, P->o.fla ? "empty_rows_bos_only" : "empty_skipped", (double)P->st.empty);
    cJSON_AddNumberToObject(c, "bad_records", (double)P->st.bad);
    cJSON_AddNumberToObject(c, "invalid_utf8_documents", (double)P->st.bad_utf8_docs);
    cJSON_AddNumberToObject(c, "invalid_utf8_sequences", (double)P->st.bad_utf8_seqs);
    cJSON_AddNumberToObject(c, "sequences", (double)P->st.sequences);
    cJSON_AddNumberToObject(c, "tokens", (double)P->st.tokens);
    if (P->o.fla) cJSON_AddNumberToObject(c, "dropped_tokens", (double)P->st.dropped);
    cJSON_AddNumberToObject(c, "text_bytes", (double)P->st.text_bytes);
    cJSON *ins = cJSON_AddArrayToObject(j, "inputs");
    for (int i = 0; i < P->o.n_inputs; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", P->o.inputs[i]);
        cJSON_AddNumberToObject(e, "bytes", (double)P->in[i].size);
        cJSON_AddNumberToObject(e, "records", (double)P->in[i].records);
        cJSON_AddNumberToObject(e, "bad_records", (double)P->in[i].bad);
        if (!P->o.fla) cJSON_AddNumberToObject(e, "documents", (double)P->in[i].documents);
        cJSON_AddItemToArray(ins, e);
    }
    cJSON_AddStringToObject(j, "started", started);
    cJSON_AddNumberToObject(j, "duration_s", duration);
    cJSON_AddNumberToObject(j, "workers", P->o.workers);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n] = '\n', text[n + 1] = 0;
    char path[4096], err[ERR_LEN];
    snprintf(path, sizeof path, "%s.json", P->o.prefix);
    if (write_file_atomic(path, text, n + 1, err, sizeof err)) fail(P, "%s", err);
    free(text);
}

// ---------------------------------------------------------------------------------------------------------

int cmd_prepare(int argc, char **argv) {
    if (arg_is_help(argc, argv)) { fputs(usage_text, stdout); return 0; }
    Prep *P = xcalloc(1, sizeof *P);
    parse_opts(&P->o, argc, argv);
    P->t0 = now_sec();
    P->tty = isatty(2);
    P->phase = "";
    char started[32], err[ERR_LEN], dir[4096];
    time_t now = time(NULL);
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    // Check every input before the (slow) work starts.
    P->in = xcalloc((size_t)P->o.n_inputs, sizeof *P->in);
    for (int i = 0; i < P->o.n_inputs; i++) {
        TextInFormat f;
        TextInCodec c;
        struct stat st;
        if (textin_detect(P->o.inputs[i], &f, &c, err, sizeof err)) fail(P, "%s", err);
        if (stat(P->o.inputs[i], &st) || access(P->o.inputs[i], R_OK))
            fail(P, "cannot read input %s: %s", P->o.inputs[i], strerror(errno));
        if (S_ISDIR(st.st_mode)) fail(P, "input %s is a directory", P->o.inputs[i]);
        P->in[i].size = (uint64_t)st.st_size;
        P->in[i].parquet = f == TEXTIN_PARQUET;
        P->use_index |= P->o.fla && (P->o.fla_shuffle || !S_ISREG(st.st_mode));
        P->total_bytes += (uint64_t)st.st_size;
    }
    dir_of(P->o.prefix, dir, sizeof dir);
    if (mkdir_p(dir)) fail(P, "cannot create output directory %s: %s", dir, strerror(errno));
    // temp files of prepares that were killed (SIGKILL skips on_signal's cleanup)
    int stale = remove_stale_tmp(dir) + (P->o.tmp_dir ? remove_stale_tmp(P->o.tmp_dir) : 0);
    if (stale && !P->o.quiet) fprintf(stderr, "prepare: removed %d temp file%s of interrupted runs\n", stale, stale == 1 ? "" : "s");

    P->tok = tok_load(P->o.tokenizer, err, sizeof err);
    if (!P->tok) fail(P, "%s", err);
    P->add_bos = !P->o.no_bos;
    P->eod = tok_eos_id(P->tok);
    if (P->o.append_eod && P->eod < 0) fail(P, "--append-eod: tokenizer %s has no end-of-text token", P->o.tokenizer);
    P->dtype = tok_vocab_size(P->tok) >= 65500 ? 4 : 8; // Megatron's rule (spec data.md §2)

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL), sigaction(SIGHUP, &sa, NULL);

    P->w = indexed_writer_open(P->o.prefix, P->dtype, err, sizeof err);
    if (!P->w) fail(P, "%s", err);
    P->t_work = P->t_phase = P->t_last_progress = now_sec();

    if (P->o.fla) {
        fla_index_rows(P);
        pool_start(P);
        fla_tokenize(P);
        pool_stop(P);
    } else {
        pool_start(P);
        run_documents(P);
        pool_stop(P);
    }
    if (P->st.sequences == 0)
        fail(P, "no %s to write (%llu records: %llu bad, %llu empty)", P->o.fla ? "complete chunk" : "document",
             (unsigned long long)P->st.records, (unsigned long long)P->st.bad, (unsigned long long)P->st.empty);

    // A stale sidecar must not describe the new .bin/.idx; the new one is written after them.
    char side[4096];
    snprintf(side, sizeof side, "%s.json", P->o.prefix);
    unlink(side);
    IndexedWriter *w = P->w;
    P->w = NULL;
    if (indexed_writer_finish(w, err, sizeof err)) fail(P, "%s", err);
    cleanup_outputs(P); // the spill file
    double t_end = now_sec(), work = t_end - P->t_work;
    write_sidecar(P, argc, argv, started, t_end - P->t0);

    char toks[32], tps[32], speed[160];
    fmt_count(toks, sizeof toks, (double)P->st.tokens);
    fmt_count(tps, sizeof tps, work > 0 ? (double)P->st.tokens / work : 0);
    snprintf(speed, sizeof speed, "read %.1f MB (%.1f MB of text) in %.1f s: %.1f MB/s, %s tok/s",
             (double)P->total_bytes / 1e6, (double)P->st.text_bytes / 1e6, work,
             (double)P->total_bytes / 1e6 / (work > 0 ? work : 1), tps);
    if (P->o.fla)
        fprintf(stderr,
                "prepare: wrote %s.bin/.idx: %llu chunks of %ld = %s tokens from %llu rows (%llu batch-tail tokens "
                "dropped, %llu bad records skipped); %s\n",
                P->o.prefix, (unsigned long long)P->st.sequences, P->o.seq_length, toks, (unsigned long long)P->nrows,
                (unsigned long long)P->st.dropped, (unsigned long long)P->st.bad, speed);
    else
        fprintf(stderr,
                "prepare: wrote %s.bin/.idx: %llu documents, %s tokens (%llu empty skipped, %llu bad records skipped, "
                "%llu with invalid UTF-8); %s\n",
                P->o.prefix, (unsigned long long)P->st.documents, toks, (unsigned long long)P->st.empty,
                (unsigned long long)P->st.bad, (unsigned long long)P->st.bad_utf8_docs, speed);
    tok_free(P->tok);
    free(P->rows), free(P->bad_ordinals), free(P->in), free(P->o.inputs), free(P);
    return 0;
}
