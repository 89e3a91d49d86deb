/* OpenCL error codes: their names (so a message says CL_INVALID_KERNEL_ARGS,
 * not -52) and the hx_status each stands for. */
#include <stdarg.h>
#include <stdio.h>

#include "devices/opencl.h"
#include "runtime/error.h"

#define HX_CL_ERRORS(X)                                   \
    X(CL_SUCCESS, HX_OK)                                  \
    X(CL_DEVICE_NOT_FOUND, HX_ERR_NO_DEVICE)              \
    X(CL_DEVICE_NOT_AVAILABLE, HX_ERR_NO_DEVICE)          \
    X(CL_COMPILER_NOT_AVAILABLE, HX_ERR_UNSUPPORTED)      \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE, HX_ERR_NO_MEMORY) \
    X(CL_OUT_OF_RESOURCES, HX_ERR_DEVICE)                 \
    X(CL_OUT_OF_HOST_MEMORY, HX_ERR_NO_MEMORY)            \
    X(CL_PROFILING_INFO_NOT_AVAILABLE, HX_ERR_DEVICE)     \
    X(CL_MEM_COPY_OVERLAP, HX_ERR_INVALID_ARG)            \
    X(CL_IMAGE_FORMAT_MISMATCH, HX_ERR_INVALID_ARG)       \
    X(CL_IMAGE_FORMAT_NOT_SUPPORTED, HX_ERR_UNSUPPORTED)  \
    X(CL_BUILD_PROGRAM_FAILURE, HX_ERR_DEVICE)            \
    X(CL_MAP_FAILURE, HX_ERR_DEVICE)                      \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET, HX_ERR_INVALID_ARG) \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, HX_ERR_DEVICE) \
    X(CL_COMPILE_PROGRAM_FAILURE, HX_ERR_DEVICE)          \
    X(CL_LINKER_NOT_AVAILABLE, HX_ERR_UNSUPPORTED)        \
    X(CL_LINK_PROGRAM_FAILURE, HX_ERR_DEVICE)             \
    X(CL_DEVICE_PARTITION_FAILED, HX_ERR_DEVICE)          \
    X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, HX_ERR_UNSUPPORTED) \
    X(CL_INVALID_VALUE, HX_ERR_INVALID_ARG)               \
    X(CL_INVALID_DEVICE_TYPE, HX_ERR_INVALID_ARG)         \
    X(CL_INVALID_PLATFORM, HX_ERR_DEVICE)                 \
    X(CL_INVALID_DEVICE, HX_ERR_DEVICE)                   \
    X(CL_INVALID_CONTEXT, HX_ERR_DEVICE)                  \
    X(CL_INVALID_QUEUE_PROPERTIES, HX_ERR_UNSUPPORTED)    \
    X(CL_INVALID_COMMAND_QUEUE, HX_ERR_DEVICE)            \
    X(CL_INVALID_HOST_PTR, HX_ERR_INVALID_ARG)            \
    X(CL_INVALID_MEM_OBJECT, HX_ERR_INVALID_ARG)          \
    X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, HX_ERR_INVALID_ARG) \
    X(CL_INVALID_IMAGE_SIZE, HX_ERR_INVALID_ARG)          \
    X(CL_INVALID_SAMPLER, HX_ERR_INVALID_ARG)             \
    X(CL_INVALID_BINARY, HX_ERR_FORMAT)                   \
    X(CL_INVALID_BUILD_OPTIONS, HX_ERR_INVALID_ARG)       \
    X(CL_INVALID_PROGRAM, HX_ERR_DEVICE)                  \
    X(CL_INVALID_PROGRAM_EXECUTABLE, HX_ERR_DEVICE)       \
    X(CL_INVALID_KERNEL_NAME, HX_ERR_NOT_FOUND)           \
    X(CL_INVALID_KERNEL_DEFINITION, HX_ERR_DEVICE)        \
    X(CL_INVALID_KERNEL, HX_ERR_DEVICE)                   \
    X(CL_INVALID_ARG_INDEX, HX_ERR_INVALID_ARG)           \
    X(CL_INVALID_ARG_VALUE, HX_ERR_INVALID_ARG)           \
    X(CL_INVALID_ARG_SIZE, HX_ERR_INVALID_ARG)            \
    X(CL_INVALID_KERNEL_ARGS, HX_ERR_INVALID_ARG)         \
    X(CL_INVALID_WORK_DIMENSION, HX_ERR_INVALID_ARG)      \
    X(CL_INVALID_WORK_GROUP_SIZE, HX_ERR_INVALID_ARG)     \
    X(CL_INVALID_WORK_ITEM_SIZE, HX_ERR_INVALID_ARG)      \
    X(CL_INVALID_GLOBAL_OFFSET, HX_ERR_INVALID_ARG)       \
    X(CL_INVALID_EVENT_WAIT_LIST, HX_ERR_INVALID_ARG)     \
    X(CL_INVALID_EVENT, HX_ERR_INVALID_ARG)               \
    X(CL_INVALID_OPERATION, HX_ERR_STATE)                 \
    X(CL_INVALID_GL_OBJECT, HX_ERR_INVALID_ARG)           \
    X(CL_INVALID_BUFFER_SIZE, HX_ERR_INVALID_ARG)         \
    X(CL_INVALID_MIP_LEVEL, HX_ERR_INVALID_ARG)           \
    X(CL_INVALID_GLOBAL_WORK_SIZE, HX_ERR_INVALID_ARG)    \
    X(CL_INVALID_PROPERTY, HX_ERR_INVALID_ARG)            \
    X(CL_INVALID_IMAGE_DESCRIPTOR, HX_ERR_INVALID_ARG)    \
    X(CL_INVALID_COMPILER_OPTIONS, HX_ERR_INVALID_ARG)    \
    X(CL_INVALID_LINKER_OPTIONS, HX_ERR_INVALID_ARG)      \
    X(CL_INVALID_DEVICE_PARTITION_COUNT, HX_ERR_INVALID_ARG) \
    X(CL_INVALID_PIPE_SIZE, HX_ERR_INVALID_ARG)           \
    X(CL_INVALID_DEVICE_QUEUE, HX_ERR_DEVICE)             \
    X(CL_INVALID_SPEC_ID, HX_ERR_INVALID_ARG)             \
    X(CL_MAX_SIZE_RESTRICTION_EXCEEDED, HX_ERR_RANGE)

/* ICD loader codes, spelled out so no extension header is needed. */
#define HX_CL_PLATFORM_NOT_FOUND_KHR (-1001)

const char *hx_opencl_error_name(cl_int err)
{
    switch (err) {
#define HX_CL_NAME(code, status) case code: return #code;
        HX_CL_ERRORS(HX_CL_NAME)
#undef HX_CL_NAME
    case HX_CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

hx_status hx_opencl_error_status(cl_int err)
{
    switch (err) {
#define HX_CL_STATUS(code, status) case code: return status;
        HX_CL_ERRORS(HX_CL_STATUS)
#undef HX_CL_STATUS
    case HX_CL_PLATFORM_NOT_FOUND_KHR: return HX_ERR_NO_DEVICE;
    }
    return HX_ERR_DEVICE;
}

hx_status hx_opencl_error(cl_int err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    hx_status s = hx_opencl_error_status(err);
    if (s == HX_OK)
        s = HX_ERR_DEVICE;
    return hx_error(s, "%s: %s (%d)", what, hx_opencl_error_name(err), (int)err);
}
