// checkpoint.c: gdn.c training checkpoints (layout in checkpoint.h).
// Crash safety: every file is written to a temp name, fsynced and renamed; DONE is removed before a save
// starts and written only after the tensors are on disk, so an interrupted save never looks complete;
// latest_checkpointed_iteration.txt moves only after DONE exists.
#define _GNU_SOURCE
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/common.h"
#include "../util/version.h"
#include "../util/stale_tmp.h"
#include "safetensors.h"

#define CKPT_FORMAT "gdn.c-checkpoint"
#define CKPT_VERSION "1"

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void add_params(StWriter *w, const ParamLayout *pl, const float *buf, const char *suffix) {
    for (int i = 0; i < pl->ntensors; i++) {
        const TensorInfo *t = &pl->tensors[i];
        char name[160];
        snprintf(name, sizeof name, "%s%s", t->name, suffix);
        st_writer_add_f32_as(w, name, ST_F32, t->ndim, t->shape, buf + t->off);
    }
}

// Number of NaN/Inf values in x[0..n).
static size_t count_nonfinite(const float *x, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(x[i]);
    return bad;
}

// Temp files of killed saves: in the save directory and every iter_N below it (once per directory a process).
static void clean_save_dir(const char *save_dir) {
    static char done[1024];
    if (!strcmp(done, save_dir)) return;
    snprintf(done, sizeof done, "%s", save_dir);
    int n = remove_stale_tmp(save_dir);
    DIR *dp = opendir(save_dir);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        if (strncmp(e->d_name, "iter_", 5) != 0) continue;
        char sub[1300];
        snprintf(sub, sizeof sub, "%s/%s", save_dir, e->d_name);
        n += remove_stale_tmp(sub);
    }
    if (dp) closedir(dp);
    if (n) fprintf(stderr, "gdn: removed %d temp file%s of interrupted saves under %s\n", n, n == 1 ? "" : "s", save_dir);
}

int ckpt_save(const char *save_dir, const Config *cfg, const ParamLayout *pl, const float *params, const float *adam_m,
              const float *adam_v, const CkptState *st, char *err, size_t errlen) {
    if (!adam_m != !adam_v) return set_err(err, errlen, "ckpt_save: adam_m and adam_v must both be given or both NULL");
    if (st->iteration < 0) return set_err(err, errlen, "ckpt_save: negative iteration %" PRId64, st->iteration);
    // A diverged run must not leave a checkpoint that looks complete (and becomes `latest`).
    const float *arrays[3] = {params, adam_m, adam_v};
    static const char *const what[3] = {"weights", "AdamW exp_avg values", "AdamW exp_avg_sq values"};
    for (int a = 0; a < 3; a++) {
        size_t bad = arrays[a] ? count_nonfinite(arrays[a], pl->total) : 0;
        if (bad)
            return set_err(err, errlen,
                           "refusing to save iteration %" PRId64 ": %zu of %zu %s are NaN/Inf (the run diverged; "
                           "try a lower lr); the last complete checkpoint is kept",
                           st->iteration, bad, pl->total, what[a]);
    }
    if (mkdir_p(save_dir)) return set_err(err, errlen, "cannot create checkpoint directory %s: %s", save_dir, strerror(errno));
    clean_save_dir(save_dir);
    char dir[1024], path[1200], tmp[64];
    snprintf(dir, sizeof dir, "%s/iter_%07" PRId64, save_dir, st->iteration);
    if (mkdir_p(dir)) return set_err(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
    // An older save of the same iteration stops counting as complete before anything is overwritten.
    snprintf(path, sizeof path, "%s/DONE", dir);
    if (unlink(path) != 0 && errno != ENOENT)
        return set_err(err, errlen, "cannot remove %s: %s", path, strerror(errno));

    char *cfg_json = config_to_json(cfg);
    char rng[80];
    snprintf(rng, sizeof rng, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, st->rng_state[0],
             st->rng_state[1], st->rng_state[2], st->rng_state[3]);
    char params_count[32];
    snprintf(params_count, sizeof params_count, "%zu", pl->total);

    StWriter *w = st_writer_new();
    st_writer_meta(w, "format", CKPT_FORMAT);
    st_writer_meta(w, "version", CKPT_VERSION);
    st_writer_meta(w, "config", cfg_json);
    snprintf(tmp, sizeof tmp, "%" PRId64, st->iteration);
    st_writer_meta(w, "iteration", tmp);
    snprintf(tmp, sizeof tmp, "%" PRId64, st->consumed_samples);
    st_writer_meta(w, "consumed_samples", tmp);
    snprintf(tmp, sizeof tmp, "%" PRId64, st->consumed_valid_samples);
    st_writer_meta(w, "consumed_valid_samples", tmp);
    st_writer_meta(w, "rng", rng);
    st_writer_meta(w, "tokenizer_sha256", st->tokenizer_sha256);
    st_writer_meta(w, "parameters", params_count);
    st_writer_meta(w, "gdn_version", gdn_version); // the build that wrote it (git describe)
    add_params(w, pl, params, "");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = st_writer_save(w, path, err, errlen);
    st_writer_free(w);
    free(cfg_json);
    if (rc) return -1;

    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    if (adam_m) {
        w = st_writer_new();
        st_writer_meta(w, "format", CKPT_FORMAT "-optimizer");
        snprintf(tmp, sizeof tmp, "%" PRId64, st->iteration);
        st_writer_meta(w, "step", tmp);
        add_params(w, pl, adam_m, ".exp_avg");
        add_params(w, pl, adam_v, ".exp_avg_sq");
        rc = st_writer_save(w, path, err, errlen);
        st_writer_free(w);
        if (rc) return -1;
    } else if (unlink(path) != 0 && errno != ENOENT) { // a weights-only save must not inherit stale moments
        return set_err(err, errlen, "cannot remove stale %s: %s", path, strerror(errno));
    }

    snprintf(path, sizeof path, "%s/DONE", dir);
    snprintf(tmp, sizeof tmp, "iteration %" PRId64 "\n", st->iteration);
    if (write_file_atomic(path, tmp, strlen(tmp), err, errlen)) return -1;
    snprintf(path, sizeof path, "%s/latest_checkpointed_iteration.txt", save_dir);
    snprintf(tmp, sizeof tmp, "%" PRId64, st->iteration); // Megatron writes the bare number
    return write_file_atomic(path, tmp, strlen(tmp), err, errlen);
}

int ckpt_resolve(const char *path, char *iter_dir, size_t n, char *err, size_t errlen) {
    char probe[1200];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (!is_dir(path)) {
        if (!file_exists(path)) return set_err(err, errlen, "checkpoint %s does not exist", path);
        if (strcmp(base, "model.safetensors") != 0)
            return set_err(err, errlen,
                           "%s: expected a checkpoint directory, an iter_N directory or its model.safetensors", path);
        size_t dl = (size_t)(base - path);
        if (dl == 0)
            snprintf(iter_dir, n, ".");
        else
            snprintf(iter_dir, n, "%.*s", (int)(dl > 1 ? dl - 1 : 1), path);
    } else {
        snprintf(probe, sizeof probe, "%s/latest_checkpointed_iteration.txt", path);
        if (file_exists(probe)) {
            size_t len;
            char *txt = read_file(probe, &len, err, errlen);
            if (!txt) return -1;
            char *end;
            errno = 0;
            long long it = strtoll(txt, &end, 10);
            while (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t') end++;
            int bad = errno || end == txt || *end || it < 0;
            free(txt);
            if (bad) return set_err(err, errlen, "%s: expected an iteration number", probe);
            snprintf(iter_dir, n, "%s/iter_%07lld", path, it);
            if (!is_dir(iter_dir))
                return set_err(err, errlen, "%s names iteration %lld but %s does not exist", probe, it, iter_dir);
        } else {
            snprintf(probe, sizeof probe, "%s/model.safetensors", path);
            if (!file_exists(probe)) {
                snprintf(probe, sizeof probe, "%s/mp_rank_00", path);
                if (is_dir(probe))
                    return set_err(err, errlen,
                                   "%s is a Megatron checkpoint; import it with gdn convert --from-megatron", path);
                return set_err(err, errlen,
                               "%s is not a checkpoint (no latest_checkpointed_iteration.txt, no model.safetensors)",
                               path);
            }
            snprintf(iter_dir, n, "%s", path);
        }
    }
    snprintf(probe, sizeof probe, "%s/DONE", iter_dir);
    if (!file_exists(probe)) {
        snprintf(probe, sizeof probe, "%s/config.json", iter_dir);
        if (file_exists(probe))
            return set_err(err, errlen,
                           "%s is an FLA HuggingFace directory, not a gdn.c checkpoint; import it with "
                           "gdn convert --from-hf %s --save DIR",
                           iter_dir, iter_dir);
        return set_err(err, errlen,
                       "incomplete checkpoint: %s has no DONE marker (the save was interrupted); "
                       "use an earlier iter_N directory",
                       iter_dir);
    }
    return 0;
}

// Opens <iter_dir>/model.safetensors and checks it is ours.
static int open_model(const char *iter_dir, StFile *f, char *err, size_t errlen) {
    char path[1200];
    snprintf(path, sizeof path, "%s/model.safetensors", iter_dir);
    if (st_open(f, path, err, errlen)) return -1;
    const char *fmt = st_meta(f, "format");
    // the message is written before st_close: fmt and ver point into the file's header, freed by it
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0) {
        set_err(err, errlen, "%s: __metadata__ format is '%s', expected '" CKPT_FORMAT "'", path, fmt ? fmt : "(none)");
        st_close(f);
        return -1;
    }
    const char *ver = st_meta(f, "version");
    if (!ver || strcmp(ver, CKPT_VERSION) != 0) {
        set_err(err, errlen, "%s: checkpoint version '%s' (this build reads version " CKPT_VERSION ")", path,
                ver ? ver : "(none)");
        st_close(f);
        return -1;
    }
    return 0;
}

int ckpt_read_config(const char *iter_dir, Config *cfg_out, char *err, size_t errlen) {
    StFile f;
    if (open_model(iter_dir, &f, err, errlen)) return -1;
    const char *js = st_meta(&f, "config");
    int rc = 0;
    if (!js)
        rc = set_err(err, errlen, "%s/model.safetensors: no config in __metadata__", iter_dir);
    else if (cfg_out) {
        char e2[ERR_LEN];
        config_defaults(cfg_out);
        if (config_from_json(cfg_out, js, e2, sizeof e2))
            rc = set_err(err, errlen, "%s/model.safetensors: %s", iter_dir, e2);
    }
    st_close(&f);
    return rc;
}

static void shape_str(char *out, size_t n, int ndim, const int64_t *shape) {
    int o = snprintf(out, n, "[");
    for (int i = 0; i < ndim && o < (int)n; i++)
        o += snprintf(out + o, n - (size_t)o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < (int)n) snprintf(out + o, n - (size_t)o, "]");
}

// Copies every tensor of pl (with `suffix`) from f into buf; extra tensors in f are errors.
static int load_tensors(const StFile *f, const char *path, const ParamLayout *pl, const char *const *suffixes,
                        float *const *bufs, int nbufs, char *err, size_t errlen) {
    for (int b = 0; b < nbufs; b++)
        for (int i = 0; i < pl->ntensors; i++) {
            const TensorInfo *ti = &pl->tensors[i];
            char name[160], want[64], got[64];
            snprintf(name, sizeof name, "%s%s", ti->name, suffixes[b]);
            const StTensor *t = st_find(f, name);
            if (!t) return set_err(err, errlen, "%s: tensor '%s' missing", path, name);
            shape_str(want, sizeof want, ti->ndim, ti->shape);
            shape_str(got, sizeof got, t->ndim, t->shape);
            if (t->dtype != ST_F32)
                return set_err(err, errlen, "%s: tensor '%s' is %s, expected F32", path, name, st_dtype_name(t->dtype));
            if (strcmp(want, got) != 0)
                return set_err(err, errlen, "%s: tensor '%s' has shape %s, expected %s (does the config match?)", path,
                               name, got, want);
            memcpy(bufs[b] + ti->off, t->data, ti->numel * sizeof(float));
        }
    if (f->ntensors != pl->ntensors * nbufs)
        for (int i = 0; i < f->ntensors; i++) {
            const char *nm = f->tensors[i].name;
            int known = 0;
            for (int b = 0; b < nbufs && !known; b++) {
                size_t sl = strlen(suffixes[b]), nl = strlen(nm);
                if (nl < sl || strcmp(nm + nl - sl, suffixes[b]) != 0) continue;
                char base[160];
                snprintf(base, sizeof base, "%.*s", (int)(nl - sl), nm);
                known = params_find(pl, base) != NULL;
            }
            if (!known)
                return set_err(err, errlen, "%s: unexpected tensor '%s' (not in this model's tensor table)", path, nm);
        }
    return 0;
}

static int parse_i64(const StFile *f, const char *key, int64_t *out, const char *path, char *err, size_t errlen) {
    const char *v = st_meta(f, key);
    if (!v) return set_err(err, errlen, "%s: __metadata__ lacks '%s'", path, key);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return set_err(err, errlen, "%s: __metadata__ '%s' = '%s' is not an integer", path, key, v);
    *out = x;
    return 0;
}

int ckpt_load(const char *iter_dir, const ParamLayout *pl, float *params, float *adam_m, float *adam_v, int *has_optim,
              CkptState *st, char *err, size_t errlen) {
    char path[1200];
    snprintf(path, sizeof path, "%s/DONE", iter_dir);
    if (!file_exists(path))
        return set_err(err, errlen, "incomplete checkpoint: %s has no DONE marker (the save was interrupted)",
                       iter_dir);
    StFile f;
    if (open_model(iter_dir, &f, err, errlen)) return -1;
    snprintf(path, sizeof path, "%s/model.safetensors", iter_dir);
    const char *sfx[2] = {"", ""};
    float *bufs[2] = {params, NULL};
    int rc = load_tensors(&f, path, pl, sfx, bufs, 1, err, errlen);
    if (!rc && st) {
        memset(st, 0, sizeof *st);
        rc = parse_i64(&f, "iteration", &st->iteration, path, err, errlen);
        if (!rc) rc = parse_i64(&f, "consumed_samples", &st->consumed_samples, path, err, errlen);
        st->consumed_valid_samples = -1; // checkpoints before validation existed have none
        if (!rc && st_meta(&f, "consumed_valid_samples"))
            rc = parse_i64(&f, "consumed_valid_samples", &st->consumed_valid_samples, path, err, errlen);
        const char *rng = st_meta(&f, "rng"), *tok = st_meta(&f, "tokenizer_sha256");
        if (!rc && (!rng || strlen(rng) != 64 || strspn(rng, "0123456789abcdef") != 64))
            rc = set_err(err, errlen, "%s: __metadata__ 'rng' must be 64 hex digits", path);
        for (int i = 0; !rc && i < 4; i++) {
            char part[17];
            memcpy(part, rng + 16 * i, 16);
            part[16] = 0;
            st->rng_state[i] = strtoull(part, NULL, 16);
        }
        if (!rc) snprintf(st->tokenizer_sha256, sizeof st->tokenizer_sha256, "%s", tok ? tok : "");
    }
    st_close(&f);
    if (rc) return -1;

    snprintf(path, sizeof path, "%s/optimizer.safetensors", iter_dir);
    int found = file_exists(path);
    if (has_optim) *has_optim = found;
    if (found && adam_m && adam_v) {
        if (st_open(&f, path, err, errlen)) return -1;
        const char *osfx[2] = {".exp_avg", ".exp_avg_sq"};
        float *obufs[2] = {adam_m, adam_v};
        rc = load_tensors(&f, path, pl, osfx, obufs, 2, err, errlen);
        st_close(&f);
        if (rc) return -1;
    }
    return 0;
}
