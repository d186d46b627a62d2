// config.h: every setting of gdn.c (model shape and training recipe) in one key table.
// The table drives YAML loading, --key value flags, `--help` text and the resolved config stored in
// checkpoints, so a key is added in exactly one place (CONFIG_KEYS below).
// Key names follow Primus/Megatron where one exists (hidden_size, ffn_hidden_size, num_layers = 2 x GDN
// blocks, linear_* head keys, train_iters, micro_batch_size, ...).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CK_INT, CK_FLOAT, CK_STR, CK_BOOL };

// X(name, type, field, default, help)
#define CONFIG_KEYS(X)                                                                                     \
    /* model (Primus names; FLA names accepted as aliases, see config.c) */                                \
    X(hidden_size, CK_INT, hidden_size, "1024", "model width h")                                          \
    X(num_layers, CK_INT, num_layers, "24", "Megatron sublayers: 2 x GDN blocks (GDN + MLP alternate)")   \
    X(ffn_hidden_size, CK_INT, ffn_hidden_size, "4096", "SwiGLU width F")                                 \
    X(linear_num_key_heads, CK_INT, num_heads, "4", "q/k heads H")                                        \
    X(linear_num_value_heads, CK_INT, num_v_heads, "8", "v heads HV (grouped-value; multiple of H)")      \
    X(linear_key_head_dim, CK_INT, head_dim, "64", "q/k head dim dk")                                     \
    X(linear_value_head_dim, CK_INT, v_head_dim, "64", "v head dim dv")                                   \
    X(linear_conv_kernel_dim, CK_INT, conv_size, "4", "short causal conv width")                          \
    X(vocab_size, CK_INT, vocab_size, "128256", "vocabulary (tied embeddings / lm_head)")                 \
    X(norm_epsilon, CK_FLOAT, norm_eps, "1e-6", "RMSNorm eps (attn/mlp/final/o_norm)")                    \
    X(init_method_std, CK_FLOAT, init_std, "0.02", "std of the normal init")                              \
    /* hybrid attention layers (FLA's `attn` dict; YAML `attn: {layers: [3, 7], num_heads: 16, ...}`) */    \
    X(attn_layers, CK_STR, attn_layers, "", "GDN blocks that use softmax attention instead, e.g. 3,7,11 (empty: pure GDN)") \
    X(attn_num_heads, CK_INT, attn_num_heads, "0", "attention query heads Ha (head dim = hidden_size / Ha)") \
    X(attn_num_kv_heads, CK_INT, attn_num_kv_heads, "0", "attention KV heads Hkv, dividing Ha (0: = attn_num_heads)") \
    X(attn_qkv_bias, CK_BOOL, attn_qkv_bias, "false", "biases on the attention q/k/v projections")       \
    X(attn_window_size, CK_INT, attn_window_size, "0", "sliding window w: query t sees keys t-w+1..t (0: full causal)") \
    X(attn_rope_theta, CK_FLOAT, attn_rope_theta, "10000", "RoPE base of the attention layers")          \
    /* training */                                                                                         \
    X(train_iters, CK_INT, train_iters, "100", "optimizer steps")                                         \
    X(micro_batch_size, CK_INT, micro_batch_size, "1", "sequences per micro-batch (per rank)")           \
    X(global_batch_size, CK_INT, global_batch_size, "1", "sequences per step (all ranks, all micro-batches)") \
    X(seq_length, CK_INT, seq_length, "2048", "tokens per sequence")                                      \
    X(lr, CK_FLOAT, lr, "2e-4", "peak learning rate")                                                     \
    X(min_lr, CK_FLOAT, min_lr, "2e-5", "final learning rate of the decay")                               \
    X(lr_warmup_iters, CK_INT, lr_warmup_iters, "0", "linear warmup steps")                               \
    X(lr_decay_iters, CK_INT, lr_decay_iters, "0", "decay length in steps (0 = train_iters)")             \
    X(lr_decay_style, CK_STR, lr_decay_style, "cosine", "cosine | linear | constant")                    \
    X(weight_decay, CK_FLOAT, weight_decay, "0.01", "AdamW decoupled weight decay (not on 1-D tensors)") \
    X(adam_beta1, CK_FLOAT, adam_beta1, "0.9", "AdamW beta1")                                             \
    X(adam_beta2, CK_FLOAT, adam_beta2, "0.95", "AdamW beta2")                                            \
    X(adam_eps, CK_FLOAT, adam_eps, "1e-8", "AdamW eps")                                                  \
    X(clip_grad, CK_FLOAT, clip_grad, "1.0", "global grad-norm clip (0 = off)")                          \
    X(seed, CK_INT, seed, "42", "seed for init and data order")                                           \
    X(log_interval, CK_INT, log_interval, "1", "iterations between log lines")                           \
    X(save, CK_STR, save, "", "checkpoint directory")                                                     \
    X(save_interval, CK_INT, save_interval, "0", "iterations between checkpoints (0 = only at the end)") \
    X(exit_interval, CK_INT, exit_interval, "0", "stop (with a checkpoint) after an iteration divisible by this") \
    X(load, CK_STR, load, "", "checkpoint directory or iter_N dir to resume from")                       \
    X(finetune, CK_BOOL, finetune, "false", "with load: take weights only, start at step 0")             \
    X(train_data_path, CK_STR, train_data_path, "", "train set: Megatron .bin/.idx prefix, or 'A B' / 'w1 A w2 B' blend") \
    /* blends, split, validation (issue 18; data/blend.c, train/validate.c) */                            \
    X(valid_data_path, CK_STR, valid_data_path, "", "validation set: prefix or blend list (as train_data_path)") \
    X(test_data_path, CK_STR, test_data_path, "", "test set: prefix or blend list (as train_data_path)")  \
    X(data_path, CK_STR, data_path, "", "prefix or blend list, cut into train/valid/test by split")      \
    X(split, CK_STR, split, "", "train,valid,test weights of each data_path prefix's sequences (default 969,30,1)") \
    X(mid_level_dataset_surplus, CK_FLOAT, mid_level_dataset_surplus, "0.005", "extra share each blended dataset is built for") \
    X(eval_interval, CK_INT, eval_interval, "0", "iterations between validations (0 = only at the end)")  \
    X(eval_iters, CK_INT, eval_iters, "100", "global batches per validation (0 = no validation)")        \
    X(eval_same_samples, CK_BOOL, eval_same_samples, "false", "every validation reads the same first samples (comparable points)") \
    /* graceful stops (issue 18; train/signals.c) */                                                     \
    X(exit_signal_handler, CK_BOOL, exit_signal_handler, "false", "SIGTERM/SIGINT: finish the iteration, save, exit") \
    X(exit_duration_in_mins, CK_FLOAT, exit_duration_in_mins, "0", "save and stop after this many minutes (0 = off)") \
    X(data_order, CK_STR, data_order, "megatron", "megatron (GPTDataset) | fla (FLA-aligned chunks)")     \
    X(eos_token_id, CK_INT, eos_token_id, "128001", "EOS id; with data_order fla its labels are ignored (FLA's collator pads with EOS)") \
    X(metrics_file, CK_STR, metrics_file, "", "JSONL metrics file (default <save>/metrics.jsonl)")       \
    /* run monitoring (train/runlog.c) */                                                                  \
    X(tensorboard_dir, CK_STR, tensorboard_dir, "", "TensorBoard event files go here (Megatron's tags)")    \
    X(log_memory_to_tensorboard, CK_BOOL, log_memory_to_tensorboard, "false", "TensorBoard: mem-reserved-bytes, mem-allocated-bytes, mem-max-allocated-bytes, mem-allocated-count (the backend's buffers) every iteration") \
    X(report_dir, CK_STR, report_dir, "", "refresh a `gdn report` page (HTML, plots) here at log intervals (<= every 10 s)") \
    X(device, CK_STR, device, "auto", "cpu | cuda | auto")                                                \
    X(precision, CK_STR, precision, "bf16", "bf16 | fp32 (CUDA activations; CPU is always fp32)")        \
    X(delta_rule, CK_STR, delta_rule, "chunk", "chunk | recurrent (CPU reference form)")                 \
    X(recompute_swiglu, CK_BOOL, recompute_swiglu, "false", "training: keep no SwiGLU output per block; the backward recomputes it (same bits; 300M at 16 x 2048: -3 GiB)") \
    X(recompute_gdn_acts, CK_BOOL, recompute_gdn_acts, "false", "training: keep no GDN conv output, normed q/k or gated-norm output per block; the backward recomputes them (same bits; 300M at 16 x 2048: -1.4 GiB)") \
    X(enable_cuda_graph, CK_BOOL, enable_cuda_graph, "true", "CUDA: each micro-batch's forward + backward replays one recorded graph (same kernels, same bits; no launch gaps)") \
    X(nproc_per_node, CK_INT, nproc_per_node, "1", "data-parallel ranks on this machine, one per GPU (NCCL); CPU ranks share the cores") \
    /* distributed training (issue 19) */                                                                  \
    X(use_distributed_optimizer, CK_BOOL, use_distributed_optimizer, "false", "ZeRO-1: reduce-scatter the grads, shard the AdamW state, all-gather the weights") \
    X(distributed_timeout_minutes, CK_FLOAT, distributed_timeout_minutes, "10", "a rank silent this long (dead or hung) stops every rank") \
    X(ddp_bucket_size, CK_INT, ddp_bucket_size, "0", "gradient all-reduce in buckets of >= this many elements (0: one, or 40M with overlap)") \
    X(overlap_grad_reduce, CK_BOOL, overlap_grad_reduce, "false", "start each bucket's all-reduce (ZeRO-1: reduce-scatter) during the backward, once its gradients are final") \
    X(overlap_param_gather, CK_BOOL, overlap_param_gather, "false", "ZeRO-1: all-gather the updated weights per bucket during the next forward (it waits for a bucket before its first layer)") \
    /* optimizer state precision (Megatron's precision-aware optimizer; model/optim_lp.c) */              \
    X(use_precision_aware_optimizer, CK_BOOL, use_precision_aware_optimizer, "false", "AdamW state in lower precision: the *_dtype keys below and store_param_remainders") \
    X(exp_avg_dtype, CK_STR, exp_avg_dtype, "fp32", "AdamW first moment: fp32 | bf16 (with use_precision_aware_optimizer)") \
    X(exp_avg_sq_dtype, CK_STR, exp_avg_sq_dtype, "fp32", "AdamW second moment: fp32 | bf16 (with use_precision_aware_optimizer)") \
    X(main_grads_dtype, CK_STR, main_grads_dtype, "fp32", "gradients: fp32 (Megatron's bf16 is not supported)") \
    X(main_params_dtype, CK_STR, main_params_dtype, "fp32", "master weights: fp32 (Megatron's fp16 is not supported)") \
    X(store_param_remainders, CK_BOOL, store_param_remainders, "true", "bf16 backends, with use_precision_aware_optimizer: the fp32 masters kept as the bf16 weights + 16 bits each (-2 bytes/parameter, exact)") \
    /* packed documents (issue 14) */                                                                      \
    X(reset_state_at_eod, CK_BOOL, reset_state_at_eod, "false", "a token after eos_token_id starts a document: zero delta-rule state and conv history") \
    X(eod_mask_loss, CK_BOOL, eod_mask_loss, "false", "Megatron: no loss where the input is eos_token_id")

typedef struct {
    int hidden_size, num_layers, ffn_hidden_size, num_heads, num_v_heads, head_dim, v_head_dim;
    int conv_size, vocab_size;
    float norm_eps, init_std;
    char attn_layers[256]; // hybrid attention
    int attn_num_heads, attn_num_kv_heads, attn_qkv_bias, attn_window_size;
    float attn_rope_theta;
    int train_iters, micro_batch_size, global_batch_size, seq_length;
    float lr, min_lr;
    int lr_warmup_iters, lr_decay_iters;
    char lr_decay_style[16];
    float weight_decay, adam_beta1, adam_beta2, adam_eps, clip_grad;
    int seed, log_interval;
    char save[512];
    int save_interval, exit_interval;
    char load[512];
    int finetune;
    char train_data_path[2048], data_order[16], metrics_file[512], device[16], precision[16];
    // issue 18: blends, split, validation, graceful stops
    char valid_data_path[2048], test_data_path[2048], data_path[2048], split[64];
    float mid_level_dataset_surplus;
    int eval_interval, eval_iters, eval_same_samples, exit_signal_handler;
    float exit_duration_in_mins;
    int eos_token_id;
    char delta_rule[16];
    int recompute_swiglu; // gdn.c's own key: Megatron's recompute_modules has no dense-MLP activation entry
    int recompute_gdn_acts; // gdn.c's own key, as recompute_swiglu (model/layer_gdn.c)
    int enable_cuda_graph; // Megatron's key; here the scope is one micro-batch's forward + backward
    int nproc_per_node;
    char tensorboard_dir[512], report_dir[512]; // run monitoring
    int log_memory_to_tensorboard;
    int use_distributed_optimizer; // issue 19
    float distributed_timeout_minutes;
    int ddp_bucket_size, overlap_grad_reduce, overlap_param_gather;
    int use_precision_aware_optimizer, store_param_remainders; // optimizer state precision (model/optim_lp.c)
    char exp_avg_dtype[8], exp_avg_sq_dtype[8], main_grads_dtype[8], main_params_dtype[8];
    int reset_state_at_eod, eod_mask_loss; // packed documents (issue 14)
} Config;

// Layer kinds: each block is attn_norm, a mixer, mlp_norm and the SwiGLU MLP; its kind picks the mixer.
// X(enum, name). A kind is added here, with its tensors in model/params.h (LAYER_TENSORS_<name>) and its
// forward/backward/decode state in model/layer_<name>.c (see model/layer.h).
#define LAYER_KINDS(X)                                                 \
    X(LAYER_GDN, gdn) /* Gated DeltaNet mixer (FLA GatedDeltaNet) */   \
    X(LAYER_ATTN, attn) /* softmax attention of a hybrid (FLA Attention) */
typedef enum {
#define X(e, name) e,
    LAYER_KINDS(X)
#undef X
    LAYER_NKINDS
} LayerKind;
const char *layer_kind_name(int kind); // "gdn"
#define GDN_MAX_BLOCKS 1024

// The model shape derived from a Config (what the graph and the tensor table use).
typedef struct {
    int h;      // hidden size
    int L;      // GDN blocks (each = GDN mixer + SwiGLU MLP)
    int H, HV;  // q/k heads, v heads
    int dk, dv; // head dims
    int Kd, Vd; // H*dk, HV*dv
    int F;      // MLP width
    int K;      // conv width
    int V;      // vocab
    float eps;
    float init_std;
    unsigned char kind[GDN_MAX_BLOCKS]; // LayerKind of each block [L] (LAYER_ATTN: the blocks in attn_layers)
    // hybrid attention (spec hybrid.md): n_attn blocks have softmax attention instead of the GDN mixer
    int n_attn;
    int Ha, Hkv, da;   // query heads, KV heads, head dim (h / Ha)
    int Dq, Dkv;       // Ha*da, Hkv*da
    int qkv_bias;      // q/k/v_proj biases
    int window;        // 0 = full causal
    float rope_theta;
} ModelDims;

void config_defaults(Config *c);
// Loads a YAML file of "key: value" pairs (nested mappings are flattened; unknown keys are errors).
int config_load_yaml(Config *c, const char *path, char *err, size_t errlen);
// Applies "--key value" / "--key=value" flags; consumed flags are removed from argv (argc updated).
// Flags that are not config keys are left in place for the caller.
int config_apply_flags(Config *c, int *argc, char **argv, char *err, size_t errlen);
int config_set(Config *c, const char *key, const char *value, char *err, size_t errlen);
int config_validate(const Config *c, char *err, size_t errlen);
// The key table, for tests and help: number of keys, the i-th key's name (type into *type when not NULL),
// and a numeric key's valid range (-1 when it has none).
int config_nkeys(void);
const char *config_key_name(int i, int *type);
int config_key_range(const char *key, double *lo, double *hi, int *open_lo);
ModelDims config_dims(const Config *c);
// Resolved config as a JSON object string (malloc'd); parsed back with config_from_json.
char *config_to_json(const Config *c);
int config_from_json(Config *c, const char *json, char *err, size_t errlen);
void config_print_help(FILE *f);
void config_print(const Config *c, FILE *f);

#ifdef __cplusplus
}
#endif
