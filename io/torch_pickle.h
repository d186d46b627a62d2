// torch_pickle.h: reads (and writes) PyTorch `torch.save` files without Python.
//
// A torch.save file is a zip archive (entries stored, not compressed) holding
//   <archive>/data.pkl     the pickled object tree; tensors refer to storages by persistent id
//                          ('storage', torch.<Type>Storage, key, location, numel)
//   <archive>/data/<key>   the raw little-endian bytes of each storage
//   <archive>/version      format version ("3")
// The unpickler covers pickle protocols 0-5 minus the extension registry and out-of-band buffers. Objects
// it has no meaning for (argparse.Namespace, numpy arrays, ...) become generic PY_OBJ values that keep
// their class and arguments, so a whole Megatron checkpoint (args, RNG state, optimizer) parses and the
// caller picks out the "model" dict. Tensors come from torch._utils._rebuild_tensor_v2 / _rebuild_parameter.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- zip -------------------------------------------------------------------------------------------
typedef struct {
    char *name;
    uint64_t data_off;      // offset of the entry's (possibly compressed) data in the file
    uint64_t csize, usize;  // compressed / uncompressed size
    uint32_t crc;
    int method;             // 0 stored, 8 deflated
    int crc_checked;
} ZipEntry;

typedef struct {
    uint8_t *map;
    size_t size;
    int n;
    ZipEntry *e;
    char *path;
} ZipFile;

int zip_open(ZipFile *z, const char *path, char *err, size_t errlen); // mmap + central directory (zip64 ok)
void zip_close(ZipFile *z);
const ZipEntry *zip_find(const ZipFile *z, const char *name);
// The entry's bytes: stored entries point into the map (*owned = 0); deflated ones are inflated into a
// malloc'd buffer (*owned = 1, caller frees). The CRC-32 is verified on first access.
int zip_data(ZipFile *z, const ZipEntry *e, const uint8_t **data, int *owned, char *err, size_t errlen);

// ---- pickled values ----------------------------------------------------------------------------------
typedef enum {
    PY_NONE, PY_BOOL, PY_INT, PY_FLOAT, PY_STR, PY_BYTES, PY_TUPLE, PY_LIST, PY_DICT, PY_SET,
    PY_GLOBAL,  // a class or function reference: module + name
    PY_OBJ,     // the result of calling a callable we do not model: callable, args, BUILD state
    PY_STORAGE, // a persistent-id storage reference
    PY_TENSOR,
} PyKind;

typedef enum { TD_F32, TD_F64, TD_F16, TD_BF16, TD_I64, TD_I32, TD_I16, TD_I8, TD_U8, TD_BOOL } TorchDtype;

typedef struct PyVal PyVal;
struct PyVal {
    PyKind kind;
    int64_t i;       // BOOL, INT (big ints: low 64 bits, big = 1)
    int big;
    double f;        // FLOAT
    char *s;         // STR (UTF-8), BYTES, GLOBAL "module\0name" (s = module, s2 = name)
    char *s2;
    size_t len;      // STR / BYTES length
    PyVal **items;   // TUPLE, LIST, SET items; DICT: key0, val0, key1, val1, ...
    int n, cap;      // items used (DICT: 2 x entries)
    PyVal *callable, *args, *state; // OBJ
    // STORAGE
    TorchDtype dtype;
    char *key;       // storage key: data/<key>
    uint64_t numel;  // storage elements
    // TENSOR
    PyVal *storage;
    int64_t offset;  // in elements of the storage
    int ndim;
    int64_t shape[8], stride[8];
};

typedef struct PyArena PyArena;

typedef struct {
    ZipFile zip;
    char *prefix;    // "<archive>/" of the entries
    PyArena *arena;  // owns every PyVal
    PyVal *root;
} TorchFile;

int torch_load(TorchFile *tf, const char *path, char *err, size_t errlen);
void torch_close(TorchFile *tf);
// Unpickles a buffer on its own into `arena` (created when *arena is NULL); storage persistent ids become
// PY_STORAGE values whose bytes are not available (no archive).
PyVal *pickle_loads(const uint8_t *p, size_t n, PyArena **arena, char *err, size_t errlen);
void py_arena_free(PyArena *a);

const PyVal *py_dict_get(const PyVal *d, const char *key); // str keys; NULL if absent or d is not a dict
int py_dict_len(const PyVal *d);
const char *py_kind_name(PyKind k);
const char *torch_dtype_name(TorchDtype t); // "float32", "bfloat16", ...
size_t torch_dtype_size(TorchDtype t);
uint64_t torch_tensor_numel(const PyVal *t); // saturates at UINT64_MAX
// Copies a tensor's elements (row-major over its shape, honouring stride and storage offset) to fp32.
// Float types only (F32/F64/F16/BF16); the storage bounds and CRC are checked.
int torch_tensor_to_f32(TorchFile *tf, const PyVal *t, float *out, char *err, size_t errlen);

// ---- writer: a dict of str -> (int | float | str | OrderedDict of name -> contiguous tensor) ----------
typedef struct TorchWriter TorchWriter;
TorchWriter *torch_writer_new(void);
void torch_writer_int(TorchWriter *w, const char *key, int64_t v);
void torch_writer_float(TorchWriter *w, const char *key, double v);
void torch_writer_str(TorchWriter *w, const char *key, const char *v);
// Starts an OrderedDict value under `key`; tensors added after it go into it.
void torch_writer_begin_dict(TorchWriter *w, const char *key);
// A contiguous tensor of `dtype` (TD_F32/TD_BF16/TD_F16) from fp32 data (rounded RNE); data must stay valid
// until torch_writer_save returns.
void torch_writer_tensor(TorchWriter *w, const char *name, TorchDtype dtype, int ndim, const int64_t *shape,
                         const float *data);
// Writes the zip (archive name = file name without extension, as torch does), atomically.
int torch_writer_save(TorchWriter *w, const char *path, char *err, size_t errlen);
void torch_writer_free(TorchWriter *w);

#ifdef __cplusplus
}
#endif
