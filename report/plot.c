// plot.c: axes, ticks, curves and a legend over Cairo; the same drawing goes to a PNG and an SVG surface.
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../util/common.h"

#ifndef GDN_CAIRO
int plot_write(const char *base, const char *title, const char *xlabel, const char *ylabel, const PlotLine *lines,
               int nlines, int zoom, char *err, size_t errlen) {
    return set_err(err, errlen, "this gdn was built without Cairo (libcairo2-dev): no plots");
}
#else
#include <cairo-svg.h>
#include <cairo.h>

static const double palette[][3] = {{0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17}, {1.0, 0.50, 0.05},
                                    {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.5, 0.5, 0.5}};

// A 1-2-5 tick step giving about `want` intervals over [lo, hi].
static double tick_step(double lo, double hi, int want) {
    double raw = (hi - lo) / want, p = pow(10, floor(log10(raw))), f = raw / p;
    return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}
static void fmt_tick(char *o, size_t n, double v, double step) {
    if (fabs(v) < step * 1e-6) v = 0;
    if (fabs(v) >= 1e5 || (fabs(v) < 1e-3 && v != 0)) snprintf(o, n, "%.2g", v);
    else snprintf(o, n, "%.*f", step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9), v);
}

static void draw(cairo_t *cr, const char *title, const char *xlabel, const char *ylabel, const PlotLine *L, int nl,
                 int zoom) {
    const double W = PLOT_W, H = PLOT_H, x0 = 90, x1 = W - 30, y0 = 60, y1 = H - 70; // plot area
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int l = 0; l < nl; l++)
        for (size_t i = 0; i < L[l].n; i++)
            if (isfinite(L[l].y[i])) {
                xmin = fmin(xmin, L[l].x[i]); xmax = fmax(xmax, L[l].x[i]);
                ymin = fmin(ymin, L[l].y[i]); ymax = fmax(ymax, L[l].y[i]);
            }
    if (zoom && isfinite(xmin)) {
        double cut = xmin + 0.05 * (xmax - xmin), top = -INFINITY;
        for (int l = 0; l < nl; l++)
            for (size_t i = 0; i < L[l].n; i++)
                if (isfinite(L[l].y[i]) && L[l].x[i] >= cut) top = fmax(top, L[l].y[i]);
        if (isfinite(top) && top > ymin) ymax = fmin(ymax, top + 0.15 * (top - ymin));
    }
    if (!isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
    if (xmax <= xmin) xmax = xmin + 1;
    if (ymax - ymin <= 1e-9 * fmax(fabs(ymin), fabs(ymax))) { // flat (a constant LR, up to rounding)
        double d = fabs(ymin) * 0.05 + 1e-12;
        ymin -= d; ymax += d;
    }
    double pad = (ymax - ymin) * 0.04;
    ymin -= pad; ymax += pad;
#define SX(v) (x0 + ((v) - xmin) / (xmax - xmin) * (x1 - x0))
#define SY(v) (y1 - ((v) - ymin) / (ymax - ymin) * (y1 - y0))
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 13);
    cairo_text_extents_t te;
    char s[64];
    // grid and tick labels
    cairo_set_line_width(cr, 1);
    double ys = tick_step(ymin, ymax, 6), xs = tick_step(xmin, xmax, 8);
    double ky = ceil(ymin / ys), kx = ceil(xmin / xs); // integer multiples: no float drift, no endless loop
    for (int k = 0; k < 40 && (ky + k) * ys <= ymax; k++) {
        double v = (ky + k) * ys;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, x0, SY(v)); cairo_line_to(cr, x1, SY(v)); cairo_stroke(cr);
        fmt_tick(s, sizeof s, v, ys);
        cairo_text_extents(cr, s, &te);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, x0 - 8 - te.width, SY(v) + te.height / 2); cairo_show_text(cr, s);
    }
    for (int k = 0; k < 40 && (kx + k) * xs <= xmax; k++) {
        double v = (kx + k) * xs;
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, SX(v), y0); cairo_line_to(cr, SX(v), y1); cairo_stroke(cr);
        fmt_tick(s, sizeof s, v, xs);
        cairo_text_extents(cr, s, &te);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        cairo_move_to(cr, SX(v) - te.width / 2, y1 + 20); cairo_show_text(cr, s);
    }
    cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
    cairo_stroke(cr);
    // titles
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 18);
    cairo_text_extents(cr, title, &te);
    cairo_move_to(cr, (W - te.width) / 2, 32); cairo_show_text(cr, title);
    cairo_set_font_size(cr, 14);
    cairo_text_extents(cr, xlabel, &te);
    cairo_move_to(cr, (x0 + x1 - te.width) / 2, H - 25); cairo_show_text(cr, xlabel);
    cairo_save(cr);
    cairo_text_extents(cr, ylabel, &te);
    cairo_move_to(cr, 24, (y0 + y1 + te.width) / 2);
    cairo_rotate(cr, -M_PI / 2);
    cairo_show_text(cr, ylabel);
    cairo_restore(cr);
    // curves, clipped to the plot area
    cairo_save(cr);
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
    cairo_clip(cr);
    for (int l = 0; l < nl; l++) {
        const double *c = palette[L[l].colour % 8];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        cairo_set_line_width(cr, 2);
        double dash[2] = {7, 4};
        cairo_set_dash(cr, dash, L[l].dashed ? 2 : 0, 0);
        int pen = 0;
        for (size_t i = 0; i < L[l].n; i++) {
            if (!isfinite(L[l].y[i])) { pen = 0; continue; }
            if (pen) cairo_line_to(cr, SX(L[l].x[i]), SY(L[l].y[i]));
            else cairo_move_to(cr, SX(L[l].x[i]), SY(L[l].y[i]));
            pen = 1;
        }
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        if (L[l].markers || L[l].n == 1)
            for (size_t i = 0; i < L[l].n; i++)
                if (isfinite(L[l].y[i])) {
                    cairo_arc(cr, SX(L[l].x[i]), SY(L[l].y[i]), 3.5, 0, 2 * M_PI);
                    cairo_fill(cr);
                }
    }
    cairo_restore(cr);
    // legend, top right
    cairo_set_font_size(cr, 12);
    double lw = 0;
    for (int l = 0; l < nl; l++) { cairo_text_extents(cr, L[l].label, &te); lw = fmax(lw, te.x_advance); }
    double lx = x1 - lw - 50, ly = y0 + 10;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
    cairo_rectangle(cr, lx - 8, ly - 4, lw + 52, 18.0 * nl + 8);
    cairo_fill(cr);
    for (int l = 0; l < nl; l++) {
        const double *c = palette[L[l].colour % 8];
        cairo_set_source_rgb(cr, c[0], c[1], c[2]);
        double dash[2] = {7, 4};
        cairo_set_dash(cr, dash, L[l].dashed ? 2 : 0, 0);
        cairo_move_to(cr, lx, ly + 18.0 * l + 6); cairo_line_to(cr, lx + 30, ly + 18.0 * l + 6); cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_move_to(cr, lx + 38, ly + 18.0 * l + 11); cairo_show_text(cr, L[l].label);
    }
#undef SX
#undef SY
}

int plot_write(const char *base, const char *title, const char *xlabel, const char *ylabel, const PlotLine *lines,
               int nlines, int zoom, char *err, size_t errlen) {
    char png[1300], svg[1300], tmp[1400];
    snprintf(png, sizeof png, "%s.png", base);
    snprintf(svg, sizeof svg, "%s.svg", base);
    // PNG: drawn in memory, written aside and renamed so a watching browser never reads half a file
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, PLOT_W, PLOT_H);
    cairo_t *cr = cairo_create(img);
    draw(cr, title, xlabel, ylabel, lines, nlines, zoom);
    cairo_destroy(cr);
    snprintf(tmp, sizeof tmp, "%s.tmp", png);
    cairo_status_t st = cairo_surface_write_to_png(img, tmp);
    cairo_surface_destroy(img);
    if (st != CAIRO_STATUS_SUCCESS || rename(tmp, png))
        return set_err(err, errlen, "%s: cannot write (%s)", png, cairo_status_to_string(st));
    snprintf(tmp, sizeof tmp, "%s.tmp", svg);
    cairo_surface_t *vs = cairo_svg_surface_create(tmp, PLOT_W, PLOT_H);
    cr = cairo_create(vs);
    draw(cr, title, xlabel, ylabel, lines, nlines, zoom);
    cairo_destroy(cr);
    cairo_surface_finish(vs);
    st = cairo_surface_status(vs);
    cairo_surface_destroy(vs);
    if (st != CAIRO_STATUS_SUCCESS || rename(tmp, svg))
        return set_err(err, errlen, "%s: cannot write (%s)", svg, cairo_status_to_string(st));
    return 0;
}
#endif
