// stale_tmp.c: see stale_tmp.h.
#define _GNU_SOURCE
#include "stale_tmp.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

// The pid of a "<name>.tmp.<digits>" entry, or -1 when the name has another form.
static long tmp_pid(const char *name) {
    const char *t = strstr(name, ".tmp.");
    if (!t) return -1;
    for (const char *n; (n = strstr(t + 1, ".tmp.")); t = n) {} // the last ".tmp."
    const char *d = t + 5;
    if (!*d || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9 || t == name) return -1;
    return strtol(d, NULL, 10);
}

int remove_stale_tmp(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        long pid = tmp_pid(e->d_name);
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; // alive (or not ours to judge: EPERM)
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) removed++;
    }
    closedir(dp);
    return removed;
}
