// html.c: index.html of `gdn report`: one file a browser opens from disk or a run's watcher reloads.
#include "html.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../util/common.h"
#include "../util/version.h"

static void esc(Buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n && s[i]; i++) {
        switch (s[i]) {
        case '<': buf_puts(b, "&lt;"); break;
        case '>': buf_puts(b, "&gt;"); break;
        case '&': buf_puts(b, "&amp;"); break;
        case '"': buf_puts(b, "&quot;"); break;
        case '`': break; // Markdown code marks
        default: buf_put(b, &s[i], 1);
        }
    }
}

static void base64(Buf *b, const unsigned char *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? p[i + 1] : 0) << 8 | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {A[v >> 18], A[v >> 12 & 63], i + 1 < n ? A[v >> 6 & 63] : '=', i + 2 < n ? A[v & 63] : '='};
        buf_put(b, q, 4);
    }
}

// Markdown tables ("| a | b |" rows, a "|---|" rule after the header) and paragraphs, nothing more.
static void md_to_html(Buf *b, const char *md) {
    int in_table = 0, header = 0;
    for (const char *line = md; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n && line[0] == '|') {
            if (!in_table) { buf_puts(b, "<table>\n"); in_table = 1; header = 1; }
            if (n > 1 && (line[1] == '-' || line[2] == '-' || line[1] == ':')) { header = 0; goto next; }
            buf_puts(b, "<tr>");
            for (const char *c = line + 1; c < line + n;) {
                const char *bar = memchr(c, '|', (size_t)(line + n - c));
                if (!bar) break;
                while (c < bar && *c == ' ') c++;
                const char *e = bar;
                while (e > c && e[-1] == ' ') e--;
                buf_puts(b, header ? "<th>" : "<td>");
                esc(b, c, (size_t)(e - c));
                buf_puts(b, header ? "</th>" : "</td>");
                c = bar + 1;
            }
            buf_puts(b, "</tr>\n");
        } else {
            if (in_table) { buf_puts(b, "</table>\n"); in_table = 0; }
            if (n) { buf_puts(b, "<p>"); esc(b, line, n); buf_puts(b, "</p>\n"); }
        }
    next:
        line += n + (nl != NULL);
    }
    if (in_table) buf_puts(b, "</table>\n");
}

int html_write(const char *outdir, const Series *runs, int nruns, const Series *ref, const char *table_md, int plots,
               int live, char *err, size_t errlen) {
    Buf b = {0};
    char when[64];
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    buf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    if (live) buf_puts(&b, "<meta http-equiv=\"refresh\" content=\"30\">\n");
    buf_puts(&b, "<title>gdn report</title>\n<style>\n"
                 "body{font-family:'DejaVu Sans',sans-serif;margin:24px;color:#222;background:#fff}\n"
                 "table{border-collapse:collapse;margin:12px 0}td,th{border:1px solid #bbb;padding:4px 10px;text-align:right}\n"
                 "th{background:#eef}td:first-child{text-align:left}.plots img{width:48%;min-width:480px;height:auto}\n"
                 ".meta{color:#666;font-size:90%}\n</style></head><body>\n<h1>gdn report</h1>\n<p class=\"meta\">");
    buf_printf(&b, "written %s by gdn %s%s</p>\n<ul>\n", when, gdn_version, live ? " (reloads every 30 s)" : "");
    for (int r = 0; r <= nruns; r++) {
        const Series *s = r < nruns ? &runs[r] : ref;
        if (!s) continue;
        buf_puts(&b, "<li>");
        esc(&b, s->name, sizeof s->name);
        buf_printf(&b, " &mdash; %s%s, %zu logged iterations (%ld&ndash;%ld)", s->kind, r == nruns ? ", reference" : "", s->n,
                   s->p[0].it, s->p[s->n - 1].it);
        if (s->version[0]) { buf_puts(&b, ", gdn "); esc(&b, s->version, sizeof s->version); }
        buf_puts(&b, "</li>\n");
    }
    buf_puts(&b, "</ul>\n");
    md_to_html(&b, table_md);
    if (plots) {
        buf_puts(&b, "<div class=\"plots\">\n");
        static const char *names[] = {"loss", "lr", "grad_norm", "throughput"};
        for (int i = 0; i < 4; i++) { // data URIs: one file, and each SVG keeps its own glyph ids
            char path[1200];
            snprintf(path, sizeof path, "%s/%s.svg", outdir, names[i]);
            size_t len;
            char *svg = read_file(path, &len, err, errlen);
            if (!svg) { buf_free(&b); return -1; }
            buf_printf(&b, "<img alt=\"%s\" src=\"data:image/svg+xml;base64,", names[i]);
            base64(&b, (const unsigned char *)svg, len);
            buf_puts(&b, "\">\n");
            free(svg);
        }
        buf_puts(&b, "</div>\n");
    } else buf_puts(&b, "<p>No plots: this gdn was built without Cairo.</p>\n");
    buf_puts(&b, "</body></html>\n");
    char path[1200];
    snprintf(path, sizeof path, "%s/index.html", outdir);
    int rc = write_file_atomic(path, b.p, b.n, err, errlen);
    buf_free(&b);
    return rc;
}
