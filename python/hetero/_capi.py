"""The C API, declared as ``include/hetero.h`` declares it.

ctypes, not cffi: installing needs no C compiler beyond the one the
Makefile uses for libhetero itself, and no package beyond the standard
library (numpy aside); ctypes releases the GIL around every foreign call.
What cffi's API mode would add, signatures checked by a compiler, the test
suite does instead: every declaration below is compared with the header
(tests/test_header.py), and every struct's layout with a C compiler's.

The declarations are C text copied from hetero.h and read by ``_cdecl``.
"""
from __future__ import annotations

import ctypes
from typing import Dict

from . import _cdecl
from ._libpath import find_library

types = _cdecl.TypeTable()

# The #defines the declarations use (checked against the header's).
CONSTANTS: Dict[str, int] = {"HX_ENGINE_MAX_TOP": 20}
types.constants.update(CONSTANTS)

# Enums are C ints.
ENUMS = ("hx_status", "hx_device_family", "hx_device_kind", "hx_finish_reason", "hx_engine_policy", "hx_pooling")
for _e in ENUMS:
    types.add(_e, ctypes.c_int)

# Opaque handles: a distinct pointer type each, so that a model cannot be
# passed where a session is expected.
OPAQUE = ("hx_runtime", "hx_model", "hx_session", "hx_engine", "hx_tokenizer")
for _o in OPAQUE:
    types.add(_o, type(_o, (ctypes.Structure,), {"_fields_": []}))

# Structs, each after the ones its members use.
STRUCTS: Dict[str, str] = {
    "hx_device_info": """
    int index;
    char name[128];
    char vendor[64];
    char platform[64];
    char version[64];
    hx_device_family family;
    hx_device_kind kind;
    int compute_units;
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;
    int unified_memory;
    int memory_node;
    int numa_node;
    int emulated;
""",
    "hx_topology_info": """
    int packages, numa_nodes, cores, pus;
    uint64_t l1d_bytes, l2_bytes, l3_bytes;
    uint64_t memory_bytes;
    int pci_devices, os_devices;
""",
    "hx_runtime_options": """
    const char *devices;
    int cpu_threads;
    const char *fpga_emulation;
    const char *sched;
    int pin_threads;
    const char *inject;
    const char *trace;
    const char *perfmodel_dir;
    const char *machine;
""",
    "hx_runtime_stats": """
    uint64_t tasks_submitted, tasks_done, tasks_failed;
    uint64_t copies, bytes_copied;
    uint64_t zero_copy_uses;
    uint64_t migrations;
    double submit_overhead_us;
    uint64_t retries;
    uint32_t devices_retired;
    uint64_t tasks_alive;
    uint64_t graph_launches;
""",
    "hx_device_stats": """
    uint64_t tasks;
    double busy_seconds;
    double busy_fraction;
    uint32_t queue_depth;
    double backlog_seconds;
    double recent_busy;
    double tasks_per_second;
    double flops_per_second;
    uint64_t failures;
    int retired;
    char last_failure[192];
    uint64_t kv_bytes_allocated, kv_bytes_named, kv_bytes_named_peak;
    uint64_t kv_bytes_device_only, kv_bytes_device_only_peak;
""",
    "hx_model_options": """
    const char *partition;
    const char *kv_type;
    uint32_t kv_tokens;
    uint32_t kv_block;
    int kv_prefix_cache;
    uint32_t max_batch;
    uint32_t n_ctx;
    int repack;
    int graph_replay;
    int fuse_matmuls;
    uint32_t kv_split;
    uint64_t kv_device_bytes;
    const char *kv_type_k, *kv_type_v;
    int kv_rotate;
    const char *moe_routing;
    uint64_t kv_prefix_bytes;
""",
    "hx_engine_progress": """
    uint32_t total;
    uint32_t cached;
    uint32_t processed;
    double seconds;
""",
    "hx_model_info": """
    char arch[32];
    char name[128];
    char ftype[16];
    uint64_t n_params, file_bytes;
    uint32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim;
    uint32_t n_ctx;
    uint32_t kv_tokens;
    uint64_t kv_bytes;
    uint32_t sliding_window;
    int32_t bos, eos;
    int add_bos, add_eos;
    uint64_t repacked_bytes;
    uint32_t n_expert, n_expert_used;
    uint64_t decode_weight_bytes, kv_bytes_per_token;
    uint32_t kv_prefix_tokens;
""",
    "hx_model_stats": """
    uint32_t sessions_open;
    uint32_t kv_blocks_used;
    uint32_t kv_blocks_total;
    uint32_t kv_block_tokens;
    uint32_t kv_blocks_cached;
    uint32_t kv_blocks_shared;
    uint64_t kv_bytes_used;
    uint64_t kv_hits, kv_misses;
    uint64_t kv_evictions;
    uint64_t kv_tokens_reused;
    uint64_t kv_device_evictions;
    uint64_t graphs_recorded, graphs_replayed;
""",
    "hx_plan_task": """
    int layer;
    char op[32];
    char task_class[16];
    double flops, bytes;
    int device;
    uint32_t prefer;
    char reason[112];
""",
    "hx_chat_message": """
    const char *role;
    const char *content;
""",
    "hx_batch": """
    size_t n;
    const int32_t *tokens;
    hx_session *const *sessions;
    const uint8_t *want_logits;
""",
    "hx_logit_bias": """
    int32_t token;
    float bias;
""",
    "hx_sampling": """
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    float repeat_penalty;
    int32_t repeat_last_n;
    float frequency_penalty;
    float presence_penalty;
    uint64_t seed;
    const char *const *stop;
    uint32_t n_stop;
    const char *grammar;
    int ignore_eos;
    const hx_logit_bias *logit_bias;
    uint32_t n_logit_bias;
    uint32_t min_tokens;
    float typical_p;
    int32_t mirostat;
    float mirostat_tau, mirostat_eta;
    float dry_multiplier, dry_base;
    int32_t dry_allowed_length, dry_penalty_last_n;
    const char *const *dry_breakers;
    uint32_t n_dry_breakers;
    float xtc_probability, xtc_threshold;
    float top_n_sigma;
    float dynatemp_range, dynatemp_exponent;
    const char *samplers;
    int32_t min_keep;
    int reasoning_budget_on;
    uint32_t reasoning_budget;
    int reasoning_open;
    const char *reasoning_start, *reasoning_end, *reasoning_message;
""",
    "hx_generation_stats": """
    uint32_t prompt_tokens, generated_tokens;
    double prefill_seconds, decode_seconds;
    hx_finish_reason finish;
    int32_t stop_index;
    uint32_t context_shifts;
""",
    "hx_engine_options": """
    hx_engine_policy policy;
    uint32_t max_running;
    uint32_t token_budget;
    uint32_t max_waiting;
    uint32_t shared_prefill;
""",
    "hx_embed_options": """
    hx_pooling pooling;
    int32_t normalize;
""",
    "hx_model_embedding_info": """
    hx_pooling pooling;
    uint32_t n_cls_out;
    uint32_t n_embd;
""",
    "hx_request_result": """
    hx_status status;
    char error[256];
    hx_generation_stats stats;
    double queue_seconds;
    double first_token_seconds;
    double total_seconds;
    uint32_t preemptions;
    uint32_t prompt_tokens_cached;
    uint32_t recomputed_tokens_cached;
    size_t embedding_n;
""",
    "hx_engine_token": """
    uint64_t id;
    int last;
    const struct hx_request_result *result;
    int32_t token;
    const char *piece;
    float logprob;
    uint32_t n_top;
    int32_t top_token[HX_ENGINE_MAX_TOP];
    float top_logprob[HX_ENGINE_MAX_TOP];
""",
}

# Callbacks: typedefs of function pointers, written as functions named
# after the typedef.
CALLBACKS: Dict[str, str] = {
    "hx_token_callback": "int hx_token_callback(void *user, int32_t token, const char *piece);",
    "hx_engine_callback": "int hx_engine_callback(void *user, const hx_engine_token *t);",
    "hx_progress_callback": "void hx_progress_callback(void *user, const hx_engine_progress *p);",
    "hx_activation_observer": "void hx_activation_observer(void *user, const char *tensor, const float *x, "
                              "uint32_t rows, uint32_t cols);",
    "hx_expert_observer": "void hx_expert_observer(void *user, const char *tensor, uint32_t expert, "
                          "uint32_t n_expert, const float *x, uint32_t rows, uint32_t cols);",
}

# Structs that need a callback type.
LATE_STRUCTS: Dict[str, str] = {
    "hx_request": """
    const int32_t *tokens;
    size_t n_tokens;
    const char *text;
    hx_sampling sampling;
    uint32_t max_tokens;
    int32_t priority;
    uint32_t expected_tokens;
    const char *tenant;
    uint32_t top_logprobs;
    int ignore_eos;
    int no_prefix_cache;
    const char *cache_salt;
    hx_engine_callback on_token;
    void *user;
    int embed_request;
    hx_embed_options embed;
    float *embedding;
    size_t embedding_cap;
    hx_progress_callback on_progress;
    int post_sampling_probs;
""",
    "hx_engine_stats": """
    uint32_t waiting, running;
    uint64_t submitted, finished, failed, cancelled, preemptions, steps;
    uint64_t prompt_tokens, generated_tokens;
    uint64_t tokens_cached;
    double busy_seconds;
    uint64_t step_requests;
""",
}

FUNCTIONS = """
const char *hx_status_str(hx_status s);
const char *hx_last_error(void);
hx_runtime_options hx_runtime_options_default(void);
hx_status hx_runtime_open(hx_runtime **out, const hx_runtime_options *opts);
double hx_runtime_clock(const hx_runtime *rt);
int hx_runtime_simulated(const hx_runtime *rt);
hx_status hx_runtime_close(hx_runtime *rt);
int hx_runtime_device_count(const hx_runtime *rt);
hx_status hx_runtime_device_info(const hx_runtime *rt, int index, hx_device_info *out);
hx_status hx_runtime_topology(const hx_runtime *rt, hx_topology_info *out);
const char *hx_runtime_absence_reason(const hx_runtime *rt, hx_device_family f);
const char *hx_device_family_str(hx_device_family f);
const char *hx_device_kind_str(hx_device_kind k);
hx_status hx_runtime_wait_all(hx_runtime *rt);
void hx_runtime_stats_get(const hx_runtime *rt, hx_runtime_stats *out);
hx_status hx_device_stats_get(const hx_runtime *rt, int device, hx_device_stats *out);
void hx_runtime_stats_reset(hx_runtime *rt);
hx_status hx_runtime_trace_start(hx_runtime *rt, const char *path);
hx_status hx_runtime_trace_stop(hx_runtime *rt);
hx_model_options hx_model_options_default(void);
hx_status hx_model_load(hx_runtime *rt, const char *path, const hx_model_options *opts, hx_model **out);
hx_status hx_model_architectures(char *buf, size_t cap);
hx_status hx_model_free(hx_model *m);
hx_status hx_model_info_get(const hx_model *m, hx_model_info *out);
hx_status hx_model_stats_get(const hx_model *m, hx_model_stats *out);
hx_status hx_model_set_activation_observer(hx_model *m, hx_activation_observer fn, void *user);
hx_status hx_model_set_expert_observer(hx_model *m, hx_expert_observer fn, void *user);
size_t hx_model_plan_size(hx_model *m);
hx_status hx_model_plan_get(hx_model *m, size_t i, hx_plan_task *out);
hx_status hx_model_write_synthetic(const char *path, const char *preset, const char *type, uint64_t seed);
hx_status hx_model_synthetic_cached(const char *preset, const char *type, char *path, size_t cap, int *written);
hx_status hx_model_tokenize(const hx_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t *ids, size_t cap, size_t *n);
hx_status hx_model_token_to_piece(const hx_model *m, int32_t id, char *buf, size_t cap, size_t *len);
int hx_model_is_eog(const hx_model *m, int32_t id);
const char *hx_model_chat_template(const hx_model *m);
hx_status hx_session_open(hx_model *m, hx_session **out);
hx_status hx_session_close(hx_session *s);
uint32_t hx_session_position(const hx_session *s);
hx_status hx_session_eval(hx_session *s, const int32_t *tokens, size_t n, int logits_all);
uint32_t hx_session_reused_tokens(const hx_session *s);
hx_status hx_session_fork(hx_session *s, hx_session **out);
hx_status hx_session_shift(hx_session *s, uint32_t n_keep, uint32_t n_discard);
hx_status hx_session_set_context_shift(hx_session *s, int32_t n_keep, uint32_t n_discard);
const float *hx_session_logits(const hx_session *s, int i);
hx_status hx_batch_eval(hx_model *m, const hx_batch *b);
hx_sampling hx_sampling_default(void);
const char *hx_finish_reason_str(hx_finish_reason r);
hx_status hx_session_generate(hx_session *s, const int32_t *prompt, size_t n_prompt, uint32_t n_predict, const hx_sampling *sampling, hx_token_callback cb, void *user, hx_generation_stats *stats);
const char *hx_pooling_str(hx_pooling p);
hx_status hx_pooling_parse(const char *name, hx_pooling *out);
hx_status hx_model_embedding_info_get(hx_model *m, hx_model_embedding_info *out);
hx_status hx_session_set_embeddings(hx_session *s, int on);
const float *hx_session_embeddings(const hx_session *s, int i);
hx_embed_options hx_embed_options_default(void);
hx_status hx_model_pool(hx_model *m, const float *rows, size_t n_rows, const hx_embed_options *o, float *out, size_t cap, size_t *n_out);
hx_status hx_model_embed(hx_model *m, const int32_t *const *inputs, const size_t *n_tokens, size_t n_inputs, const hx_embed_options *o, float *out, size_t cap, size_t *n_out);
hx_engine_options hx_engine_options_default(void);
hx_request hx_request_default(void);
hx_status hx_engine_create(hx_model *m, const hx_engine_options *opts, hx_engine **out);
hx_status hx_engine_destroy(hx_engine *e);
hx_status hx_engine_submit(hx_engine *e, const hx_request *r, uint64_t *id);
hx_status hx_engine_cancel(hx_engine *e, uint64_t id);
hx_status hx_engine_wait(hx_engine *e, uint64_t id, double timeout_s, hx_request_result *out);
hx_status hx_engine_stats_get(hx_engine *e, hx_engine_stats *out);
hx_status hx_tokenizer_open(const char *gguf_path, hx_tokenizer **out);
void hx_tokenizer_close(hx_tokenizer *tok);
hx_status hx_tokenizer_token_to_piece(const hx_tokenizer *tok, int32_t id, int special, char *buf, size_t cap, size_t *len);
hx_status hx_chat_template_name(const char *tmpl, const char **name);
hx_status hx_chat_apply_template(const char *tmpl, const hx_chat_message *msgs, size_t n, int add_assistant, char *buf, size_t cap, size_t *len);
hx_status hx_json_schema_to_grammar(const char *schema_json, char *buf, size_t cap, size_t *len);
const char *hx_chat_template_builtin(size_t i);
"""

for _name, _body in STRUCTS.items():
    globals()[_name] = types.structure(_name, _body)
for _name, _decl in CALLBACKS.items():
    globals()[_name] = types.callback(_decl)
for _name, _body in LATE_STRUCTS.items():
    globals()[_name] = types.structure(_name, _body)
for _o in OPAQUE:
    globals()[_o] = types.types[_o]

lib = ctypes.CDLL(str(find_library()))
LIBRARY_PATH = lib._name
functions = {}
for _line in FUNCTIONS.strip().splitlines():
    _fname, _f = types.function(lib, _line)
    functions[_fname] = _f
    globals()[_fname] = _f
