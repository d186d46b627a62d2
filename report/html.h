// html.h: the report's one self-contained page (the table, the SVG plots inline, no external files).
#pragma once
#include <stddef.h>

#include "series.h"

// table_md: the Markdown table of report.c; plots: the outdir's .svg files exist; live: reload every 30 s.
int html_write(const char *outdir, const Series *runs, int nruns, const Series *ref, const char *table_md, int plots,
               int live, char *err, size_t errlen);
