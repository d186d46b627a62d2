// check.h: the C tests' assertion macro. CHECK counts every check and reports a failure with file:line and
// a message, then carries on, so one run lists every failure; main returns failures != 0.
#pragma once
#include <stdio.h>

static int failures, checks;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        checks++;                                                \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
        }                                                        \
    } while (0)
