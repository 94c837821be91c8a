"""A software prefetch for the numba kernels: ``prefetch(A, i, k)`` asks the CPU to bring the cache line of
``A[i, k]`` (``A`` a 2-d array) into cache, without waiting for it.

A row-wise descent reads each visited row's neighbours at random; listing the next row's neighbours this way
while the current row is processed overlaps those cache misses with the work (a plain load would hold up the
CPU once its window fills). A hint only: no result depends on it. ``(i, k)`` must be a valid index (not
negative).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, i, k):
    """``llvm.prefetch`` (read, high locality, data cache) of ``&A[i, k]``."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2):
        return None
    if not (isinstance(i, types.Integer) and isinstance(k, types.Integer)):
        return None
    sig = types.void(arr, i, k)

    def codegen(context, builder, signature, args):
        aryty, ity, kty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [
            context.cast(builder, args[1], ity, types.intp),
            context.cast(builder, args[2], kty, types.intp),
        ]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch")
        # rw = 0 (read), locality = 3 (keep in all levels), cache type = 1 (data)
        builder.call(
            fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)]
        )
        return context.get_dummy_value()

    return sig, codegen
