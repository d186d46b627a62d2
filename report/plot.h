// plot.h: line charts as PNG and SVG (Cairo draws both from the same calls).
#pragma once
#include <stddef.h>

typedef struct {
    const char *label;
    const double *x, *y; // NAN y values are gaps
    size_t n;
    int dashed, markers; // dashed: validation / reference curves; markers: sparse series (validation points)
    int colour;          // palette index: a run's validation curve shares its training curve's colour
} PlotLine;

enum { PLOT_W = 960, PLOT_H = 540 };

// Writes <base>.png and <base>.svg (PLOT_W x PLOT_H). zoom: the y range covers the last 95% of the iterations
// (the first steps' loss and grad norm would flatten the rest; they leave the top). 0, or -1 with err (also
// when built without Cairo).
int plot_write(const char *base, const char *title, const char *xlabel, const char *ylabel, const PlotLine *lines,
               int nlines, int zoom, char *err, size_t errlen);
