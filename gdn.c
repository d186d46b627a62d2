// gdn.c: Gated DeltaNet language-model pretraining in C. One binary, many subcommands.
// Each subcommand lives with its concern (data/, train/, io/, eval/, infer/) and is registered here.
#include <stdio.h>
#include <string.h>

#include "util/common.h"
#include "util/version.h"

typedef int (*CmdFn)(int argc, char **argv);
// Weak so that the binary links while a subsystem is absent; a missing command says so.
#define CMD(name) __attribute__((weak)) int name(int argc, char **argv);
CMD(cmd_prepare) CMD(cmd_tokenize) CMD(cmd_dataset) CMD(cmd_train) CMD(cmd_score) CMD(cmd_convert)
CMD(cmd_verify) CMD(cmd_generate) CMD(cmd_eval) CMD(cmd_bench) CMD(cmd_params) CMD(cmd_logits) CMD(cmd_report)
#undef CMD

static const struct { const char *name, *help; } commands[] = {
    {"prepare", "raw text (JSONL, text, Parquet) -> Megatron .bin/.idx token files"},
    {"tokenize", "text on stdin -> token ids (or --decode ids -> text)"},
    {"dataset", "inspect a token dataset: info | show"},
    {"train", "train a GDN model (CPU fp32 or CUDA bf16)"},
    {"score", "validation loss and perplexity of a checkpoint on a token dataset"},
    {"convert", "checkpoints <-> FLA HuggingFace format; Megatron checkpoints in"},
    {"verify", "sanity prompts: loss, top-5, greedy text; PASS/FAIL"},
    {"generate", "sample text with constant-memory recurrent decoding"},
    {"eval", "lm-eval-harness compatible benchmarks on local task files"},
    {"bench", "time the training step / kernels"},
    {"params", "print the tensor table and parameter count of a config"},
    {"logits", "raw logits of a token sequence (parity checks)"},
    {"report", "compare runs with a reference: table, plots, HTML page"},
};

static CmdFn lookup(const char *name) {
    if (!strcmp(name, "prepare")) return cmd_prepare;
    if (!strcmp(name, "tokenize")) return cmd_tokenize;
    if (!strcmp(name, "dataset")) return cmd_dataset;
    if (!strcmp(name, "train")) return cmd_train;
    if (!strcmp(name, "score")) return cmd_score;
    if (!strcmp(name, "convert")) return cmd_convert;
    if (!strcmp(name, "verify")) return cmd_verify;
    if (!strcmp(name, "generate")) return cmd_generate;
    if (!strcmp(name, "eval")) return cmd_eval;
    if (!strcmp(name, "bench")) return cmd_bench;
    if (!strcmp(name, "params")) return cmd_params;
    if (!strcmp(name, "logits")) return cmd_logits;
    if (!strcmp(name, "report")) return cmd_report;
    return NULL;
}

static void usage(FILE *f) {
    fprintf(f, "usage: gdn <command> [options]   (gdn <command> --help for each; gdn --version)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s%s\n", commands[i].name, commands[i].help,
                lookup(commands[i].name) ? "" : "  [not built]");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("gdn %s\n", gdn_version);
        return 0;
    }
    int known = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) known |= !strcmp(commands[i].name, argv[1]);
    if (!known) {
        fprintf(stderr, "gdn: unknown command '%s'\n", argv[1]);
        usage(stderr);
        return 2;
    }
    CmdFn fn = lookup(argv[1]);
    if (!fn) die("command '%s' is not part of this build", argv[1]);
    return fn(argc - 1, argv + 1);
}
