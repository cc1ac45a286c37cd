"""The public names of torch.nn.functional, torch.nn (modules) and torch's top level against
dynograph's: a missing name fails unless it is listed below as a deliberate exception."""
import inspect

import pytest

import dynograph

# nn.functional: typing and dispatch helpers torch's module happens to import, docs strings,
# and features dynograph does not cover yet (grouped/scaled matmuls, fused losses)
FUNCTIONAL_EXCEPTIONS = {
    # imported helpers and docs, not API
    "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Callable", "DType", "Optional",
    "TYPE_CHECKING", "Tensor", "dataclasses", "importlib", "np", "torch", "grad", "boolean_dispatch",
    "assert_int_or_pair", "handle_torch_function", "has_torch_function", "has_torch_function_unary",
    "has_torch_function_variadic", "reproducibility_notes", "sparse_support_notes", "tf32_notes",
    "GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES", "ScalingType", "SwizzleType",
    # not covered yet
    "conv_tbc", "grouped_mm", "linear_cross_entropy", "scaled_grouped_mm", "scaled_mm",
}

# nn modules: lazy modules, multi-device wrappers and legacy aliases are not covered yet
MODULE_EXCEPTIONS = {
    "AdaptiveLogSoftmaxWithLoss", "Container", "CrossMapLRN2d", "DataParallel", "LazyBatchNorm1d",
    "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d", "LazyConv2d", "LazyConv3d",
    "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LazyLinear", "LinearCrossEntropyLoss",
    "SyncBatchNorm",
}

# torch's top level (submodules aside): names dynograph does not cover yet — quantization,
# sparse and complex tensors, distributed and JIT machinery, fused kernels, FFT, special
# functions and more.  Shrink this list as names are implemented; never add a name dynograph has.
TOP_LEVEL_EXCEPTIONS = {
    "AVG", "AcceleratorError", "AggregationType", "AliasDb", "AnyType", "Argument", "ArgumentSpec",
    "AwaitType", "BFloat16Storage", "BenchmarkConfig", "BenchmarkExecutionStats", "Block",
    "BoolStorage", "BoolType", "BufferDict", "ByteStorage", "CallStack", "Capsule", "CharStorage",
    "ClassType", "Code", "CompilationUnit", "CompleteArgumentSpec", "ComplexDoubleStorage",
    "ComplexFloatStorage", "ComplexType", "ConcreteModuleType", "ConcreteModuleTypeBuilder",
    "DeepCopyMemoTable", "DeserializationStorageContext", "DeviceObjType", "DictType",
    "DisableTorchFunction", "DisableTorchFunctionSubclass", "DispatchKey", "DispatchKeySet",
    "DoubleStorage", "EnumType", "ErrorReport", "Event", "ExcludeDispatchKeyGuard", "ExecutionPlan",
    "FatalError", "FileCheck", "FloatStorage", "FloatType", "FunctionSchema", "Future", "FutureType",
    "GradScaler", "Gradient", "Graph", "GraphExecutorState", "HalfStorage", "IODescriptor",
    "InferredType", "IntStorage", "IntType", "InterfaceType", "JITException", "ListType",
    "LiteScriptModule", "LockingLogger", "LoggerBase", "LongStorage", "ModuleDict", "Node", "NoneType",
    "NoopLogger", "NumberType", "OperatorInfo", "OptionalType", "OutOfMemoryError", "PRIVATE_OPS",
    "ParameterDict", "PyObjectType", "PyTorchFileReader", "PyTorchFileWriter", "QInt32Storage",
    "QInt8Storage", "QUInt2x4Storage", "QUInt4x2Storage", "QUInt8Storage", "RRefType", "SUM",
    "ScriptClass", "ScriptClassFunction", "ScriptDict", "ScriptDictIterator", "ScriptDictKeyIterator",
    "ScriptFunction", "ScriptList", "ScriptListIterator", "ScriptMethod", "ScriptModule",
    "ScriptModuleSerializer", "ScriptObject", "ScriptObjectProperty", "SerializationStorageContext",
    "ShortStorage", "StaticModule", "Storage", "StorageBase", "Stream", "StreamObjType", "StringType",
    "SymBool", "SymBoolType", "SymFloat", "SymInt", "SymIntType", "TYPE_CHECKING", "Tag", "TensorType",
    "ThroughputBenchmark", "TracingState", "TupleType", "Type", "TypedStorage", "USE_GLOBAL_DEPS",
    "USE_RTLD_GLOBAL_WITH_LIBTORCH", "UnionType", "UntypedStorage", "Use", "Value", "addmv_",
    "affine_grid_generator", "alpha_dropout_",
    "are_deterministic_algorithms_enabled", "as_strided_",
    "autocast", "autocast_decrement_nesting", "autocast_increment_nesting",
    "batch_norm", "batch_norm_backward_elemt", "batch_norm_backward_reduce", "batch_norm_elemt",
    "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts", "batch_norm_stats",
    "batch_norm_update_stats", "binary_cross_entropy_with_logits", "binomial", "bit", "bits16",
    "bits1x8", "bits2x4", "bits4x2", "bits8",
    "ccol_indices_copy", "chalf",
    "choose_qparams_optimized", "classproperty", "clear_autocast_cache",
    "col_indices_copy", "compiled_with_cxx11_abi", "complex32",
    "cond", "conj_physical_", "constant_pad_nd", "conv_tbc", "convolution",
    "cosine_embedding_loss", "crow_indices_copy", "ctc_loss", "cudnn_affine_grid_generator",
    "cudnn_batch_norm", "cudnn_convolution", "cudnn_convolution_add_relu", "cudnn_convolution_relu",
    "cudnn_convolution_transpose", "cudnn_grid_sampler", "cudnn_is_acceptable",
    "dequantize", "detach", "detach_", "dropout_",
    "dsmm", "e", "eig", "embedding", "embedding_bag", "embedding_renorm_",
    "empty_quantized", "fake_quantize_per_channel_affine",
    "fake_quantize_per_tensor_affine", "fbgemm_linear_fp16_weight",
    "fbgemm_linear_fp16_weight_fp32_activation", "fbgemm_linear_int8_weight",
    "fbgemm_linear_int8_weight_fp32_activation", "fbgemm_linear_quantize_weight",
    "fbgemm_pack_gemm_matrix_fp16", "fbgemm_pack_quantized_matrix", "feature_alpha_dropout_",
    "feature_dropout", "feature_dropout_",
    "float4_e2m1fn_x2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "fork", "frobenius_norm", "from_dlpack", "from_file", "frombuffer",
    "fused_moving_avg_obs_fake_quant", "gcd_", "geqrf", "get_autocast_cpu_dtype",
    "get_autocast_dtype", "get_autocast_gpu_dtype", "get_autocast_ipu_dtype", "get_autocast_xla_dtype",
    "get_default_device", "get_deterministic_debug_mode", "get_device", "get_device_module",
    "get_file_path", "get_float32_matmul_precision", "get_num_interop_threads",
    "gradient", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "group_norm", "gru", "gru_cell",
    "has_lapack", "has_mkl", "has_openmp", "has_spectral",
    "hash_tensor", "hinge_embedding_loss", "hsmm", "hspmm", "i0_",
    "import_ir_module", "import_ir_module_from_buffer",
    "indices_copy", "inf", "init_num_threads", "instance_norm", "int1", "int2", "int3", "int4", "int5",
    "int6", "int7", "int_repr",
    "is_autocast_cache_enabled", "is_autocast_cpu_enabled", "is_autocast_enabled",
    "is_autocast_ipu_enabled", "is_autocast_xla_enabled", "is_conj",
    "is_deterministic_algorithms_warn_only_enabled", "is_distributed", "is_inference", "is_neg",
    "is_same_size", "is_signed", "is_storage", "is_vulkan_available", "is_warn_always_enabled",
    "jagged", "kl_div", "layer_norm", "lcm_",
    "legacy_contiguous_format", "lobpcg", "lstm", "lstm_cell", "lstsq",
    "margin_ranking_loss", "matrix_rank", "max_pool1d_with_indices",
    "merge_type_from_type_comment", "miopen_batch_norm", "miopen_convolution",
    "miopen_convolution_add_relu", "miopen_convolution_relu", "miopen_convolution_transpose",
    "miopen_ctc_loss", "miopen_depthwise_convolution", "miopen_rnn", "mkldnn_adaptive_avg_pool2d",
    "mkldnn_convolution", "mkldnn_linear_backward_weights", "mkldnn_max_pool2d", "mkldnn_max_pool3d",
    "mkldnn_rnn_layer", "nan", "native_batch_norm", "native_channel_shuffle", "native_dropout",
    "native_group_norm", "native_layer_norm", "native_norm", "newaxis",
    "norm_except_dim", "nuclear_norm", "orgqr", "ormqr", "parse_ir", "parse_schema",
    "parse_type_comment", "pca_lowrank", "per_channel_affine",
    "per_channel_affine_float_qparams", "per_channel_symmetric", "per_tensor_affine",
    "per_tensor_symmetric", "pi", "poisson_nll_loss",
    "prepare_multiprocessing_environment", "profiler_allow_cudagraph_cupti_lazy_reinit_cuda12",
    "q_per_channel_axis", "q_per_channel_scales", "q_per_channel_zero_points", "q_scale",
    "q_zero_point", "qint32", "qint8", "qscheme", "quantize_per_channel", "quantize_per_tensor",
    "quantize_per_tensor_dynamic", "quantized_batch_norm", "quantized_gru", "quantized_gru_cell",
    "quantized_lstm", "quantized_lstm_cell", "quantized_max_pool1d", "quantized_max_pool2d",
    "quantized_max_pool3d", "quantized_rnn_relu_cell", "quantized_rnn_tanh_cell", "quint2x4",
    "quint4x2", "quint8", "resize_as_sparse_", "rms_norm", "rnn_relu",
    "rnn_relu_cell", "rnn_tanh", "rnn_tanh_cell", "row_indices_copy", "saddmm",
    "segment_reduce", "set_anomaly_enabled", "set_autocast_cache_enabled",
    "set_autocast_cpu_dtype", "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_enabled",
    "set_autocast_gpu_dtype", "set_autocast_ipu_dtype", "set_autocast_ipu_enabled",
    "set_autocast_xla_dtype", "set_autocast_xla_enabled", "set_default_device",
    "set_default_tensor_type", "set_deterministic_debug_mode", "set_float32_matmul_precision",
    "set_flush_denormal", "set_num_interop_threads", "set_warn_always",
    "slice_inverse", "smm", "solve", "sparse_bsc", "sparse_bsc_tensor", "sparse_bsr",
    "sparse_bsr_tensor", "sparse_compressed_tensor", "sparse_coo", "sparse_coo_tensor", "sparse_csc",
    "sparse_csc_tensor", "sparse_csr", "sparse_csr_tensor",
    "spmm", "sspaddmm", "svd_lowrank", "sym_constrain_range",
    "sym_constrain_range_for_size", "sym_float", "sym_fresh_size", "sym_int", "sym_ite", "sym_max",
    "sym_min", "sym_not", "sym_sqrt", "sym_sum", "symeig", "thread_safe_generator",
    "to_dlpack",
    "triplet_margin_loss", "typename", "uint1", "uint16", "uint2",
    "uint3", "uint32", "uint4", "uint5", "uint6", "uint64", "uint7",
    "unify_type_list", "unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes",
    "use_deterministic_algorithms", "values_copy", "vander",
    "view_as_complex_copy", "view_as_real_copy", "vmap", "wait",
    "while_loop"
}


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def _missing(theirs, ours, exceptions):
    return sorted(theirs - ours - exceptions)


def test_functional_names(torch):
    assert _missing(_public(torch.nn.functional), _public(dynograph.nn.functional),
                    FUNCTIONAL_EXCEPTIONS) == []


def test_module_names(torch):
    modules = {n for n in dir(torch.nn) if not n.startswith("_") and inspect.isclass(getattr(torch.nn, n))
               and issubclass(getattr(torch.nn, n), torch.nn.Module)}
    assert _missing(modules, _public(dynograph.nn), MODULE_EXCEPTIONS) == []


def test_top_level_names(torch):
    names = {n for n in _public(torch) if not inspect.ismodule(getattr(torch, n, None))}
    assert _missing(names, _public(dynograph), TOP_LEVEL_EXCEPTIONS) == []


@pytest.mark.parametrize("exceptions,where", [(FUNCTIONAL_EXCEPTIONS, "nn.functional"),
                                              (MODULE_EXCEPTIONS, "nn"), (TOP_LEVEL_EXCEPTIONS, "")])
def test_exceptions_are_still_missing(exceptions, where):
    # a name implemented since must leave its exceptions list
    module = dynograph
    for part in filter(None, where.split(".")):
        module = getattr(module, part)
    assert sorted(exceptions & _public(module)) == []
