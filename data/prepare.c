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
// This file: options, signals and errors, progress, the sidecar and the command; the units and worker pool are
// in prepare_units.c, the passes of each layout in prepare_layouts.c (shared state: prepare_internal.h).
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
#include "data/prepare_internal.h"
#include "data/textin.h"
#include "data/tokenizer.h"
#include "util/common.h"
#include "util/stale_tmp.h"

#define MAX_SHOWN_PROBLEMS 20 // bad records / invalid UTF-8 reported one by one, then only counted

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

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }
int prep_signal_pending(void) { return g_signal != 0; }

static void cleanup_outputs(Prep *P) {
    if (P->w) indexed_writer_abort(P->w), P->w = NULL;
    if (P->spill) fclose(P->spill), P->spill = NULL;
    if (P->spill_path) unlink(P->spill_path), free(P->spill_path), P->spill_path = NULL;
}

// Removes everything half-written, then exits with one line naming the problem.
__attribute__((noreturn, format(printf, 2, 3))) void prep_fail(Prep *P, const char *fmt, ...) {
    prep_check_signal(P); // a read cut short by a signal surfaces here as an error: report the signal instead
    char msg[2 * ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
    cleanup_outputs(P);
    die("prepare: %s", msg);
}

void prep_check_signal(Prep *P) {
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
void prep_progress(Prep *P, uint64_t bytes_now, uint64_t rows_done, int force) {
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

void prep_progress_end(Prep *P) {
    if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
}

// A problem with one record: reported (the first few), counted, fatal under --strict.
// skipped: the record is left out (else it is kept, e.g. invalid UTF-8 encoded as U+FFFD).
__attribute__((format(printf, 5, 6))) void prep_record_problem(Prep *P, uint32_t input, uint64_t line, int skipped,
                                                                 const char *fmt, ...) {
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *path = P->o.inputs[input];
    int pq = P->in[input].parquet;
    if (P->o.strict) prep_fail(P, "%s:%s%llu: %s (--strict)", path, pq ? "row " : "", (unsigned long long)line, msg);
    if (P->st.shown < MAX_SHOWN_PROBLEMS) {
        if (P->tty && !P->o.quiet) fputs("\r\033[K", stderr);
        fprintf(stderr, "gdn: prepare: %s:%s%llu: %s%s\n", path, pq ? "row " : "", (unsigned long long)line, msg,
                skipped ? "; skipped" : "");
    } else if (P->st.shown == MAX_SHOWN_PROBLEMS) {
        fprintf(stderr, "gdn: prepare: further problems are counted but not shown\n");
    }
    P->st.shown++;
}

void prep_dir_of(const char *path, char *out, size_t n) {
    const char *sl = strrchr(path, '/');
    if (!sl) snprintf(out, n, ".");
    else if (sl == path) snprintf(out, n, "/");
    else snprintf(out, n, "%.*s", (int)(sl - path), path);
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
    if (write_file_atomic(path, text, n + 1, err, sizeof err)) prep_fail(P, "%s", err);
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
        if (textin_detect(P->o.inputs[i], &f, &c, err, sizeof err)) prep_fail(P, "%s", err);
        if (stat(P->o.inputs[i], &st) || access(P->o.inputs[i], R_OK))
            prep_fail(P, "cannot read input %s: %s", P->o.inputs[i], strerror(errno));
        if (S_ISDIR(st.st_mode)) prep_fail(P, "input %s is a directory", P->o.inputs[i]);
        P->in[i].size = (uint64_t)st.st_size;
        P->in[i].parquet = f == TEXTIN_PARQUET;
        P->use_index |= P->o.fla && (P->o.fla_shuffle || !S_ISREG(st.st_mode));
        P->total_bytes += (uint64_t)st.st_size;
    }
    prep_dir_of(P->o.prefix, dir, sizeof dir);
    if (mkdir_p(dir)) prep_fail(P, "cannot create output directory %s: %s", dir, strerror(errno));
    // temp files of prepares that were killed (SIGKILL skips on_signal's cleanup)
    int stale = remove_stale_tmp(dir) + (P->o.tmp_dir ? remove_stale_tmp(P->o.tmp_dir) : 0);
    if (stale && !P->o.quiet) fprintf(stderr, "prepare: removed %d temp file%s of interrupted runs\n", stale, stale == 1 ? "" : "s");

    P->tok = tok_load(P->o.tokenizer, err, sizeof err);
    if (!P->tok) prep_fail(P, "%s", err);
    P->add_bos = !P->o.no_bos;
    P->eod = tok_eos_id(P->tok);
    if (P->o.append_eod && P->eod < 0) prep_fail(P, "--append-eod: tokenizer %s has no end-of-text token", P->o.tokenizer);
    P->dtype = tok_vocab_size(P->tok) >= 65500 ? 4 : 8; // Megatron's rule (spec data.md §2)

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL), sigaction(SIGTERM, &sa, NULL), sigaction(SIGHUP, &sa, NULL);

    P->w = indexed_writer_open(P->o.prefix, P->dtype, err, sizeof err);
    if (!P->w) prep_fail(P, "%s", err);
    P->t_work = P->t_phase = P->t_last_progress = now_sec();

    if (P->o.fla) {
        prep_fla_index_rows(P);
        prep_pool_start(P);
        prep_fla_tokenize(P);
        prep_pool_stop(P);
    } else {
        prep_pool_start(P);
        prep_run_documents(P);
        prep_pool_stop(P);
    }
    if (P->st.sequences == 0)
        prep_fail(P, "no %s to write (%llu records: %llu bad, %llu empty)", P->o.fla ? "complete chunk" : "document",
             (unsigned long long)P->st.records, (unsigned long long)P->st.bad, (unsigned long long)P->st.empty);

    // A stale sidecar must not describe the new .bin/.idx; the new one is written after them.
    char side[4096];
    snprintf(side, sizeof side, "%s.json", P->o.prefix);
    unlink(side);
    IndexedWriter *w = P->w;
    P->w = NULL;
    if (indexed_writer_finish(w, err, sizeof err)) prep_fail(P, "%s", err);
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

