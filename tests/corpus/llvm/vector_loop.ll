; corpus: archs=sm_80,sm_90a opts=-O0,-O2
; Exercises (llc): a kernel (nvvm.annotations) with a counted loop over <4 x float> global loads/stores, phi nodes, fmuladd, a scalar remainder loop, maxntid/minctasm annotations, sreg intrinsics.
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

define void @scale_add_v4(ptr addrspace(1) noalias %x, ptr addrspace(1) noalias %y, float %a, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %base = mul i32 %ctaid, %ntid
  %start = add i32 %base, %tid
  %stride = mul i32 %ntid, %nctaid
  %nvec = lshr i32 %n, 2
  %splat.a.0 = insertelement <4 x float> undef, float %a, i32 0
  %splat.a = shufflevector <4 x float> %splat.a.0, <4 x float> undef, <4 x i32> zeroinitializer
  %enter = icmp slt i32 %start, %nvec
  br i1 %enter, label %vloop, label %tail

vloop:
  %i = phi i32 [ %start, %entry ], [ %i.next, %vloop ]
  %i64 = sext i32 %i to i64
  %px = getelementptr inbounds <4 x float>, ptr addrspace(1) %x, i64 %i64
  %py = getelementptr inbounds <4 x float>, ptr addrspace(1) %y, i64 %i64
  %vx = load <4 x float>, ptr addrspace(1) %px, align 16
  %vy = load <4 x float>, ptr addrspace(1) %py, align 16
  %r = call <4 x float> @llvm.fmuladd.v4f32(<4 x float> %splat.a, <4 x float> %vx, <4 x float> %vy)
  store <4 x float> %r, ptr addrspace(1) %py, align 16
  %i.next = add nsw i32 %i, %stride
  %cont = icmp slt i32 %i.next, %nvec
  br i1 %cont, label %vloop, label %tail

tail:
  %rem.start = shl i32 %nvec, 2
  %t = add i32 %rem.start, %start
  %in.tail = icmp slt i32 %t, %n
  br i1 %in.tail, label %do.tail, label %exit

do.tail:
  %t64 = sext i32 %t to i64
  %sx = getelementptr inbounds float, ptr addrspace(1) %x, i64 %t64
  %sy = getelementptr inbounds float, ptr addrspace(1) %y, i64 %t64
  %fx = load float, ptr addrspace(1) %sx, align 4
  %fy = load float, ptr addrspace(1) %sy, align 4
  %fr = call float @llvm.fmuladd.f32(float %a, float %fx, float %fy)
  store float %fr, ptr addrspace(1) %sy, align 4
  br label %exit

exit:
  ret void
}

; Row sums with a nested loop and a reduction phi; results are stored as <2 x float> pairs.
define void @row_sums(ptr addrspace(1) noalias readonly %m, ptr addrspace(1) noalias %out, i32 %cols) {
entry:
  %row = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %r64 = zext i32 %row to i64
  %c64 = sext i32 %cols to i64
  %off = mul i64 %r64, %c64
  %rowp = getelementptr inbounds float, ptr addrspace(1) %m, i64 %off
  %has = icmp sgt i32 %cols, 0
  br i1 %has, label %loop, label %done

loop:
  %j = phi i32 [ 0, %entry ], [ %j.next, %loop ]
  %acc = phi float [ 0.0, %entry ], [ %acc.next, %loop ]
  %acc2 = phi float [ 0.0, %entry ], [ %acc2.next, %loop ]
  %j64 = zext i32 %j to i64
  %p = getelementptr inbounds float, ptr addrspace(1) %rowp, i64 %j64
  %v = load float, ptr addrspace(1) %p, align 4
  %acc.next = fadd float %acc, %v
  %sq = fmul float %v, %v
  %acc2.next = fadd float %acc2, %sq
  %j.next = add nuw nsw i32 %j, 1
  %more = icmp slt i32 %j.next, %cols
  br i1 %more, label %loop, label %done

done:
  %s = phi float [ 0.0, %entry ], [ %acc.next, %loop ]
  %s2 = phi float [ 0.0, %entry ], [ %acc2.next, %loop ]
  %is0 = icmp eq i32 %tid, 0
  br i1 %is0, label %store, label %exit

store:
  %pair.0 = insertelement <2 x float> undef, float %s, i32 0
  %pair = insertelement <2 x float> %pair.0, float %s2, i32 1
  %op = getelementptr inbounds <2 x float>, ptr addrspace(1) %out, i64 %r64
  store <2 x float> %pair, ptr addrspace(1) %op, align 8
  br label %exit

exit:
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare <4 x float> @llvm.fmuladd.v4f32(<4 x float>, <4 x float>, <4 x float>)
declare float @llvm.fmuladd.f32(float, float, float)

!nvvm.annotations = !{!0, !1, !2, !3, !4}
!0 = !{ptr @scale_add_v4, !"kernel", i32 1}
!1 = !{ptr @scale_add_v4, !"maxntidx", i32 256}
!2 = !{ptr @scale_add_v4, !"minctasm", i32 2}
!3 = !{ptr @row_sums, !"kernel", i32 1}
!4 = !{ptr @row_sums, !"reqntidx", i32 128}
