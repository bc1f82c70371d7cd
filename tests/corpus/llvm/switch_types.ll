; corpus: archs=sm_80,sm_90a opts=-O0,-O2,-O3
; Exercises (llc): a dense switch with side effects in each case, select chains, i8/i16/i64/i128 integer arithmetic (mul/udiv/shifts), funnel shifts, ctpop/ctlz/bitreverse/bswap intrinsics, f64 <-> integer conversions, half conversions, min/max intrinsics, freeze, unreachable default.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @dispatch(ptr addrspace(1) %out, ptr addrspace(1) %wide, i32 %op, i64 %a, i64 %b) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %key = add i32 %op, %tid
  %k = and i32 %key, 7
  switch i32 %k, label %default [
    i32 0, label %c0
    i32 1, label %c1
    i32 2, label %c2
    i32 3, label %c3
    i32 4, label %c4
    i32 5, label %c5
    i32 6, label %c6
  ]
c0:
  store i32 10, ptr addrspace(1) %out, align 4
  br label %join
c1:
  %p1 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 1
  store i32 21, ptr addrspace(1) %p1, align 4
  br label %join
c2:
  %p2 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 2
  %x2 = atomicrmw add ptr addrspace(1) %p2, i32 3 monotonic, align 4
  br label %join
c3:
  %p3 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 3
  store i32 %tid, ptr addrspace(1) %p3, align 4
  br label %join
c4:
  %p4 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 4
  %x4 = atomicrmw or ptr addrspace(1) %p4, i32 16 monotonic, align 4
  br label %join
c5:
  %p5 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 5
  store i32 -1, ptr addrspace(1) %p5, align 4
  br label %join
c6:
  %p6 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 6
  %x6 = atomicrmw xor ptr addrspace(1) %p6, i32 %key monotonic, align 4
  br label %join
default:
  %p7 = getelementptr inbounds i32, ptr addrspace(1) %out, i64 7
  store i32 77, ptr addrspace(1) %p7, align 4
  br label %join

join:
  ; 128-bit arithmetic
  %a128 = sext i64 %a to i128
  %b128 = zext i64 %b to i128
  %m128 = mul i128 %a128, %b128
  %sh = lshr i128 %m128, 64
  %hi = trunc i128 %sh to i64
  %lo = trunc i128 %m128 to i64
  %bnz = or i64 %b, 1
  %q = udiv i64 %a, %bnz
  %r = srem i64 %a, %bnz
  %fsh = call i64 @llvm.fshl.i64(i64 %a, i64 %b, i64 13)
  %pc = call i64 @llvm.ctpop.i64(i64 %a)
  %lz = call i64 @llvm.ctlz.i64(i64 %b, i1 false)
  %br = call i32 @llvm.bitreverse.i32(i32 %key)
  %bs = call i32 @llvm.bswap.i32(i32 %key)
  %br64 = zext i32 %br to i64
  %bs64 = zext i32 %bs to i64
  %b8 = trunc i32 %key to i8
  %m8 = mul i8 %b8, 7
  %m8z = zext i8 %m8 to i64
  %h16 = trunc i64 %a to i16
  %s16 = ashr i16 %h16, 3
  %s16z = sext i16 %s16 to i64
  %smax = call i64 @llvm.smax.i64(i64 %a, i64 %b)
  %umin = call i64 @llvm.umin.i64(i64 %a, i64 %b)
  %fz = freeze i64 %r
  %d = sitofp i64 %a to double
  %dh = fptrunc double %d to half
  %hf = fpext half %dh to double
  %dd = fdiv double %hf, 3.0
  %di = fptosi double %dd to i64
  %cmp = fcmp olt double %d, 0.0
  %neg = select i1 %cmp, i64 %di, i64 %q
  %t0 = add i64 %hi, %lo
  %t1 = xor i64 %t0, %fsh
  %t2 = add i64 %t1, %pc
  %t3 = add i64 %t2, %lz
  %t4 = xor i64 %t3, %br64
  %t5 = add i64 %t4, %bs64
  %t6 = add i64 %t5, %m8z
  %t7 = add i64 %t6, %s16z
  %t8 = xor i64 %t7, %smax
  %t9 = add i64 %t8, %umin
  %t10 = add i64 %t9, %fz
  %t11 = add i64 %t10, %neg
  %t64 = zext i32 %tid to i64
  %wp = getelementptr inbounds i64, ptr addrspace(1) %wide, i64 %t64
  store i64 %t11, ptr addrspace(1) %wp, align 8
  %wp128 = getelementptr inbounds i128, ptr addrspace(1) %wide, i64 1024
  store i128 %m128, ptr addrspace(1) %wp128, align 16
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i64 @llvm.fshl.i64(i64, i64, i64)
declare i64 @llvm.ctpop.i64(i64)
declare i64 @llvm.ctlz.i64(i64, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.bswap.i32(i32)
declare i64 @llvm.smax.i64(i64, i64)
declare i64 @llvm.umin.i64(i64, i64)

!nvvm.annotations = !{!0}
!0 = !{ptr @dispatch, !"kernel", i32 1}
