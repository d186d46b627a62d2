// stale_tmp.h: removing the temp files ("<name>.tmp.<pid>", util/common.h's atomic writes) that a killed
// process left behind, so interrupted saves and prepares do not pile up forever.
#pragma once

// Removes every "<name>.tmp.<pid>" entry in dir (not recursive) whose pid is not a live process on this
// machine. Returns how many were removed (0 when dir cannot be read). A live pid's file is kept: it may be a
// concurrent writer. Pid reuse can keep a stale file for a while; it never removes a live writer's file.
int remove_stale_tmp(const char *dir);
