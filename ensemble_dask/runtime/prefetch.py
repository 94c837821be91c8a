"""Software prefetches for the numba kernels: ``prefetch(A, i, k)`` asks the CPU to bring the cache line of
``A[i, k]`` (``A`` a 2-d array) into cache without waiting for it, ``prefetch1(a, i)`` that of ``a[i]`` (1-d).

A kernel that reads rows at random (a row descent's neighbours, a pair count's partners) can list the next
rows' lines this way while it processes the current one, overlapping those cache misses with the work (a plain
load would hold up the CPU once its window fills). A hint only: no result depends on it. The indices must be
valid (not negative).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _codegen(context, builder, signature, args):
    """``llvm.prefetch`` (read, high locality, data cache) of the element of ``args[0]`` at ``args[1:]``."""
    aryty, *idxty = signature.args
    ary = context.make_array(aryty)(context, builder, args[0])
    idx = [context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], idxty, strict=True)]
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
    # rw = 0 (read), locality = 3 (keep in all levels), cache type = 1 (data)
    flags = [ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
    builder.call(fn, [builder.bitcast(ptr, i8p), *flags])
    return context.get_dummy_value()


@intrinsic
def prefetch(typingctx, arr, i, k):
    """Prefetch the line of ``A[i, k]``."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2):
        return None
    if not (isinstance(i, types.Integer) and isinstance(k, types.Integer)):
        return None
    return types.void(arr, i, k), _codegen


@intrinsic
def prefetch1(typingctx, arr, i):
    """Prefetch the line of ``a[i]``."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(i, types.Integer)):
        return None
    return types.void(arr, i), _codegen
