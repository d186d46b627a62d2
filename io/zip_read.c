// zip_read.c: the zip archive reader behind torch.save files (torch_pickle.h): central directory, zip64,
// stored and deflated entries. Every length and offset read from the file is checked against the mapping.
#define _GNU_SOURCE
#include "torch_pickle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../util/common.h"
#include "torch_pickle_internal.h"

// =====================================================================================================
// zip reader

void zip_close(ZipFile *z) {
    if (!z) return;
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    if (z->map && z->size) munmap(z->map, z->size);
    memset(z, 0, sizeof *z);
}

// Reads the zip64 extended-information extra field for the fields the fixed header left at 0xFFFFFFFF.
static int zip64_extra(const uint8_t *x, size_t xlen, uint64_t *usize, uint64_t *csize, uint64_t *lho) {
    size_t i = 0;
    while (i + 4 <= xlen) {
        uint16_t id = rd16(x + i), len = rd16(x + i + 2);
        if (i + 4 + len > xlen) return -1;
        if (id == 0x0001) {
            const uint8_t *f = x + i + 4;
            size_t k = 0;
            uint64_t *want[3] = {usize, csize, lho};
            for (int j = 0; j < 3; j++) {
                if (*want[j] != 0xFFFFFFFFu) continue;
                if (k + 8 > len) return -1;
                *want[j] = rd64(f + k);
                k += 8;
            }
            return 0;
        }
        i += 4 + (size_t)len;
    }
    return (*usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *lho == 0xFFFFFFFFu) ? -1 : 0;
}

int zip_open(ZipFile *z, const char *path, char *err, size_t errlen) {
    memset(z, 0, sizeof *z);
    const uint8_t *m;
    size_t size;
    if (map_file_ro(path, &m, &size, err, errlen)) return -1;
    if (size < 22) {
        if (m) munmap((void *)m, size);
        return set_err(err, errlen, "%s: %zu bytes is too short for a zip archive (truncated?)", path, size);
    }
    z->map = (uint8_t *)m;
    z->size = size;
    z->path = xstrdup(path);
    const uint8_t *b = z->map;

    // End of central directory: the last 22 bytes unless there is an archive comment (up to 64 KB).
    size_t eocd = (size_t)-1;
    size_t lo = size > 22 + 65535 ? size - 22 - 65535 : 0;
    for (size_t i = size - 22 + 1; i-- > lo;)
        if (rd32(b + i) == 0x06054b50u && i + 22 + rd16(b + i + 20) == size) {
            eocd = i;
            break;
        }
    if (eocd == (size_t)-1) {
        if (size >= 2 && b[0] == 0x80 && b[1] <= 5)
            set_err(err, errlen,
                    "%s: a bare pickle (legacy torch.save format), not a zip archive; re-save with torch >= 1.6", path);
        else
            set_err(err, errlen, "%s: no zip end-of-central-directory record (not a torch.save file, or truncated)",
                    path);
        zip_close(z);
        return -1;
    }
    uint64_t count = rd16(b + eocd + 10), cd_size = rd32(b + eocd + 12), cd_off = rd32(b + eocd + 16);
    if (eocd >= 20 && rd32(b + eocd - 20) == 0x07064b50u) { // zip64 locator precedes the EOCD
        uint64_t z64 = rd64(b + eocd - 20 + 8);
        if (z64 > size - 56 || rd32(b + z64) != 0x06064b50u) {
            set_err(err, errlen, "%s: bad zip64 end-of-central-directory record", path);
            zip_close(z);
            return -1;
        }
        count = rd64(b + z64 + 32);
        cd_size = rd64(b + z64 + 40);
        cd_off = rd64(b + z64 + 48);
    }
    if (cd_off > size || cd_size > size - cd_off || count > cd_size / 46) {
        set_err(err, errlen,
                "%s: central directory (offset %llu, %llu bytes, %llu entries) outside the file (truncated?)", path,
                (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)count);
        zip_close(z);
        return -1;
    }
    z->e = xcalloc(count ? (size_t)count : 1, sizeof(ZipEntry));
    size_t p = (size_t)cd_off, end = (size_t)(cd_off + cd_size);
    for (uint64_t k = 0; k < count; k++) {
        if (p + 46 > end || rd32(b + p) != 0x02014b50u) {
            set_err(err, errlen, "%s: corrupt central directory entry %llu at byte %zu", path, (unsigned long long)k,
                    p);
            zip_close(z);
            return -1;
        }
        uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
        uint32_t crc = rd32(b + p + 16);
        uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24), lho = rd32(b + p + 42);
        size_t nlen = rd16(b + p + 28), xlen = rd16(b + p + 30), clen = rd16(b + p + 32);
        if (p + 46 + nlen + xlen + clen > end) {
            set_err(err, errlen, "%s: central directory entry %llu runs past the directory", path,
                    (unsigned long long)k);
            zip_close(z);
            return -1;
        }
        ZipEntry *e = &z->e[z->n++];
        e->name = xmalloc(nlen + 1);
        memcpy(e->name, b + p + 46, nlen);
        e->name[nlen] = 0;
        if (zip64_extra(b + p + 46 + nlen, xlen, &usize, &csize, &lho)) {
            set_err(err, errlen, "%s: entry '%s': bad zip64 extra field", path, e->name);
            zip_close(z);
            return -1;
        }
        if (flags & 1) {
            set_err(err, errlen, "%s: entry '%s' is encrypted", path, e->name);
            zip_close(z);
            return -1;
        }
        if (method != 0 && method != 8) {
            set_err(err, errlen, "%s: entry '%s' uses compression method %u (only stored and deflate are supported)",
                    path, e->name, method);
            zip_close(z);
            return -1;
        }
        if (lho > size - 30 || rd32(b + lho) != 0x04034b50u) {
            set_err(err, errlen, "%s: entry '%s': local header at byte %llu missing (truncated?)", path, e->name,
                    (unsigned long long)lho);
            zip_close(z);
            return -1;
        }
        uint64_t data = lho + 30 + rd16(b + lho + 26) + rd16(b + lho + 28);
        if (data > size || csize > size - data) {
            set_err(err, errlen,
                    "%s: entry '%s': %llu bytes at byte %llu run past the end of the file (%zu bytes; truncated?)",
                    path, e->name, (unsigned long long)csize, (unsigned long long)data, size);
            zip_close(z);
            return -1;
        }
        if (method == 0 && csize != usize) {
            set_err(err, errlen, "%s: stored entry '%s' has different compressed and uncompressed sizes", path,
                    e->name);
            zip_close(z);
            return -1;
        }
        e->data_off = data;
        e->csize = csize;
        e->usize = usize;
        e->crc = crc;
        e->method = method;
        p += 46 + nlen + xlen + clen;
    }
    return 0;
}

const ZipEntry *zip_find(const ZipFile *z, const char *name) {
    for (int i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name)) return &z->e[i];
    return NULL;
}

int zip_data(ZipFile *z, const ZipEntry *ce, const uint8_t **data, int *owned, char *err, size_t errlen) {
    ZipEntry *e = (ZipEntry *)ce;
    *owned = 0;
    *data = NULL;
    if (e->method == 0) {
        *data = z->map + e->data_off;
    } else {
        if (e->usize / 1032 > e->csize + 64) // deflate cannot expand more than ~1032:1
            return set_err(err, errlen, "%s: entry '%s' claims %llu bytes from %llu compressed (corrupt)", z->path,
                           e->name, (unsigned long long)e->usize, (unsigned long long)e->csize);
        uint8_t *out = xmalloc((size_t)e->usize);
        z_stream s;
        memset(&s, 0, sizeof s);
        if (inflateInit2(&s, -15) != Z_OK) {
            free(out);
            return set_err(err, errlen, "zlib init failed");
        }
        uint64_t in_left = e->csize, out_done = 0;
        const uint8_t *in = z->map + e->data_off;
        int zr = Z_OK;
        while (zr == Z_OK) { // chunked: z_stream counts are 32-bit
            if (!s.avail_in && in_left) {
                s.next_in = (uint8_t *)in;
                s.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
                in += s.avail_in;
                in_left -= s.avail_in;
            }
            if (!s.avail_out) {
                uint64_t left = e->usize - out_done;
                s.next_out = out + out_done;
                s.avail_out = (uInt)(left < (1u << 30) ? left : (1u << 30));
                out_done += s.avail_out;
                if (!s.avail_out) {
                    zr = Z_BUF_ERROR;
                    break;
                }
            }
            zr = inflate(&s, Z_NO_FLUSH);
        }
        uint64_t total = s.total_out;
        inflateEnd(&s);
        if (zr != Z_STREAM_END || total != e->usize) {
            free(out);
            return set_err(err, errlen, "%s: entry '%s': corrupt deflate data", z->path, e->name);
        }
        *data = out;
        *owned = 1;
    }
    if (!e->crc_checked) {
        uLong c = crc32(0L, Z_NULL, 0);
        for (uint64_t i = 0; i < e->usize; i += 1u << 30) {
            uint64_t m = e->usize - i < (1u << 30) ? e->usize - i : (1u << 30);
            c = crc32(c, *data + i, (uInt)m);
        }
        if ((uint32_t)c != e->crc) {
            if (*owned) free((void *)*data);
            *data = NULL;
            return set_err(err, errlen, "%s: entry '%s': CRC mismatch (file corrupt)", z->path, e->name);
        }
        e->crc_checked = 1;
    }
    return 0;
}

