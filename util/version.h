// version.h: the build's `git describe` (generated into build/version.c by the Makefile).
#pragma once
extern const char gdn_version[];
