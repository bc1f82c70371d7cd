; corpus: archs=sm_80,sm_90a opts=-O0,-O2
; Exercises (llc): inline asm with r/l/f/h/n constraints and a scoped { .reg } block, shared (addrspace 3) and constant (addrspace 4) globals with initializers, a global initialized with generic pointers to other globals (generic()), a zero-initialized global array, barrier0, shfl.sync intrinsic, atomicrmw (add/xchg/max/fadd) and cmpxchg with monotonic and seq_cst orderings, volatile loads.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@tile = internal addrspace(3) global [256 x float] undef, align 16
@coeffs = internal addrspace(4) constant [4 x float] [float 1.0, float 0.5, float 0.25, float 0.125], align 4
@counter = addrspace(1) global i32 0, align 4
@values = addrspace(1) global [3 x i64] [i64 1, i64 -2, i64 3], align 8
@ptrs = addrspace(1) global [2 x ptr] [ptr addrspacecast (ptr addrspace(1) @counter to ptr), ptr addrspacecast (ptr addrspace(1) getelementptr inbounds ([3 x i64], ptr addrspace(1) @values, i64 0, i64 1) to ptr)], align 8
@zeros = addrspace(1) global [64 x i16] zeroinitializer, align 2
@msg = private unnamed_addr addrspace(1) constant [6 x i8] c"nvptx\00", align 1

define void @asm_and_atomics(ptr addrspace(1) %out, ptr addrspace(1) %fout, i32 %v) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %t64 = zext i32 %tid to i64
  %sp = getelementptr inbounds [256 x float], ptr addrspace(3) @tile, i64 0, i64 %t64
  %fv = uitofp i32 %tid to float
  %ci = and i64 %t64, 3
  %cp = getelementptr inbounds [4 x float], ptr addrspace(4) @coeffs, i64 0, i64 %ci
  %c = load float, ptr addrspace(4) %cp, align 4
  %prod = fmul float %fv, %c
  store float %prod, ptr addrspace(3) %sp, align 4
  call void @llvm.nvvm.barrier0()
  %nx = xor i64 %t64, 1
  %np = getelementptr inbounds [256 x float], ptr addrspace(3) @tile, i64 0, i64 %nx
  %nv = load float, ptr addrspace(3) %np, align 4
  %sh = call float @llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %nv, i32 16, i32 31)
  ; inline asm: bfe with immediate operands, a 16-bit move, a scoped predicate block
  %b = call i32 asm "bfe.u32 $0, $1, $2, $3;", "=r,r,n,n"(i32 %v, i32 4, i32 8)
  %h = trunc i32 %b to i16
  %h2 = call i16 asm "add.u16 $0, $1, $1;", "=h,h"(i16 %h)
  %sel = call i32 asm "{\0A\09.reg .pred p;\0A\09setp.gt.u32 p, $1, 16;\0A\09selp.b32 $0, 1, 0, p;\0A\09}", "=r,r"(i32 %tid)
  %rd = call i64 asm sideeffect "mov.u64 $0, %globaltimer;", "=l"()
  %f = call float asm "ex2.approx.f32 $0, $1;", "=f,f"(float %sh)
  %h32 = zext i16 %h2 to i32
  ; atomics
  %old = atomicrmw add ptr addrspace(1) @counter, i32 1 monotonic, align 4
  %x = atomicrmw xchg ptr addrspace(1) %out, i32 %sel seq_cst, align 4
  %mxp = getelementptr inbounds i32, ptr addrspace(1) %out, i64 1
  %mx = atomicrmw max ptr addrspace(1) %mxp, i32 %b monotonic, align 4
  %fa = atomicrmw fadd ptr addrspace(1) %fout, float %f monotonic, align 4
  %vp = getelementptr inbounds [3 x i64], ptr addrspace(1) @values, i64 0, i64 2
  %pair = cmpxchg ptr addrspace(1) %vp, i64 3, i64 %rd seq_cst seq_cst, align 8
  %ok = extractvalue { i64, i1 } %pair, 1
  %okz = zext i1 %ok to i32
  %gp0 = getelementptr inbounds [2 x ptr], ptr addrspace(1) @ptrs, i64 0, i64 0
  %gp = load ptr, ptr addrspace(1) %gp0, align 8
  %gv = load volatile i32, ptr %gp, align 4
  %zi = and i64 %t64, 63
  %zp = getelementptr inbounds [64 x i16], ptr addrspace(1) @zeros, i64 0, i64 %zi
  store i16 %h2, ptr addrspace(1) %zp, align 2
  %mi = and i64 %t64, 3
  %mp = getelementptr inbounds [6 x i8], ptr addrspace(1) @msg, i64 0, i64 %mi
  %ch = load i8, ptr addrspace(1) %mp, align 1
  %chz = zext i8 %ch to i32
  %s0 = add i32 %old, %x
  %s1 = add i32 %s0, %mx
  %s2 = add i32 %s1, %h32
  %s3 = add i32 %s2, %okz
  %s4 = add i32 %s3, %gv
  %s5 = add i32 %s4, %chz
  %op = getelementptr inbounds i32, ptr addrspace(1) %out, i64 %t64
  store i32 %s5, ptr addrspace(1) %op, align 4
  %fp2 = getelementptr inbounds float, ptr addrspace(1) %fout, i64 %t64
  %fs = fadd float %fa, %prod
  store float %fs, ptr addrspace(1) %fp2, align 4
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.barrier0()
declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)

!nvvm.annotations = !{!0}
!0 = !{ptr @asm_and_atomics, !"kernel", i32 1}
