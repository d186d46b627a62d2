#include "schedule.h"

#include <math.h>
#include <string.h>

double lr_at(const Config *c, long done) {
    double max_lr = c->lr, min_lr = c->min_lr;
    long warm = c->lr_warmup_iters, decay = c->lr_decay_iters > 0 ? c->lr_decay_iters : c->train_iters;
    if (warm > 0 && done <= warm) return max_lr * (double)done / (double)warm;
    if (!strcmp(c->lr_decay_style, "constant")) return max_lr;
    if (done > decay) return min_lr;
    double ratio = (double)(done - warm) / (double)(decay - warm > 0 ? decay - warm : 1);
    double coeff = !strcmp(c->lr_decay_style, "linear") ? 1.0 - ratio : 0.5 * (cos(M_PI * ratio) + 1.0);
    return min_lr + coeff * (max_lr - min_lr);
}
